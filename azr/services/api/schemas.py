"""Every body the API reads or writes, as pydantic models with validated limits."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from azr.core.task import Origin, Task, TaskType, seed_problem
from azr.executor.errors import ErrorCode

MAX_PROGRAM_CHARS = 20_000
MAX_INPUTS = 32
MAX_INPUT_CHARS = 4_000
MAX_MESSAGE_CHARS = 2_000
MAX_STEP = 2**53


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    """An error, as RFC 9457 ``application/problem+json``."""

    type: str = Field(default="about:blank", description="A URI naming the kind of problem.")
    title: str = Field(description="Short summary of the kind of problem.")
    status: int = Field(description="The HTTP status code.")
    detail: str = Field(default="", description="What went wrong with this request.")
    error_class: ErrorCode | None = Field(default=None, description="The executor's error class, if any.")
    errors: list[SeedOutcome] | list[dict[str, object]] | None = Field(
        default=None, description="Per-item outcomes (seed lists) or per-field validation errors."
    )


class SeedIn(_Body):
    """A seed task: a program defining ``f`` and argument lists; induction also needs a message."""

    type: TaskType
    program: str = Field(min_length=1, max_length=MAX_PROGRAM_CHARS, description="Source defining f.")
    inputs: list[str] = Field(
        min_length=1,
        max_length=MAX_INPUTS,
        description="Argument-list texts, each a Python literal expression list such as '[1, 2], 3'.",
    )
    message: str = Field(
        default="", max_length=MAX_MESSAGE_CHARS, description="Induction only: a hint about what f does."
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if any(not text.strip() or len(text) > MAX_INPUT_CHARS for text in self.inputs):
            raise ValueError(f"each input must be a non-empty text of at most {MAX_INPUT_CHARS} characters")
        problem = seed_problem(self.to_task(0))
        if problem is not None:
            raise ValueError(problem)
        return self

    def to_task(self, step: int) -> Task:
        return Task(
            type=self.type,
            program=self.program,
            inputs=tuple(self.inputs),
            message=self.message,
            origin=Origin.USER,
            step=step,
        )


class TaskOut(BaseModel):
    id: str
    type: TaskType
    program: str
    inputs: list[str]
    outputs: list[str]
    message: str
    origin: Origin
    step: int
    parents: list[str]

    @classmethod
    def of(cls, task: Task) -> TaskOut:
        return cls.model_validate(task.to_dict())


class SeedOutcome(BaseModel):
    """What became of one submitted seed."""

    index: int = Field(description="Position of the seed in the request (0 for a single seed).")
    status: Literal["created", "exists", "invalid", "not_stored"]
    task_id: str
    outputs: list[str] = Field(default_factory=list, description="Gold outputs from the executor.")
    error_class: ErrorCode | None = None
    message: str = ""


class SeedsOut(BaseModel):
    results: list[SeedOutcome]


class TaskUse(BaseModel):
    """How self-play has used a task so far (counted by the self-play loop)."""

    drawn_as_reference: int
    drawn_for_solving: int
    solve_attempts: int
    solved: int
    solve_rate: float | None = Field(description="solved / solve_attempts; null before any attempt.")


class TaskDetail(TaskOut):
    use: TaskUse


class TaskQuery(_Body):
    """Filters and paging of ``GET /v1/tasks``."""

    type: TaskType | None = Field(default=None, description="Only tasks of this type.")
    origin: Origin | None = Field(default=None, description="Only tasks of this origin.")
    step_min: int | None = Field(
        default=None, ge=0, le=MAX_STEP, description="Created at this step or later."
    )
    step_max: int | None = Field(
        default=None, ge=0, le=MAX_STEP, description="Created at this step or before."
    )
    limit: int = Field(default=50, ge=1, le=500, description="Most tasks in the page.")
    cursor: str | None = Field(default=None, max_length=64, description="next_cursor of the previous page.")


class TaskPage(BaseModel):
    items: list[TaskOut]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null at the end.")


class RunOut(BaseModel):
    run_id: str
    policy_version: int
    step: int | None = Field(description="Latest step with metrics; null before the first.")
    step_time_s: float | None = Field(description="Unix time of the latest metrics record.")
    buffer_sizes: dict[TaskType, int]


class BufferStats(BaseModel):
    size: int
    by_origin: dict[Origin, int]
    added: int
    evicted: int
    duplicates: int
    distinct_programs: int = Field(description="Distinct programs among the tasks seen by the API.")
    diversity: float | None = Field(description="distinct_programs / tasks seen; null before any task.")


class Histogram(BaseModel):
    edges: list[float]
    counts: list[int]


class ProposalCounts(BaseModel):
    valid: int
    errors: dict[str, int]


class UserSeedFate(BaseModel):
    id: str
    type: TaskType
    step: int
    program: str
    in_buffer: bool
    use: TaskUse


class Stats(BaseModel):
    """Curriculum statistics, refreshed incrementally from the store."""

    run_id: str
    policy_version: int
    steps_seen: int = Field(description="Metrics records read so far.")
    latest_step: int | None
    latest: dict[str, float | None] = Field(description="The newest metrics record's values.")
    series: dict[str, list[float | None]] = Field(
        description="Per-step series, 'step' first; long histories are bucket means (see bucket_steps)."
    )
    bucket_steps: int = Field(description="Records averaged into each series point.")
    buffers: dict[TaskType, BufferStats]
    proposals: dict[TaskType, ProposalCounts]
    error_classes: dict[str, float] = Field(description="executor/errors/<class> summed over all steps.")
    learnability: dict[TaskType, Histogram] = Field(
        description="Distribution of the per-step mean learnability reward (r_propose) per type."
    )
    newest_tasks: list[TaskOut]
    user_seeds: list[UserSeedFate]


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    redis: bool
    executor: bool
    detail: str = ""


Problem.model_rebuild()
