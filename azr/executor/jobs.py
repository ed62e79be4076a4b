"""Typed records of the executor's batch contract: jobs in, results out, one JSON object per line.

A job asks the executor to ``validate`` a task (run it, compute its gold outputs) or to ``check`` an answer
to a task. Every job gets exactly one result with the job's id. The meaning of a result:

- ``ok`` false: the job could not be judged or the task is invalid; ``error`` says why. ``infra_error``
  means the executor itself failed: retry or drop the sample, never turn it into a reward. A line that is
  not a well-formed job gets ``ok`` false with ``bad_answer`` and a message starting "malformed job".
- ``ok`` true on ``validate``: the task is valid and ``outputs`` holds its gold outputs, one per input.
- ``ok`` true on ``check``: the answer was judged and ``correct`` says whether it is right. A wrong answer
  may carry an ``error`` that says why it failed: ``bad_answer`` when it does not parse as a literal (a
  format problem, which reward shaping may treat apart from a well-formed wrong answer), or the error the
  answer caused when run (an abduction input that makes ``f`` raise, an induction program the gate
  forbids or that times out). A well-formed wrong answer has no error.

Decoding never lets an exception escape for bad input: ``decode_job`` raises ``MalformedJobError``, an
``ExecutorError`` that carries the best id it could find (the job's own, else ``line-N``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from azr.core.task import Task
from azr.executor.errors import ErrorCode, ExecError, ExecutorError

MAX_JOB_ID_CHARS = 200
"""Longest job id accepted; ids are labels, not payloads."""


class JobOp(StrEnum):
    VALIDATE = "validate"  # run the task, return its gold outputs or why it is invalid
    CHECK = "check"  # judge an answer against the task's gold outputs


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    op: JobOp
    task: Task
    answer: str | None = None
    """The solver's answer text; required for ``check``, absent for ``validate``."""

    def __post_init__(self) -> None:
        if (self.op is JobOp.CHECK) != (self.answer is not None):
            raise ValueError("a check job needs an answer and a validate job must not have one")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "op": self.op.value, "task": self.task.to_dict()}
        if self.answer is not None:
            data["answer"] = self.answer
        return data

    def to_json(self) -> str:
        # ASCII escapes: a lone surrogate in a job's text stays valid JSON and never fails to encode.
        return json.dumps(self.to_dict(), separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Validation:
    """Outcome of validating a task: its gold outputs, or the error that makes it invalid."""

    outputs: tuple[str, ...] | None
    error: ExecError | None

    def __post_init__(self) -> None:
        if (self.outputs is None) == (self.error is None):
            raise ValueError("a validation has exactly one of outputs and error")

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class Judgement:
    """Outcome of checking an answer (see the module docstring for what ``ok``/``correct``/``error`` mean)."""

    ok: bool
    correct: bool | None
    error: ExecError | None

    def __post_init__(self) -> None:
        if self.ok and self.correct is None:
            raise ValueError("a judged answer is either correct or not")
        if not self.ok and (self.correct is not None or self.error is None):
            raise ValueError("a job that could not be judged has an error and no verdict")
        if self.correct and self.error is not None:
            raise ValueError("a correct answer carries no error")

    @classmethod
    def invalid(cls, error: ExecError) -> Judgement:
        """The job could not be judged (invalid task, malformed job, executor failure)."""
        return cls(ok=False, correct=None, error=error)

    @classmethod
    def wrong(cls, error: ExecError | None = None) -> Judgement:
        return cls(ok=True, correct=False, error=error)


@dataclass(frozen=True, slots=True)
class JobResult:
    id: str
    ok: bool
    outputs: tuple[str, ...] | None = None
    """Gold outputs of a valid task (``validate`` only), full length."""
    correct: bool | None = None
    """Whether the answer is right (``check`` with ``ok`` true only)."""
    error: ExecError | None = None
    elapsed_ms: float = 0.0
    """Wall time from when the pool took the job up (a free slot) to its result."""

    @classmethod
    def of(cls, job_id: str, outcome: Validation | Judgement, elapsed_ms: float) -> JobResult:
        if isinstance(outcome, Validation):
            return cls(job_id, outcome.ok, outcome.outputs, None, outcome.error, elapsed_ms)
        return cls(job_id, outcome.ok, None, outcome.correct, outcome.error, elapsed_ms)

    @classmethod
    def failed(cls, job_id: str, error: ExecError, elapsed_ms: float = 0.0) -> JobResult:
        return cls(job_id, ok=False, error=error, elapsed_ms=elapsed_ms)

    def to_dict(self) -> dict[str, Any]:
        """The DESIGN.md result shape: ``outputs`` and ``correct`` appear only when they have a value."""
        data: dict[str, Any] = {"id": self.id, "ok": self.ok}
        if self.outputs is not None:
            data["outputs"] = list(self.outputs)
        if self.correct is not None:
            data["correct"] = self.correct
        data["error"] = None if self.error is None else self.error.to_dict()
        data["elapsed_ms"] = round(self.elapsed_ms, 3)
        return data

    def to_json(self) -> str:
        # ASCII escapes: a lone surrogate in a job's text stays valid JSON and never fails to encode.
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobResult:
        outputs = data.get("outputs")
        error = data.get("error")
        return cls(
            id=str(data["id"]),
            ok=bool(data["ok"]),
            outputs=None if outputs is None else tuple(str(o) for o in outputs),
            correct=data.get("correct"),
            error=None if error is None else ExecError.from_dict(error),
            elapsed_ms=float(data.get("elapsed_ms", 0.0)),
        )


class MalformedJobError(ExecutorError):
    """A batch line that is not a well-formed job; ``job_id`` is where its result goes."""

    def __init__(self, job_id: str, message: str) -> None:
        super().__init__(ErrorCode.BAD_ANSWER, f"malformed job: {message}")
        self.job_id = job_id

    def result(self) -> JobResult:
        return JobResult.failed(self.job_id, self.error)


def line_id(line_number: int) -> str:
    """The id given to the result of a line whose own id cannot be read."""
    return f"line-{line_number}"


def decode_job(line: str | bytes, line_number: int) -> Job:
    """Decode one batch line (1-based ``line_number``); raises ``MalformedJobError`` and nothing else."""
    fallback = line_id(line_number)
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise MalformedJobError(fallback, f"line {line_number} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise MalformedJobError(fallback, f"line {line_number} is not a JSON object")
    job_id = data.get("id")
    if not isinstance(job_id, str) or not 0 < len(job_id) <= MAX_JOB_ID_CHARS:
        raise MalformedJobError(
            fallback, f"line {line_number}: 'id' must be a string of 1 to {MAX_JOB_ID_CHARS} characters"
        )
    op = data.get("op")
    if op not in tuple(JobOp):
        raise MalformedJobError(job_id, f"'op' must be one of {', '.join(JobOp)}, got {op!r}")
    task_data = data.get("task")
    if not isinstance(task_data, dict):
        raise MalformedJobError(job_id, "'task' must be a JSON object")
    try:
        task = Task.from_dict(task_data)
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedJobError(job_id, f"bad task: {_describe(exc)}") from None
    answer = data.get("answer")
    if op == JobOp.CHECK and not isinstance(answer, str):
        raise MalformedJobError(job_id, "a check job needs a string 'answer'")
    if op == JobOp.VALIDATE and answer is not None:
        raise MalformedJobError(job_id, "a validate job takes no 'answer'")
    return Job(id=job_id, op=JobOp(op), task=task, answer=answer)


def _describe(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc)
