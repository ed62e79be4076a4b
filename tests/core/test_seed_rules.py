"""The rules every user seed follows, whether posted to the API or read from a seed file."""

from __future__ import annotations

import pytest

from azr.core.task import Task, TaskType, seed_problem

IDENTITY = "def f(x):\n    return x"


@pytest.mark.parametrize(
    ("task", "problem"),
    [
        (Task(TaskType.DEDUCTION, IDENTITY, ("1",)), None),
        (Task(TaskType.INDUCTION, IDENTITY, ("1", "2"), message="returns its argument"), None),
        (Task(TaskType.INDUCTION, IDENTITY, ("1",), message="returns its argument"), "at least 2 inputs"),
        (Task(TaskType.INDUCTION, IDENTITY, ("1", "2"), message="  "), "needs a message"),
        (Task(TaskType.ABDUCTION, IDENTITY, ("1",), message="returns x"), "only induction seeds carry"),
    ],
    ids=["deduction", "induction", "one-pair", "no-message", "message-elsewhere"],
)
def test_a_seed_is_refused_only_for_what_would_make_it_meaningless(task: Task, problem: str | None) -> None:
    found = seed_problem(task)
    assert found is None if problem is None else problem in (found or "")
