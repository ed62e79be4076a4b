"""The executor actor: a sandbox pool shared by the cluster (or, in the compose cluster, the client of the
executor service); and ``RayExecutor``, the ``Executor`` protocol over it for the driver and the learner."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

from azr.core.task import Task
from azr.executor.api import Executor
from azr.executor.jobs import Job, JobResult, Judgement, Validation
from azr.executor.pool import ExecutorPool, PoolConfig
from azr.services.executor_service.client import ExecutorClient
from azr.services.settings import ExecutorSettings


def make_executor(settings: ExecutorSettings) -> ExecutorPool | ExecutorClient:
    """The pool on this host, or the executor service's client when ``settings.url`` is set (not entered)."""
    if settings.url is not None:
        token = None if settings.token is None else settings.token.get_secret_value()
        return ExecutorClient(settings.url, token=token)
    return ExecutorPool.from_config(
        PoolConfig(
            backend=settings.backend, workers=settings.workers, allow_unisolated=settings.allow_unisolated
        )
    )


class ExecutorActor:
    """An async actor: many validations and checks in flight at once on one pool."""

    def __init__(self, settings: ExecutorSettings) -> None:
        self.executor = make_executor(settings)
        self._entered: Executor | None = None
        self._starting = asyncio.Lock()

    async def _ready(self) -> Executor:
        async with self._starting:  # the first calls arrive together; the pool starts once
            if self._entered is None:
                self._entered = await self.executor.__aenter__()
        return self._entered

    async def validate(self, task: Task) -> Validation:
        return await (await self._ready()).validate(task)

    async def check(self, task: Task, answer: str) -> Judgement:
        return await (await self._ready()).check(task, answer)

    async def submit(self, job: Job) -> JobResult:
        return await (await self._ready()).submit(job)

    async def close(self) -> None:
        if self._entered is not None:
            await self.executor.__aexit__(None, None, None)
            self._entered = None


class RayExecutor:
    """The ``Executor`` protocol over the executor actor."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def validate(self, task: Task) -> Validation:
        result: Validation = await self.actor.validate.remote(task)
        return result

    async def check(self, task: Task, answer: str) -> Judgement:
        result: Judgement = await self.actor.check.remote(task, answer)
        return result

    async def submit(self, job: Job) -> JobResult:
        result: JobResult = await self.actor.submit.remote(job)
        return result

    async def map(self, jobs: Iterable[Job] | AsyncIterable[Job]) -> AsyncIterator[JobResult]:
        pending = (
            [asyncio.ensure_future(self.submit(j)) async for j in jobs]
            if isinstance(jobs, AsyncIterable)
            else [asyncio.ensure_future(self.submit(j)) for j in jobs]
        )
        for done in asyncio.as_completed(pending):
            yield await done
