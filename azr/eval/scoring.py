"""Scoring a checkpoint's solver on a suite: pass@1, pass@k, format errors and response length per type.

1. The executor validates every task and computes its gold outputs (a file's outputs are never used).
   Tasks it rejects are counted as ``invalid`` and not scored.
2. Each valid task is rendered with the solver's prompt, exactly as self-play shows it, and answered
   ``samples`` times.
3. Each response is parsed by the solver's parser (a failure is a format error, and wrong) and the
   executor checks the parsed answer. A response the executor could not judge (``infra_error``) is
   counted as ``unjudged`` and left out of the rates rather than scored as wrong.

pass@1 is the mean over tasks of c/n (c correct of n judged responses); pass@k is the unbiased estimator
1 - C(n-c, k)/C(n, k) of Chen et al. (2021) with k = n, i.e. whether any response was correct.

The report keeps every scored task with its responses and their verdicts (``EvalReport.answers``), so
what a model answered can be read and two checkpoints compared task by task; ``to_dict`` is the summary.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from azr.core.task import Task, TaskType
from azr.eval.generation import Response
from azr.executor.api import Executor
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatFailure
from azr.roles.templates import Prompt
from azr.solver.parsing import parse_answer
from azr.solver.prompts import solver_prompt

Generate = Callable[[Sequence[Prompt], int], list[list[Response]]]
"""``(prompts, n) -> n responses per prompt``: the model under evaluation, prompts rendered by the caller."""


@dataclass(frozen=True, slots=True)
class SampleVerdict:
    """One response and how it was judged."""

    text: str
    correct: bool
    format_error: str | None
    judged: bool
    tokens: int


@dataclass(frozen=True, slots=True)
class TaskAnswers:
    """A scored task (with the executor's gold outputs) and the verdicts on its responses."""

    task: Task
    verdicts: tuple[SampleVerdict, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task.to_dict(),
            "correct": sum(v.correct for v in self.verdicts),
            "responses": [
                {"text": v.text, "correct": v.correct, "format_error": v.format_error, "judged": v.judged}
                for v in self.verdicts
            ],
        }


@dataclass(slots=True)
class TypeScore:
    """The scores of one task type (or of all types, for ``overall``)."""

    tasks: int = 0
    invalid: int = 0
    responses: int = 0
    unjudged: int = 0
    pass_at_1: float = 0.0
    pass_at_k: float = 0.0
    format_error_rate: float = 0.0
    mean_response_tokens: float = 0.0
    format_errors: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class EvalReport:
    suite: str
    checkpoint: str
    samples: int
    temperature: float
    by_type: dict[str, TypeScore]
    overall: TypeScore
    answers: list[TaskAnswers] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The scores, without the answers (``TaskAnswers.to_dict`` gives each of those)."""
        return {
            "suite": self.suite,
            "checkpoint": self.checkpoint,
            "samples": self.samples,
            "temperature": self.temperature,
            "by_type": {name: asdict(score) for name, score in self.by_type.items()},
            "overall": asdict(self.overall),
        }

    def metrics(self, prefix: str = "eval") -> dict[str, float]:
        """Flat ``eval/<suite>/<type>/accuracy`` style metrics (pass@1 is the accuracy)."""
        out: dict[str, float] = {}
        for name, score in [*self.by_type.items(), ("overall", self.overall)]:
            base = f"{prefix}/{self.suite}/{name}"
            out[f"{base}/accuracy"] = score.pass_at_1
            out[f"{base}/pass_at_k"] = score.pass_at_k
            out[f"{base}/format_error_rate"] = score.format_error_rate
        return out


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al., 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


async def judge(executor: Executor, task: Task, response: Response, config: RolesConfig) -> SampleVerdict:
    answer = parse_answer(response.text, task.type, config, stopped_by_length=response.stopped_by_length)
    if isinstance(answer, FormatFailure):
        return SampleVerdict(response.text, False, answer.error.value, True, response.tokens)
    judgement = await executor.check(task, answer.text)
    return SampleVerdict(response.text, bool(judgement.correct), None, judgement.ok, response.tokens)


async def evaluate(
    tasks: Sequence[Task],
    generate: Generate,
    executor: Executor,
    config: RolesConfig,
    *,
    samples: int = 1,
    suite: str = "tasks",
    checkpoint: str = "",
    temperature: float = 0.0,
) -> EvalReport:
    """Score ``generate`` on ``tasks`` (see the module docstring)."""
    validations = await asyncio.gather(*(executor.validate(t) for t in tasks))
    valid = [
        t.with_outputs(v.outputs) for t, v in zip(tasks, validations, strict=True) if v.outputs is not None
    ]
    responses = generate([solver_prompt(t, config) for t in valid], samples) if valid else []
    verdicts = await asyncio.gather(
        *(
            asyncio.gather(*(judge(executor, t, r, config) for r in rs))
            for t, rs in zip(valid, responses, strict=True)
        )
    )
    by_type: dict[str, TypeScore] = {}
    for task_type in TaskType:
        of_type = [(t, list(vs)) for t, vs in zip(valid, verdicts, strict=True) if t.type is task_type]
        invalid = sum(1 for t, v in zip(tasks, validations, strict=True) if t.type is task_type and not v.ok)
        if of_type or invalid:
            by_type[task_type.value] = _score(of_type, invalid, samples)
    everything = [(t, list(vs)) for t, vs in zip(valid, verdicts, strict=True)]
    overall = _score(everything, len(tasks) - len(valid), samples)
    answers = [TaskAnswers(t, tuple(vs)) for t, vs in everything]
    return EvalReport(suite, checkpoint, samples, temperature, by_type, overall, answers)


def _score(rows: Sequence[tuple[Task, list[SampleVerdict]]], invalid: int, k: int) -> TypeScore:
    score = TypeScore(tasks=len(rows) + invalid, invalid=invalid)
    at_1, at_k, lengths, format_errors = [], [], [], 0
    for _, verdicts in rows:
        judged = [v for v in verdicts if v.judged]
        score.responses += len(verdicts)
        score.unjudged += len(verdicts) - len(judged)
        lengths += [v.tokens for v in verdicts]
        for v in verdicts:
            if v.format_error is not None:
                format_errors += 1
                score.format_errors[v.format_error] = score.format_errors.get(v.format_error, 0) + 1
        if judged:
            correct = sum(v.correct for v in judged)
            at_1.append(correct / len(judged))
            at_k.append(pass_at_k(len(judged), correct, min(k, len(judged))))
    score.pass_at_1 = math.fsum(at_1) / len(at_1) if at_1 else 0.0
    score.pass_at_k = math.fsum(at_k) / len(at_k) if at_k else 0.0
    score.format_error_rate = format_errors / score.responses if score.responses else 0.0
    score.mean_response_tokens = math.fsum(lengths) / len(lengths) if lengths else 0.0
    return score
