"""What the loop needs from the rest of the system, as protocols.

Each has more than one implementation: the executor is the in-process ``ExecutorPool`` or the HTTP
``ExecutorClient``; the generator is a sampler in this process or Ray rollout workers; the store and the
experience sink are Redis (``azr.services``) in production and in tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from azr.core.experience import Experience
from azr.core.task import Task, TaskType, TaskUse
from azr.executor.api import Executor
from azr.rollout.sampler import Completion

__all__ = ["Executor", "ExperienceSink", "Generator", "TaskStore"]


class Generator(Protocol):
    """The policy, sampling: n completions for each prompt (token ids), at the policy version it holds."""

    async def generate(self, prompts: Sequence[Sequence[int]], n: int) -> list[list[Completion]]: ...


class TaskStore(Protocol):
    """The task buffers, one per task type."""

    def sample(self, task_type: TaskType, k: int) -> list[Task]:
        """Up to k distinct tasks drawn uniformly."""
        ...

    def solver_batch(self, task_type: TaskType, b: int) -> list[Task]:
        """b tasks to solve: the newest not yet given out first, topped up uniformly."""
        ...

    def add(self, tasks: Sequence[Task]) -> int:
        """Admit tasks (deduplicated by id, the oldest evicted at capacity); returns how many were new."""
        ...

    def sizes(self) -> Mapping[TaskType, int]: ...

    def record_uses(self, uses: Mapping[tuple[str, TaskUse], int]) -> None:
        """Count what tasks were used for (task id, use) in a round."""
        ...


class ExperienceSink(Protocol):
    """Where a round's experiences go (the experience stream)."""

    def add(self, experiences: Sequence[Experience]) -> None: ...
