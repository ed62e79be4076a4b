"""Which hash seeds a task runs under: the primary pair, or the whole pool when it may iterate a set."""

from __future__ import annotations

import pytest

from azr.executor.hash_order import BASE_RUNS, SET_RUNS, runs_needed, seed_slots, task_slots
from azr.executor.sandbox.protocol import SLOT_HASH_SEEDS
from azr.executor.sandbox.records import PRIMARY_SLOTS, HashSeedSlot


def test_permutations_are_derived_from_the_id_and_reproducible() -> None:
    chosen = {seed_slots(f"task-{i}", SET_RUNS) for i in range(200)}
    assert all(set(order) == set(HashSeedSlot) for order in chosen)
    assert len(chosen) > 100, "the order of seeds must vary with the task id"
    assert seed_slots("task-7", SET_RUNS) == seed_slots("task-7", SET_RUNS)
    assert seed_slots("task-7", SET_RUNS)[:BASE_RUNS] == seed_slots("task-7", BASE_RUNS)


def test_set_tasks_run_under_every_seed_others_under_the_primary_pair() -> None:
    assert task_slots("t", "def f(x):\n    return x", ["1"]) == PRIMARY_SLOTS
    assert len(PRIMARY_SLOTS) == BASE_RUNS
    set_slots = task_slots("t", "def f(x):\n    return list(set(x))", ["'ab'"])
    assert sorted(set_slots) == sorted(HashSeedSlot)
    assert set_slots == seed_slots("t", SET_RUNS)


def test_every_slot_has_its_own_seed() -> None:
    assert len(set(SLOT_HASH_SEEDS.values())) == len(HashSeedSlot) == SET_RUNS
    assert set(PRIMARY_SLOTS) < set(HashSeedSlot)


@pytest.mark.parametrize("runs", [0, SET_RUNS + 1])
def test_run_counts_outside_the_slots_are_refused(runs: int) -> None:
    with pytest.raises(ValueError, match="runs must be"):
        seed_slots("t", runs)


@pytest.mark.parametrize(
    ("program", "inputs", "runs"),
    [
        ("def f(x):\n    return x + 1", ["1"], BASE_RUNS),
        ("def f(d):\n    return sorted(d.items())", ["{'a': 1}"], BASE_RUNS),
        ("def f(x):\n    return {x: 1}", ["'k'"], BASE_RUNS),
        ("def f(x):\n    return 'set of things'", ["1"], BASE_RUNS),
        ("def f(x):\n    return list({x, 'a'})", ["'b'"], SET_RUNS),
        ("def f(x):\n    return [c for c in {c for c in x}]", ["'abc'"], SET_RUNS),
        ("def f(x):\n    return list(set(x))", ["'abc'"], SET_RUNS),
        ("def f(x):\n    return frozenset(x)", ["'abc'"], SET_RUNS),
        ("from typing import Set\ndef f(x: Set[str]):\n    return x", ["'a'"], SET_RUNS),
        ("def f(a, b):\n    return list(a.keys() - b)", ["{'a': 1}, ['b']"], SET_RUNS),
        ("def f(a):\n    k = a.items()\n    k |= {1}\n    return k", ["{}"], SET_RUNS),
        ("def f(x):\n    return list(x)", ["{'a', 'b'}"], SET_RUNS),
        ("def f(x):\n    return x", ["[1, {'k': [{2}]}]"], SET_RUNS),
        ("def f(x) return", ["1"], SET_RUNS),
    ],
)
def test_runs_follow_what_could_iterate_a_set(program: str, inputs: list[str], runs: int) -> None:
    assert runs_needed(program, inputs) == runs
