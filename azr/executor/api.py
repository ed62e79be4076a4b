"""``Executor``: what the self-play loop needs from an executor, whether in process or behind HTTP.

``azr.executor.pool.ExecutorPool`` (sandboxes on this host or in containers) and the executor service's
``ExecutorClient`` (the same API over HTTP) both satisfy it, so the loop is written once against this
protocol and never knows which one it holds.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Protocol, runtime_checkable

from azr.core.task import Task
from azr.executor.jobs import Job, JobResult, Judgement, Validation


@runtime_checkable
class Executor(Protocol):
    """Judges tasks and answers; never raises for anything a task or an answer holds."""

    async def validate(self, task: Task) -> Validation:
        """Gold outputs of ``task``, or the error that makes it invalid."""
        ...

    async def check(self, task: Task, answer: str) -> Judgement:
        """Whether ``answer`` to ``task`` is right."""
        ...

    async def submit(self, job: Job) -> JobResult:
        """Judge one job; always returns a result."""
        ...

    def map(self, jobs: Iterable[Job] | AsyncIterable[Job]) -> AsyncIterator[JobResult]:
        """A result for every job, in the order they finish."""
        ...
