"""The trusted parent survives what a job or a batch does to it, and the next job is judged normally.

Each attack names its guilty job's exact verdict; the job after it must come back right.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading

import pytest

from azr.core.task import Task, TaskType
from azr.executor import ops
from azr.executor.batch import run_batch
from azr.executor.errors import ErrorCode
from azr.executor.pool import ExecutorPool

from .conftest import Harness

IDENTITY = "def f(x):\n    return x"

SCRATCH_ATTACKS = [
    pytest.param(
        "import os\ndef f(n):\n    for _ in range(n):\n        os.mkdir('d')\n        os.chdir('d')\n"
        "    return n",
        "5000",
        "5000",
        id="deeper-than-path-max-and-recursion-limit",
    ),
    pytest.param(
        "import os\ndef f(x):\n    os.makedirs('a/b/c')\n    open('a/b/c/x', 'w').write('1')\n"
        "    for path in ('a/b/c', 'a/b', 'a', '.'):\n        os.chmod(path, 0)\n    return x",
        "1",
        "1",
        id="every-permission-removed",
    ),
    pytest.param(
        "import os\ndef f(x):\n    os.mkdir('l')\n    os.symlink('/', 'l/root')\n    os.chmod('l', 0o100)\n"
        "    return x",
        "2",
        "2",
        id="symlink-in-a-locked-directory",
    ),
]


@pytest.mark.parametrize(("program", "args", "expected"), SCRATCH_ATTACKS)
def test_a_job_that_locks_or_deepens_its_scratch_leaves_the_next_job_alone(
    backend: Harness, program: str, args: str, expected: str
) -> None:
    guilty = backend.run(program, (args,))
    assert guilty.error is None and guilty.calls[0].output == expected, guilty
    after = backend.run("import os\ndef f(x):\n    return [x, os.listdir('.')]", ("7",))
    assert after.error is None and after.calls[0].output == "[7, []]", after


def test_large_legal_outputs_are_parsed_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job whose output takes a second to parse must not hold the loop (and every other job) for it."""
    threads: dict[int, str] = {}
    trusted_outputs = ops._trusted_outputs

    def spy(run: ops.RunOutcome, limits: ops.SandboxLimits) -> tuple[str, ...]:
        outputs = trusted_outputs(run, limits)
        threads[len(outputs[0])] = threading.current_thread().name
        return outputs

    monkeypatch.setattr(ops, "_trusted_outputs", spy)
    large = Task(TaskType.DEDUCTION, "def f(n):\n    return list(range(n))", ("90000",))
    small = Task(TaskType.DEDUCTION, "def f(n):\n    return n + 1", ("1",))

    async def scenario() -> list[tuple[str, ...] | None]:
        async with ExecutorPool.create("local", workers=1) as pool:
            return [(await pool.validate(task)).outputs for task in (large, small)]

    large_outputs, small_outputs = asyncio.run(scenario())
    assert large_outputs is not None and large_outputs[0] == repr(list(range(90000)))
    assert small_outputs == ("2",)
    assert threads[len(large_outputs[0])] != threading.main_thread().name
    assert threads[1] == threading.main_thread().name


def test_duplicate_job_ids_in_a_batch_are_refused_and_the_rest_judged() -> None:
    task = {"type": "deduction", "program": "def f(x):\n    return x + 1", "inputs": ["3"]}
    lines = [
        {"id": "j1", "op": "validate", "task": task},
        {"id": "j1", "op": "validate", "task": task | {"inputs": ["4"]}},
        {"id": "j2", "op": "validate", "task": task | {"inputs": ["5"]}},
    ]
    source = io.BytesIO(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    sink = io.BytesIO()

    async def scenario() -> None:
        async with ExecutorPool.create("local", workers=1) as pool:
            await run_batch(pool, source, sink)

    asyncio.run(scenario())
    results = [json.loads(line) for line in sink.getvalue().splitlines()]
    duplicate = [r for r in results if r["error"] and "duplicate job id" in r["error"]["message"]]
    assert len(duplicate) == 1 and duplicate[0]["id"] == "j1"
    assert duplicate[0]["error"]["code"] == ErrorCode.BAD_ANSWER.value
    judged = {r["id"]: r["outputs"] for r in results if r not in duplicate}
    assert judged == {"j1": ["4"], "j2": ["6"]}
