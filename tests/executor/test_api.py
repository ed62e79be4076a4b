"""Both executors the self-play loop can hold satisfy the one ``Executor`` protocol."""

from __future__ import annotations

import pytest

from azr.core.task import Task, TaskType
from azr.executor.api import Executor
from azr.executor.jobs import Job, JobOp
from azr.executor.pool import ExecutorPool
from azr.services.executor_service.client import ExecutorClient


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _typed(executor: Executor) -> Executor:
    """mypy checks each call site below against the protocol; the runtime check covers the method set."""
    return executor


def test_client_satisfies_executor() -> None:
    client = ExecutorClient("http://127.0.0.1:9")
    assert isinstance(_typed(client), Executor)


@pytest.mark.anyio
async def test_pool_satisfies_executor_and_judges_through_it() -> None:
    task = Task(type=TaskType.DEDUCTION, program="def f(x):\n    return x + 1", inputs=("3",))
    async with ExecutorPool.create(workers=1) as pool:
        executor = _typed(pool)
        assert isinstance(executor, Executor)
        validation = await executor.validate(task)
        assert validation.outputs == ("4",)
        judged = Task(type=TaskType.DEDUCTION, program=task.program, inputs=("3",), outputs=("4",))
        assert (await executor.check(judged, "4")).correct is True
        results = [result async for result in executor.map([Job("j", JobOp.VALIDATE, task)])]
        assert [result.id for result in results] == ["j"]
