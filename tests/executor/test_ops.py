"""The judge on the real local backend: validation, the three kinds of check, determinism, whole outputs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from azr.core.task import Task, TaskType
from azr.executor.backends.base import Backend, HashSeedSlot, IsolationReport, RunOutcome, RunRequest
from azr.executor.errors import ErrorCode, ExecError, ExecutorError
from azr.executor.jobs import Job, JobOp
from azr.executor.limits import SandboxLimits
from azr.executor.ops import MAX_TASK_INPUTS, Judge
from azr.executor.pool import ExecutorPool, SyncExecutorPool

ADD_ONE = "def f(x):\n    return x + 1"
SQUARE = "def f(x):\n    return x * x"


@pytest.fixture(scope="module")
def pool() -> Iterator[SyncExecutorPool]:
    with SyncExecutorPool(
        backend="local", workers=1, limits=SandboxLimits(timeout_s=1.0, cpu_time_s=1)
    ) as pool:
        yield pool


def deduction(program: str, *inputs: str, outputs: tuple[str, ...] = ()) -> Task:
    return Task(TaskType.DEDUCTION, program, inputs, outputs)


# ------------------------------------------------------------------------------------------ validate


def test_validate_returns_canonical_gold_outputs(pool: SyncExecutorPool) -> None:
    program = "def f(xs, k):\n    return {x % k for x in xs}, {'b': k, 'a': None}"
    validation = pool.validate(deduction(program, "[1, 2, 3, 4], 3", " [ 5 ] , 2 "))
    assert validation.error is None
    assert validation.outputs == ("({0, 1, 2}, {'a': None, 'b': 3})", "({1}, {'a': None, 'b': 2})")


@pytest.mark.parametrize(
    ("program", "inputs", "code"),
    [
        ("def f(x):\n    return 1 / x", ("1", "0"), ErrorCode.RUNTIME_ERROR),
        ("import os\ndef f(x):\n    return x", ("1",), ErrorCode.FORBIDDEN),
        ("def f(x):\n    return x +", ("1",), ErrorCode.SYNTAX_ERROR),
        ("def g(x):\n    return x", ("1",), ErrorCode.NO_ENTRY_FUNCTION),
        (ADD_ONE, ("1", "__import__('os')"), ErrorCode.BAD_ANSWER),
        (ADD_ONE, (), ErrorCode.BAD_ANSWER),
        (ADD_ONE, tuple(str(i) for i in range(MAX_TASK_INPUTS + 1)), ErrorCode.BAD_ANSWER),
        ("def f(x):\n    return float(x)", ("'nan'",), ErrorCode.UNSUPPORTED_VALUE),
        ("def f(x):\n    return 10.0 ** x", ("400",), ErrorCode.RUNTIME_ERROR),  # OverflowError
        ("def f(x):\n    return float('inf') * x", ("2",), ErrorCode.UNSUPPORTED_VALUE),
        ("def f(x):\n    while True:\n        x += 1", ("1",), ErrorCode.TIMEOUT),
    ],
    ids=[
        "raises",
        "forbidden",
        "syntax",
        "no-f",
        "input-not-literal",
        "no-inputs",
        "too-many-inputs",
        "nan",
        "overflow",
        "inf",
        "timeout",
    ],
)
def test_invalid_task_comes_back_with_its_error_class(
    pool: SyncExecutorPool, program: str, inputs: tuple[str, ...], code: ErrorCode
) -> None:
    validation = pool.validate(deduction(program, *inputs))
    assert validation.outputs is None
    assert validation.error is not None and validation.error.code is code, validation.error


def test_error_message_names_the_failing_input(pool: SyncExecutorPool) -> None:
    validation = pool.validate(deduction("def f(x):\n    return 1 / x", "1", "0"))
    assert validation.error is not None
    assert validation.error.message.startswith("input 1 ('0')")


def test_hash_order_dependent_program_is_nondeterministic(pool: SyncExecutorPool) -> None:
    """Same process twice would agree; two interpreters with different hash seeds do not."""
    program = "def f(x):\n    return list({'a', 'b', 'c', 'd', 'e'}) + [x]"
    validation = pool.validate(deduction(program, "0"))
    assert validation.outputs is None
    assert validation.error is not None and validation.error.code is ErrorCode.NONDETERMINISTIC


def test_sets_are_deterministic_as_values(pool: SyncExecutorPool) -> None:
    """The same set prints in a seed-dependent order, but its canonical text is one."""
    validation = pool.validate(deduction("def f(x):\n    return {'a', 'b', 'c', 'd', 'e', x}", "'z'"))
    assert validation.outputs == ("{'a', 'b', 'c', 'd', 'e', 'z'}",)


def test_long_output_comes_back_whole(pool: SyncExecutorPool) -> None:
    validation = pool.validate(deduction("def f(n):\n    return 'x' * n", "10000"))
    assert validation.outputs is not None
    assert validation.outputs[0] == "'" + "x" * 10000 + "'"
    long_gold = deduction("def f(n):\n    return 'x' * n", "10000", outputs=validation.outputs)
    assert pool.check(long_gold, repr("x" * 10000)).correct is True
    assert pool.check(long_gold, repr("x" * 9999)).correct is False


# --------------------------------------------------------------------------------------------- check


@pytest.mark.parametrize(
    ("answer", "correct", "code"),
    [
        ("4", True, None),
        ("  4 ", True, None),
        ("5", False, None),
        ("4.0", False, None),  # type-strict: a float is not the int 4
        ("'4'", False, None),
        ("x + 1", False, ErrorCode.BAD_ANSWER),
        ("", False, ErrorCode.BAD_ANSWER),
    ],
)
def test_deduction_check(pool: SyncExecutorPool, answer: str, correct: bool, code: ErrorCode | None) -> None:
    judgement = pool.check(deduction(ADD_ONE, "3", outputs=("4",)), answer)
    assert judgement.ok
    assert judgement.correct is correct
    assert (judgement.error.code if judgement.error else None) is code


def test_deduction_check_compares_sets_and_dicts_order_free(pool: SyncExecutorPool) -> None:
    task = deduction("def f(x):\n    return x", "{1: {2, 3}}", outputs=("{1: {2, 3}}",))
    assert pool.check(task, "{1: {3, 2}}").correct is True
    assert pool.check(task, "{1: [2, 3]}").correct is False


@pytest.mark.parametrize(
    ("answer", "correct", "code"),
    [
        ("3", True, None),
        ("-3", True, None),  # any input with f(i) == o is right, not only the proposer's
        ("2", False, None),
        ("'a'", False, ErrorCode.RUNTIME_ERROR),  # f raises on it: a wrong answer, not an invalid task
        ("3, 4", False, ErrorCode.RUNTIME_ERROR),  # two arguments to a one-argument f
        ("[9]) or True or (0", False, ErrorCode.BAD_ANSWER),
    ],
)
def test_abduction_check(pool: SyncExecutorPool, answer: str, correct: bool, code: ErrorCode | None) -> None:
    judgement = pool.check(Task(TaskType.ABDUCTION, SQUARE, ("3",), ("9",)), answer)
    assert judgement.ok
    assert judgement.correct is correct
    assert (judgement.error.code if judgement.error else None) is code


INDUCTION = Task(
    TaskType.INDUCTION, ADD_ONE, ("1", "2", "3", "10", "20", "30"), ("2", "3", "4", "11", "21", "31")
)


@pytest.mark.parametrize(
    ("answer", "correct", "code"),
    [
        ("def f(x):\n    return x + 1", True, None),
        ("def f(y):\n    return 1 + y", True, None),
        # Right on every visible pair (1, 2, 3), wrong on the held-out ones: judged on held-out only.
        ("def f(x):\n    return {1: 2, 2: 3, 3: 4}.get(x, 0)", False, None),
        ("def f(x):\n    return {10: 11, 20: 21, 30: 31}[x]", True, None),
        ("def f(x):\n    return x +", False, ErrorCode.SYNTAX_ERROR),
        ("def g(x):\n    return x + 1", False, ErrorCode.NO_ENTRY_FUNCTION),
        ("def f(x):\n    return [][x]", False, ErrorCode.RUNTIME_ERROR),
        ("import os\ndef f(x):\n    return x + 1", False, ErrorCode.FORBIDDEN),
        ("def f(x):\n    return eval('x + 1')", False, ErrorCode.FORBIDDEN),
    ],
    ids=[
        "right",
        "right-differently",
        "visible-only",
        "held-out-table",
        "syntax",
        "no-f",
        "raises",
        "import",
        "eval",
    ],
)
def test_induction_check(pool: SyncExecutorPool, answer: str, correct: bool, code: ErrorCode | None) -> None:
    judgement = pool.check(INDUCTION, answer)
    assert judgement.ok
    assert judgement.correct is correct
    assert (judgement.error.code if judgement.error else None) is code


@pytest.mark.parametrize(
    ("task", "code"),
    [
        (deduction(ADD_ONE, "3"), ErrorCode.BAD_ANSWER),  # no gold outputs: not validated
        (deduction(ADD_ONE, "3", "4", outputs=("4", "5")), ErrorCode.BAD_ANSWER),  # not a single pair
        (deduction(ADD_ONE, "3", outputs=("float('nan')",)), ErrorCode.UNSUPPORTED_VALUE),
        (deduction("import os\n" + ADD_ONE, "3", outputs=("4",)), ErrorCode.FORBIDDEN),
        (Task(TaskType.INDUCTION, ADD_ONE, ("1",), ("2",)), ErrorCode.BAD_ANSWER),  # nothing held out
    ],
    ids=["no-gold", "two-pairs", "bad-gold", "forbidden-task", "induction-one-pair"],
)
def test_check_of_an_unjudgeable_job_is_not_ok(pool: SyncExecutorPool, task: Task, code: ErrorCode) -> None:
    judgement = pool.check(task, "4")
    assert not judgement.ok and judgement.correct is None
    assert judgement.error is not None and judgement.error.code is code


def test_jobs_run_in_input_order_through_the_sync_facade(pool: SyncExecutorPool) -> None:
    task = deduction(ADD_ONE, "3", outputs=("4",))
    results = pool.run(
        [
            Job("v", JobOp.VALIDATE, deduction(ADD_ONE, "1", "2")),
            Job("right", JobOp.CHECK, task, "4"),
            Job("wrong", JobOp.CHECK, task, "5"),
        ]
    )
    assert [(r.id, r.ok, r.outputs, r.correct) for r in results] == [
        ("v", True, ("2", "3"), None),
        ("right", True, None, True),
        ("wrong", True, None, False),
    ]


# ------------------------------------------------------------------------------------- infra errors


class _FailingSlot:
    """Wraps the real backend and fails every run in one slot as a dead worker would.

    A fake on purpose: a real supervisor cannot be made to die on demand from a test program (it is the
    init of its PID namespace), and what is under test is only how the judge treats the failure.
    """

    def __init__(self, inner: Backend, slot: HashSeedSlot) -> None:
        self._inner = inner
        self._slot = slot

    @property
    def isolation(self) -> IsolationReport:
        return self._inner.isolation

    async def run(self, request: RunRequest) -> RunOutcome:
        if request.slot is self._slot:
            return RunOutcome((), ExecError(ErrorCode.INFRA_ERROR, "worker died"), 0.0)
        return await self._inner.run(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def test_infra_error_is_never_a_verdict() -> None:
    from azr.executor.backends.local import LocalBackend

    async def scenario() -> None:
        async with LocalBackend(1) as backend:
            validation = await Judge(_FailingSlot(backend, HashSeedSlot.B)).validate(deduction(ADD_ONE, "3"))
            assert validation.outputs is None
            assert validation.error is not None and validation.error.code is ErrorCode.INFRA_ERROR

            judge = Judge(_FailingSlot(backend, HashSeedSlot.A))
            for task, answer in [
                (Task(TaskType.ABDUCTION, ADD_ONE, ("3",), ("4",)), "3"),
                (INDUCTION, ADD_ONE),
            ]:
                judgement = await judge.check(task, answer)
                assert not judgement.ok and judgement.correct is None
                assert judgement.error is not None and judgement.error.code is ErrorCode.INFRA_ERROR

            with pytest.raises(ExecutorError, match="start-up probe"):
                await ExecutorPool(_FailingSlot(backend, HashSeedSlot.B)).__aenter__()

    asyncio.run(scenario())
