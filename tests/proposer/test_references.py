"""Choosing references for proposer prompts."""

from __future__ import annotations

import random

from azr.core.task import ZERO_SEED, Task, TaskType
from azr.proposer.references import choose_induction_source, choose_references
from azr.roles.config import RolesConfig

CONFIG = RolesConfig(n_references=3, max_reference_chars=200)


def task(n: int, *, pad: int = 0, outputs: bool = True) -> Task:
    return Task(
        type=TaskType.DEDUCTION,
        program=f"def f(x):\n    return x + {n}" + " " * pad,
        inputs=("1",),
        outputs=(str(n + 1),) if outputs else (),
    )


def test_k_distinct_references_reproducible_from_the_seed() -> None:
    pool = [task(n) for n in range(10)] + [task(0), task(1)]  # duplicates by content hash
    first = choose_references(pool, CONFIG, random.Random(5))
    assert len(first) == 3 and len({t.id for t in first}) == 3
    assert first == choose_references(pool, CONFIG, random.Random(5))


def test_oversized_and_unvalidated_tasks_are_never_shown() -> None:
    pool = [task(1, pad=500), task(2, outputs=False), task(3)]
    for seed in range(20):
        assert choose_references(pool, CONFIG, random.Random(seed)) == (task(3),)


def test_fewer_references_when_the_buffer_is_small() -> None:
    assert choose_references([ZERO_SEED], CONFIG, random.Random(0)) == (ZERO_SEED,)
    assert choose_references([], CONFIG, random.Random(0)) == ()


def test_induction_source() -> None:
    assert choose_induction_source([task(1, pad=500)], CONFIG, random.Random(0)) is None
    assert choose_induction_source([task(1, pad=500), task(2)], CONFIG, random.Random(0)) == task(2)
