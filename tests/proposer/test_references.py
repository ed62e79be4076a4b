"""Choosing references for proposer prompts and fitting them into the prompt token budget."""

from __future__ import annotations

import random

from azr.core.task import ZERO_SEED, Origin, Task, TaskType, zero_seed
from azr.proposer.parsing import induction_failure
from azr.proposer.prompts import ProposalRequest, proposer_prompt
from azr.proposer.references import (
    choose_induction_source,
    choose_references,
    fit_references,
)
from azr.roles.config import RolesConfig
from azr.roles.templates import Prompt

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


def words(prompt: Prompt) -> int:
    """A stand-in tokenizer: whitespace-separated words of the chat rendering."""
    return sum(len(m["content"].split()) for m in prompt.as_chat())


def test_references_are_dropped_until_the_prompt_fits() -> None:
    refs = tuple(task(n, pad=0) for n in range(6))
    request = ProposalRequest(TaskType.DEDUCTION, refs, step=4)
    sizes = [
        words(proposer_prompt(ProposalRequest(TaskType.DEDUCTION, refs[:k]), CONFIG)) for k in range(1, 7)
    ]
    assert sizes == sorted(sizes) and len(set(sizes)) == 6
    assert fit_references(request, words, sizes[-1], CONFIG) == request
    fitted = fit_references(request, words, sizes[2], CONFIG)
    assert fitted == ProposalRequest(TaskType.DEDUCTION, refs[:3], step=4)
    assert fit_references(request, words, sizes[0] - 1, CONFIG) is None


def test_an_induction_request_fits_whole_or_not_at_all() -> None:
    request = ProposalRequest(TaskType.INDUCTION, (task(1),))
    size = words(proposer_prompt(request, CONFIG))
    assert fit_references(request, words, size, CONFIG) == request
    assert fit_references(request, words, size - 1, CONFIG) is None


def test_the_induction_zero_seed_is_the_identity_on_ten_distinct_inputs() -> None:
    seed = zero_seed(TaskType.INDUCTION)
    assert (seed.type, seed.origin, seed.program) == (TaskType.INDUCTION, Origin.ZERO_SEED, ZERO_SEED.program)
    assert len(set(seed.inputs)) == RolesConfig().min_induction_inputs
    assert induction_failure(seed.inputs, seed.message, RolesConfig()) is None
