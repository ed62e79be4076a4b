"""Bodies of the executor service's HTTP API.

Jobs keep the batch contract of DESIGN.md (the same objects as a line of ``azr executor run``); each one is
decoded by ``azr.executor.jobs.decode_job``, the single place that knows what a well-formed job is, so a
malformed job is refused with 422 and the decoder's message.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from azr.core.task import Origin, TaskType
from azr.executor.jobs import MAX_JOB_ID_CHARS, Job, JobOp, MalformedJobError, decode_job


class TaskIn(BaseModel):
    """A task as ``Task.to_dict`` writes it; ``id`` is accepted and ignored (it is a content hash)."""

    model_config = ConfigDict(extra="forbid")

    type: TaskType
    program: str = Field(description="Source that defines the entry function f.")
    inputs: list[str] = Field(description='Argument-list texts, one per call of f, e.g. "[1, 2], 3".')
    outputs: list[str] = Field(default_factory=list, description="Gold outputs; needed by check jobs.")
    message: str = Field(default="", description="The induction message.")
    origin: Origin = Origin.PROPOSED
    step: int = Field(default=0, strict=True)
    parents: list[str] = Field(default_factory=list)
    id: str | None = Field(default=None, description="Ignored: recomputed from the task's content.")


class JobIn(BaseModel):
    """One job: ``validate`` a task, or ``check`` an answer to it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=MAX_JOB_ID_CHARS, description="Label echoed in the result.")
    op: JobOp
    task: TaskIn
    answer: str | None = Field(default=None, description="The answer to judge; check jobs only.")
    _job: Job | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _decode(self) -> Self:
        try:
            self._job = decode_job(json.dumps(self.model_dump(mode="json", exclude_none=True)), 1)
        except MalformedJobError as exc:
            raise ValueError(exc.error.message) from None
        return self

    @classmethod
    def of(cls, job: Job) -> JobIn:
        return cls.model_validate(job.to_dict())

    @property
    def job(self) -> Job:
        assert self._job is not None, "set by the validator"
        return self._job


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: list[JobIn] = Field(min_length=1, description="Jobs of the batch; ids should be unique within it.")

    @model_validator(mode="after")
    def _unique_ids(self) -> Self:
        ids = [job.id for job in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique within a batch (results are matched by id)")
        return self


class BatchAccepted(BaseModel):
    batch_id: str
    size: int = Field(description="Jobs admitted; exactly this many results will come back.")


class BatchStatus(BaseModel):
    batch_id: str
    size: int
    done: int = Field(description="Results finished so far.")
    complete: bool
    results: list[dict[str, Any]] = Field(
        description="Finished results from position 'after' on, in completion order (DESIGN.md result shape)."
    )


class Health(BaseModel):
    status: Literal["ok", "starting", "draining"]
    backend: str
    isolation: dict[str, Any] = Field(description="What the backend achieved (IsolationReport).")
    pool: dict[str, int] | None = Field(description="Sandbox pool counters, when the backend keeps a pool.")
    pending_jobs: int
    max_pending_jobs: int


class Problem(BaseModel):
    """Body of every error answer this service writes itself."""

    detail: str
