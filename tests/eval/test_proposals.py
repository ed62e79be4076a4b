"""Scoring the proposer: which requests a suite gives, and counts against proposals whose verdicts are
known, judged by the real executor; ``azr eval --role propose`` on the project's tiny model."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from azr.core.task import Task, TaskType, zero_seed
from azr.eval.generation import Response
from azr.eval.proposals import ProposerReport, evaluate_proposer, proposal_requests
from azr.executor.pool import ExecutorPool
from azr.proposer.gold import propose_completion
from azr.proposer.prompts import ProposalRequest, proposer_prompt
from azr.roles.config import RolesConfig
from azr.roles.templates import Prompt

CONFIG = RolesConfig()


def _count_chars(prompt: Prompt) -> int:
    return len(prompt.body)


def _program(name: str, body: str) -> Task:
    return Task(
        type=TaskType.DEDUCTION, program=f"def f(x):\n    return {body}", inputs=("3",), outputs=(name,)
    )


def test_every_program_task_gives_a_request_of_its_type_and_an_induction_request() -> None:
    deductions = [_program(str(i), f"x + {i}") for i in range(5)]
    abduction = Task(
        type=TaskType.ABDUCTION, program="def f(x):\n    return -x", inputs=("2",), outputs=("-2",)
    )
    induction = zero_seed(TaskType.INDUCTION)
    tasks = [*deductions, abduction, induction]

    requests = proposal_requests(tasks, CONFIG, _count_chars, seed=0)

    assert [r.type for r in requests] == [TaskType.DEDUCTION] * 5 + [TaskType.ABDUCTION] + [
        TaskType.INDUCTION
    ] * 6
    for request, task in zip(requests[:5], deductions, strict=True):
        assert request.references[0] is task, "a request shows its own task first"
        assert len(request.references) == min(CONFIG.n_references, 5)
        assert len({r.id for r in request.references}) == len(request.references)
    assert requests[5].references == (abduction,)
    assert [r.references[0] for r in requests[6:]] == [*deductions, abduction], (
        "induction never takes its own"
    )
    assert requests == proposal_requests(tasks, CONFIG, _count_chars, seed=0), "the same requests every time"
    assert requests != proposal_requests(tasks, CONFIG, _count_chars, seed=1)

    one_reference = len(proposer_prompt(ProposalRequest(TaskType.DEDUCTION, (deductions[0],)), CONFIG).body)
    tight = CONFIG.model_copy(update={"max_prompt_tokens": one_reference})
    fitted = proposal_requests(deductions, tight, _count_chars)
    assert all(len(r.references) == 1 for r in fitted if r.type is TaskType.DEDUCTION), "fitted to the budget"


def _score(tasks: Sequence[Task], completions: dict[tuple[TaskType, str], list[str]]) -> ProposerReport:
    """Score a scripted proposer that answers the request (type, first reference) with ``completions``."""

    async def run() -> ProposerReport:
        async with ExecutorPool.create("local", workers=2) as pool:
            valid = []
            for task in tasks:
                validation = await pool.validate(task)
                if validation.outputs is not None:
                    valid.append(task.with_outputs(validation.outputs))
            by_prompt = {
                proposer_prompt(r, CONFIG).body: (r.type, r.references[0].id)
                for r in proposal_requests(valid, CONFIG, _count_chars)
            }

            def generate(prompts: Sequence[Prompt], n: int) -> list[list[Response]]:
                return [[Response(t, 9, False) for t in completions[by_prompt[p.body]][:n]] for p in prompts]

            return await evaluate_proposer(
                tasks, generate, _count_chars, pool, CONFIG, samples=2, suite="t", checkpoint="scripted"
            )

    return asyncio.run(run())


def test_counts_of_valid_broken_and_rejected_proposals() -> None:
    double, identity = _program("6", "x * 2"), zero_seed(TaskType.DEDUCTION)
    abduction = Task(type=TaskType.ABDUCTION, program="def f(x):\n    return -x", inputs=("2",))
    unrunnable = Task(type=TaskType.DEDUCTION, program="def f(x):\n    return 1 / 0", inputs=("1",))
    program, one = "```python\ndef f(x):\n    return x / 0\n```", "```input\n1\n```"
    divide = f"<think> a task </think> <answer>\n{program}\n{one}\n</answer>"

    def induction(program: Task, values: Sequence[int]) -> str:
        inputs = tuple(str(v) for v in values)
        return propose_completion(Task(TaskType.INDUCTION, program.program, inputs, message="a hint"))

    ten, repeat = range(10), [*range(9), 0]
    completions = {
        (TaskType.DEDUCTION, double.id): [propose_completion(identity), divide],
        (TaskType.DEDUCTION, identity.id): [propose_completion(double), "no answer here"],
        (TaskType.ABDUCTION, abduction.id): [propose_completion(abduction)] * 2,
        (TaskType.INDUCTION, double.id): [induction(double, ten), induction(double, repeat)],
        (TaskType.INDUCTION, identity.id): [induction(identity, ten)] * 2,
        (TaskType.INDUCTION, abduction.id): [induction(abduction, range(20, 31)), induction(abduction, ten)],
    }
    report = _score([double, identity, abduction, unrunnable], completions)

    deduction, abduction_score, induction_score = (report.by_type[t.value] for t in TaskType)
    assert (deduction.prompts, deduction.proposals, deduction.valid) == (2, 4, 2), (
        "the unrunnable task asks nothing"
    )
    assert deduction.invalid == {"rejected:runtime_error": 1, "missing_answer": 1}
    assert (abduction_score.prompts, abduction_score.valid, abduction_score.valid_rate) == (1, 2, 1.0)
    assert (induction_score.prompts, induction_score.proposals, induction_score.valid) == (3, 6, 4)
    assert induction_score.invalid == {"too_few_inputs": 1, "too_many_inputs": 1}
    assert (report.overall.proposals, report.overall.valid, report.overall.unjudged) == (12, 8, 0)
    assert report.overall.valid_rate == 8 / 12 and report.overall.mean_response_tokens == 9
    assert report.metrics()["eval/t/propose/induction/valid_rate"] == 4 / 6

    first = report.requests[0].to_dict()
    assert first["references"][0] == double.id and first["valid"] == 1
    valid, rejected = first["proposals"]
    assert valid["task"]["program"] == identity.program and valid["task"]["outputs"], (
        "valid: with gold outputs"
    )
    assert (rejected["valid"], rejected["rejected"], rejected["task"]["outputs"]) == (
        False,
        "runtime_error",
        [],
    )
    assert "requests" not in report.to_dict() and report.to_dict()["role"] == "proposer"


def test_azr_eval_scores_the_proposer(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The untrained tiny model cannot write a proposal in 4 tokens: every one is invalid, and counted."""
    azr = Path(sys.executable).with_name("azr")
    report, answers = tmp_path / "report.json", tmp_path / "proposals.jsonl"
    command = [
        str(azr),
        "eval",
        "--checkpoint",
        str(tiny_model_dir),
        "--suite",
        "zero-seed",
        "--role",
        "propose",
    ]
    command += ["--samples", "2", "--max-new-tokens", "4", "--out", str(report), "--answers", str(answers)]
    subprocess.run(command, check=True, capture_output=True, timeout=300)

    scores = json.loads(report.read_text())
    assert scores["temperature"] == 1.0, "proposals are sampled, as in self-play"
    prompts = {name: s["prompts"] for name, s in scores["by_type"].items()}
    assert prompts == {"deduction": 1, "abduction": 1, "induction": 2}
    assert scores["overall"]["proposals"] == 8 and scores["overall"]["valid"] == 0
    assert sum(scores["overall"]["invalid"].values()) == 8
    lines = [json.loads(line) for line in answers.read_text().splitlines()]
    assert [len(line["proposals"]) for line in lines] == [2, 2, 2, 2]
