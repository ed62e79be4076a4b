"""The warm-start data: every example is read back by its role's parser and accepted by the executor, the
data is a function of its seed, and no held-out task is in it."""

from __future__ import annotations

import asyncio

from azr.core.task import Role, TaskType
from azr.eval.suites import load_suite
from azr.executor.pool import ExecutorPool
from azr.roles.config import RolesConfig
from azr.warmstart.data import STREAM, DataReport, build_examples, data_fingerprint, overlap_keys
from azr.warmstart.examples import Example
from azr.warmstart.programs import draw_tasks

CONFIG = RolesConfig()


def _build(per_type: int, seed: int, held_out=()) -> tuple[list[Example], DataReport]:
    async def run() -> tuple[list[Example], DataReport]:
        async with ExecutorPool.create("local", workers=2) as pool:
            return await build_examples(pool, CONFIG, per_type=per_type, seed=seed, held_out=held_out)

    return asyncio.run(run())


def test_every_example_is_accepted_and_both_roles_and_all_types_are_covered() -> None:
    examples, report = _build(per_type=6, seed=3)
    assert report.invalid == 0 and report.rejected_examples == 0
    assert report.examples == len(examples) == 2 * report.drawn
    assert sum(report.by_family.values()) == report.drawn and "none" not in report.by_family
    groups = {(e.role, e.type) for e in examples}
    assert groups == {(role, t) for role in Role for t in TaskType}
    for example in examples:
        assert example.task.outputs, "every task carries gold outputs from the executor"
        assert example.completion.startswith("<think>") and example.completion.endswith("</answer>")


def test_the_data_is_a_function_of_its_seed() -> None:
    first, _ = _build(per_type=3, seed=1)
    again, _ = _build(per_type=3, seed=1)
    other, _ = _build(per_type=3, seed=2)
    assert data_fingerprint(first) == data_fingerprint(again)
    assert data_fingerprint(first) != data_fingerprint(other)


def test_tasks_that_share_a_program_and_an_input_with_held_out_ones_are_dropped() -> None:
    stream = draw_tasks(STREAM, 4, seed=0)
    held_out = stream[:3]  # pretend the first three drawn tasks were held out
    examples, report = _build(per_type=4, seed=0, held_out=held_out)
    assert report.held_out >= 3
    assert not overlap_keys(e.task for e in examples) & overlap_keys(held_out)


def test_the_built_in_held_out_suite_is_disjoint_from_a_full_warm_start_stream() -> None:
    held_out = load_suite("heldout")
    assert len({t.id for t in held_out}) == 300
    assert {t.type: sum(u.type is t.type for u in held_out) for t in held_out} == dict.fromkeys(TaskType, 100)
    drawn = draw_tasks(STREAM, 200, seed=0)
    overlapping = [t for t in drawn if overlap_keys([t]) & overlap_keys(held_out)]
    assert overlapping, "the families are small: the stream does meet held-out tasks, so the filter matters"
