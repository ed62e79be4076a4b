"""Scoring: pass@k against hand-computed numbers, and counts against answers whose verdicts are known,
judged by the real executor."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from azr.core.task import Task, TaskType, zero_seed
from azr.eval.generation import Response
from azr.eval.runner import Sampling, evaluate_checkpoint, model_directory
from azr.eval.scoring import EvalReport, evaluate, pass_at_k
from azr.eval.suites import load_suite, parse_task_lines, task_line, without_messages
from azr.executor.pool import ExecutorPool
from azr.roles.config import RolesConfig
from azr.roles.templates import Prompt
from azr.solver.gold import gold_completion
from azr.solver.prompts import solver_prompt

CONFIG = RolesConfig()


def test_pass_at_k_by_hand() -> None:
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(4, 3, 2) == 1.0
    with pytest.raises(ValueError, match="needs at least"):
        pass_at_k(2, 1, 3)


def _score(tasks: Sequence[Task], answers: dict[str, list[str]]) -> EvalReport:
    """Evaluate a scripted model that answers the task whose prompt it is shown with ``answers[id]``."""
    prompts_to_id: dict[str, str] = {}

    def generate(prompts: Sequence[Prompt], n: int) -> list[list[Response]]:
        return [[Response(text, 7, False) for text in answers[prompts_to_id[p.body]][:n]] for p in prompts]

    async def run() -> EvalReport:
        from azr.solver.prompts import solver_prompt

        async with ExecutorPool.create("local", workers=2) as pool:
            for task in tasks:
                validation = await pool.validate(task)
                if validation.outputs is not None:
                    prompts_to_id[solver_prompt(task.with_outputs(validation.outputs), CONFIG).body] = task.id
            return await evaluate(tasks, generate, pool, CONFIG, samples=2, suite="t", temperature=1.0)

    return asyncio.run(run())


def test_counts_of_right_wrong_malformed_and_invalid() -> None:
    seeds = {t: zero_seed(t) for t in TaskType}
    gold = {t: gold_completion(s) for t, s in seeds.items()}
    broken = Task(type=TaskType.DEDUCTION, program="def f(x):\n    return 1 / 0", inputs=("1",))
    wrong_deduction = "<think> </think> <answer>\n```output\n'Goodbye'\n```\n</answer>"
    answers = {
        seeds[TaskType.DEDUCTION].id: [gold[TaskType.DEDUCTION], wrong_deduction],  # 1 of 2
        seeds[TaskType.ABDUCTION].id: [gold[TaskType.ABDUCTION]] * 2,  # 2 of 2
        seeds[TaskType.INDUCTION].id: ["no answer here", "<answer>\n```output\n1\n```\n</answer>"],  # 0 of 2
    }
    report = _score([*seeds.values(), broken], answers)
    deduction, abduction, induction = (report.by_type[t.value] for t in TaskType)
    assert (deduction.tasks, deduction.invalid, deduction.responses) == (2, 1, 2)
    assert (deduction.pass_at_1, deduction.pass_at_k, deduction.format_error_rate) == (0.5, 1.0, 0.0)
    assert (abduction.pass_at_1, abduction.pass_at_k) == (1.0, 1.0)
    assert (induction.pass_at_1, induction.pass_at_k, induction.format_error_rate) == (0.0, 0.0, 1.0)
    assert induction.format_errors == {"missing_answer": 1, "no_code_block": 1}
    assert report.overall.tasks == 4 and report.overall.invalid == 1 and report.overall.responses == 6
    assert report.overall.pass_at_1 == pytest.approx(1.5 / 3)
    assert report.overall.mean_response_tokens == 7.0
    assert report.metrics()["eval/t/abduction/accuracy"] == 1.0
    assert "answers" not in report.to_dict()


def test_the_answers_keep_each_response_with_its_verdict_and_read_back_as_tasks() -> None:
    seed = zero_seed(TaskType.DEDUCTION)
    wrong = "<think> </think> <answer>\n```output\n'Goodbye'\n```\n</answer>"
    report = _score([seed], {seed.id: [gold_completion(seed), wrong]})
    (answers,) = report.answers
    line = json.loads(json.dumps(answers.to_dict()))
    assert line["correct"] == 1
    assert [(r["text"], r["correct"], r["format_error"]) for r in line["responses"]] == [
        (gold_completion(seed), True, None),
        (wrong, False, None),
    ]
    assert line["task"]["outputs"] == list(answers.task.outputs) and answers.task.outputs
    (again,) = parse_task_lines(json.dumps(line), source="answers.jsonl")
    assert again.id == seed.id


def test_azr_eval_writes_the_report_and_the_answers(tiny_model_dir: Path, tmp_path: Path) -> None:
    azr = Path(sys.executable).with_name("azr")
    report, answers = tmp_path / "report.json", tmp_path / "answers.jsonl"
    command = [str(azr), "eval", "--checkpoint", str(tiny_model_dir), "--suite", "zero-seed"]
    command += ["--max-new-tokens", "4", "--out", str(report), "--answers", str(answers)]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    assert json.loads(report.read_text())["overall"]["tasks"] == 3
    lines = [json.loads(line) for line in answers.read_text().splitlines()]
    assert sorted(line["task"]["type"] for line in lines) == sorted(t.value for t in TaskType)
    assert all(len(line["responses"]) == 1 and line["correct"] == 0 for line in lines)


def test_a_known_checkpoint_on_the_zero_seed_suite(tiny_model_dir: Path) -> None:
    """The untrained tiny model cannot write an answer in 4 tokens: every response is a format error."""
    report = asyncio.run(
        evaluate_checkpoint(
            tiny_model_dir, load_suite("zero-seed"), suite="zero-seed", sampling=Sampling(max_new_tokens=4)
        )
    )
    assert set(report.by_type) == {t.value for t in TaskType}
    for score in report.by_type.values():
        assert (score.tasks, score.invalid, score.responses, score.unjudged) == (1, 0, 1, 0)
        assert score.pass_at_1 == 0.0 and score.format_error_rate == 1.0
        assert 0 < score.mean_response_tokens <= 4
    assert report.checkpoint == str(tiny_model_dir)


def test_suite_files_take_jobs_or_bare_tasks_and_ignore_their_outputs() -> None:
    seed = zero_seed(TaskType.DEDUCTION)
    text = task_line(seed) + "\n\n" + '{"type": "abduction", "program": "def f(x):\\n    return x", '
    text += '"inputs": ["1"], "outputs": ["999"]}\n'
    tasks = parse_task_lines(text, source="t.jsonl")
    assert [t.type for t in tasks] == [TaskType.DEDUCTION, TaskType.ABDUCTION]
    assert all(t.outputs == () for t in tasks)
    assert tasks[0].id == seed.id
    with pytest.raises(ValueError, match=r"t.jsonl:1"):
        parse_task_lines('{"nothing": 1}', source="t.jsonl")


def test_without_messages_drops_only_the_induction_messages_from_the_prompts() -> None:
    suite = load_suite("heldout")
    ablated = without_messages(suite)
    assert [(t.type, t.program, t.inputs) for t in ablated] == [(t.type, t.program, t.inputs) for t in suite]
    for original, task in zip(suite, ablated, strict=True):
        if task.type is TaskType.INDUCTION:
            assert original.message and not task.message
            shown = original.with_outputs(original.inputs)  # any outputs will do for the prompt's layout
            assert f"```message\n{original.message}" in solver_prompt(shown, CONFIG).body
            assert "```message" not in solver_prompt(task.with_outputs(task.inputs), CONFIG).body
        else:
            assert task == original


def test_model_directory_finds_the_newest_checkpoint_of_a_run(tmp_path: Path) -> None:
    for step in (5, 10):
        (tmp_path / "checkpoints" / f"step-{step:08d}" / "model").mkdir(parents=True)
        (tmp_path / "checkpoints" / f"step-{step:08d}" / "model" / "config.json").write_text("{}")
    (tmp_path / "config.json").write_text('{"model": "tiny-warm"}')  # the run's settings, not a model
    assert model_directory(tmp_path) == tmp_path / "checkpoints" / "step-00000010" / "model"
    assert model_directory(tmp_path / "checkpoints" / "step-00000005") == (
        tmp_path / "checkpoints" / "step-00000005" / "model"
    )
    with pytest.raises(FileNotFoundError):
        model_directory(tmp_path / "checkpoints" / "missing")
