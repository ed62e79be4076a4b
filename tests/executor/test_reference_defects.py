"""The executor is not fooled by the defects found in the reference implementation (DESIGN.md, 1-10).

Each test drives the real judge on a real backend (the shared ``backend`` fixture, so every backend faces
the same attacks). Defects 6 (greedy learnability rollouts) and 7
(the buffer dropping the newest tasks) are not executor defects; their tests live with the solver and the
task buffers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from azr.core.task import Task, TaskType
from azr.executor.backends.base import IsolationReport
from azr.executor.errors import ErrorCode
from azr.executor.jobs import Job, JobOp, JobResult, Judgement, Validation
from azr.executor.limits import SandboxLimits
from azr.executor.pool import ExecutorPool
from tests.executor.conftest import Harness

LIMITS = SandboxLimits(timeout_s=2.0, cpu_time_s=2)
ADD_ONE = "def f(x):\n    return x + 1"


@dataclass
class SyncJudge:
    """An ``ExecutorPool`` over the shared ``backend`` fixture, driven through the fixture's event loop."""

    pool: ExecutorPool
    loop: asyncio.AbstractEventLoop

    @property
    def isolation(self) -> IsolationReport:
        return self.pool.isolation

    def validate(self, task: Task) -> Validation:
        return self.loop.run_until_complete(self.pool.validate(task))

    def check(self, task: Task, answer: str) -> Judgement:
        return self.loop.run_until_complete(self.pool.check(task, answer))

    def submit(self, job: Job) -> JobResult:
        return self.loop.run_until_complete(self.pool.submit(job))


@pytest.fixture(scope="module")
def gated(backend: Harness) -> SyncJudge:
    return SyncJudge(ExecutorPool(backend.backend, limits=LIMITS), backend.loop)


@pytest.fixture(scope="module")
def ungated(backend: Harness) -> SyncJudge:
    """The gate is a quality filter; these attacks must fail even without it, in the sandbox itself."""
    return SyncJudge(ExecutorPool(backend.backend, limits=LIMITS, gate=False), backend.loop)


@pytest.fixture(scope="module")
def judges(gated: SyncJudge, ungated: SyncJudge) -> dict[bool, SyncJudge]:
    """Both judges by whether the gate is on, for attacks tried with and without it."""
    return {True: gated, False: ungated}


def deduction(program: str, *inputs: str, outputs: tuple[str, ...] = ()) -> Task:
    return Task(TaskType.DEDUCTION, program, inputs, outputs)


# 1. The ban list matched only whole import names: dotted entries never matched.
@pytest.mark.parametrize(
    "program",
    [
        "import os\ndef f(x):\n    return x",
        "import sys\ndef f(x):\n    return x",
        "import os.path\ndef f(x):\n    return x",
        "from os import path\ndef f(x):\n    return x",
        "def f(x):\n    return __import__('subpro' + 'cess')",
        "import importlib\ndef f(x):\n    return importlib.import_module('os')",
        "def f(x):\n    return getattr(x, '__cl' + 'ass__')",
        "def f(x):\n    return ().__class__.__bases__[0].__subclasses__()",
    ],
    ids=[
        "os",
        "sys",
        "os.path",
        "from-os",
        "__import__-concat",
        "importlib",
        "getattr-computed",
        "dunder-chain",
    ],
)
def test_1_gate_refuses_banned_modules_however_named(gated: SyncJudge, program: str) -> None:
    validation = gated.validate(deduction(program, "1"))
    assert validation.error is not None and validation.error.code is ErrorCode.FORBIDDEN


# 2. Answers were pasted into a code template.
@pytest.mark.parametrize(
    "answer", ["[9]) or True or (0", "9) or (1", "*[3]", "x=3", "3)\nprint(1", "__import__('os')", "f(3)"]
)
def test_2_abduction_answer_is_parsed_never_pasted(gated: SyncJudge, answer: str) -> None:
    task = Task(TaskType.ABDUCTION, "def f(x):\n    return x == [9]", ("[9]",), ("True",))
    judgement = gated.check(task, answer)
    assert judgement.ok and judgement.correct is False
    assert judgement.error is not None and judgement.error.code is ErrorCode.BAD_ANSWER


# 3. Output prediction was judged with eval(gold) == eval(answer) in the trainer process.
@pytest.mark.parametrize(
    "answer",
    [
        "type('Liar', (), {'__eq__': lambda self, other: True})()",
        "__import__('pathlib').Path('{marker}').touch()",
        "[x for x in [4]][0]",
    ],
    ids=["lying-eq", "side-effect", "comprehension"],
)
def test_3_deduction_answer_is_never_evaluated(gated: SyncJudge, tmp_path: Path, answer: str) -> None:
    marker = tmp_path / "evaluated"
    judgement = gated.check(deduction(ADD_ONE, "3", outputs=("4",)), answer.replace("{marker}", str(marker)))
    assert judgement.ok and judgement.correct is False
    assert judgement.error is not None and judgement.error.code is ErrorCode.BAD_ANSWER
    assert not marker.exists()


def test_3_deduction_check_runs_nothing(gated: SyncJudge) -> None:
    """The program would never return if it ran; judging a prediction compares literals only."""
    task = deduction("def f(x):\n    while True:\n        pass", "3", outputs=("4",))
    assert gated.check(task, "4").correct is True


def test_3_object_with_lying_eq_cannot_be_a_gold_output(ungated: SyncJudge) -> None:
    program = (
        "def f(x):\n"
        "    class Liar(int):\n"
        "        def __eq__(self, other):\n"
        "            return True\n"
        "    return Liar(x)"
    )
    validation = ungated.validate(deduction(program, "3"))
    assert validation.error is not None and validation.error.code is ErrorCode.UNSUPPORTED_VALUE


# 4. Programs ran in a reused worker process, so monkeypatching leaked into the next task.
@pytest.mark.parametrize(
    ("gate", "patcher", "reader", "expected"),
    [
        (
            True,
            "import math\ndef f(x):\n    math.pi = 3\n    return x",
            "import math\ndef f(x):\n    return math.pi",
            "3.141592653589793",
        ),
        (
            False,
            "import builtins\ndef f(x):\n    builtins.abs = lambda v: 42\n    return x",
            "def f(x):\n    return abs(x)",
            "7",
        ),
    ],
    ids=["module-attribute", "builtin"],
)
def test_4_no_state_leaks_between_jobs(
    judges: dict[bool, SyncJudge], gate: bool, patcher: str, reader: str, expected: str
) -> None:
    """The fixture's backend has one worker per slot, so the reader runs where the patcher ran."""
    pool = judges[gate]
    assert pool.validate(deduction(patcher, "-7")).outputs == ("-7",)
    assert pool.validate(deduction(reader, "-7")).outputs == (expected,)


# 5. Determinism was checked in one process, and a failed check could come back valid with output ''.
@pytest.mark.parametrize(
    ("gate", "program"),
    [
        (True, "def f(x):\n    return ''.join({'a', 'b', 'c', 'd', 'e', 'f'}) + x"),
        (False, "def f(x):\n    return hash(x)"),
        # two-element sets that hash seeds 1 and 2 happen to order alike: two fixed seeds passed them
        (True, "def f(x):\n    return list({'ab', 'ef'})"),
        (True, "def f(x):\n    return [w for w in {'ab', 'mn'}]"),
        (False, "def f(x):\n    return sorted(x) + list(x)"),
    ],
    ids=["set-order", "str-hash", "pair-ab-ef", "pair-ab-mn", "input-set"],
)
def test_5_hash_seed_dependence_is_caught(judges: dict[bool, SyncJudge], gate: bool, program: str) -> None:
    pool = judges[gate]
    argument = "{'ab', 'gh'}" if "sorted(x)" in program else "'x'"
    result = pool.submit(Job("j", JobOp.VALIDATE, deduction(program, argument)))
    assert not result.ok
    assert result.outputs is None
    assert result.error is not None and result.error.code is ErrorCode.NONDETERMINISTIC
    assert "outputs" not in result.to_dict()


# 8. Outputs were cut to 400 characters.
def test_8_long_outputs_are_never_cut(gated: SyncJudge) -> None:
    program = "def f(n):\n    return [[i, str(i) * 3] for i in range(n)]"
    validation = gated.validate(deduction(program, "2000"))
    assert validation.outputs is not None
    gold = validation.outputs[0]
    assert len(gold) > 30_000
    assert gold.endswith("[1999, '199919991999']]")
    task = deduction(program, "2000", outputs=validation.outputs)
    assert gated.check(task, gold).correct is True
    assert gated.check(task, gold[:400]).correct is False


# 9. Programs written by the induction solver were not checked against the ban list.
@pytest.mark.parametrize(
    "answer",
    [
        "import os\ndef f(x):\n    return x + 1",
        "def f(x):\n    return eval('x + 1')",
        "def f(x):\n    __import__('os').system('true')\n    return x + 1",
    ],
    ids=["import-os", "eval", "__import__"],
)
def test_9_induction_answers_pass_the_gate(gated: SyncJudge, answer: str) -> None:
    task = Task(TaskType.INDUCTION, ADD_ONE, ("1", "2", "3", "4"), ("2", "3", "4", "5"))
    judgement = gated.check(task, answer)
    assert judgement.ok and judgement.correct is False
    assert judgement.error is not None and judgement.error.code is ErrorCode.FORBIDDEN


# 10. No memory limit, no filesystem or network isolation, one worker at a time.
def test_10_memory_is_limited(gated: SyncJudge) -> None:
    validation = gated.validate(deduction("def f(n):\n    return len(bytearray(n))", str(2 * 1024**3)))
    assert validation.error is not None and validation.error.code is ErrorCode.MEMORY_LIMIT


def test_10_host_files_and_network_are_out_of_reach(ungated: SyncJudge, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host data")
    assert ungated.isolation.full, ungated.isolation
    reads = ungated.validate(deduction("def f(p):\n    return open(p).read()", repr(str(secret))))
    assert reads.error is not None and reads.error.code is ErrorCode.RUNTIME_ERROR
    connects = ungated.validate(
        deduction(
            "import socket\ndef f(port):\n    socket.create_connection(('127.0.0.1', port), 1).close()\n"
            "    return 'connected'",
            "6379",
        )
    )
    assert connects.error is not None and connects.error.code is ErrorCode.RUNTIME_ERROR


def test_10_jobs_run_in_parallel_workers() -> None:
    """A slow job submitted first does not hold back a fast one: results come back fast-first."""
    slow = deduction("def f(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t", "5000000")
    fast = deduction(ADD_ONE, "1")

    async def scenario() -> list[str]:
        async with ExecutorPool.create("local", workers=2) as pool:
            jobs = [Job("slow", JobOp.VALIDATE, slow), Job("fast", JobOp.VALIDATE, fast)]
            return [result.id async for result in pool.map(jobs)]

    assert asyncio.run(scenario()) == ["fast", "slow"]
