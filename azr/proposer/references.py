"""Choosing what a proposer prompt shows: K references of one type, or one program for induction, and
fitting them into the prompt token budget.

Buffers live elsewhere (Redis); this module only picks from the candidates it is given, with the caller's
random generator so that a run is reproducible from its seed.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence

from azr.core.task import Task
from azr.proposer.prompts import ProposalRequest, proposer_prompt
from azr.roles.config import RolesConfig
from azr.roles.templates import Prompt


def reference_chars(task: Task) -> int:
    """Size of a task as a prompt shows it: its program and every input and output text."""
    return len(task.program) + sum(map(len, task.inputs)) + sum(map(len, task.outputs))


def choose_references(
    candidates: Sequence[Task], config: RolesConfig, rng: random.Random
) -> tuple[Task, ...]:
    """Up to ``n_references`` distinct validated tasks, uniformly without replacement.

    Tasks without gold outputs or over ``max_reference_chars`` are skipped: a prompt never shows a
    truncated program. Fewer than K come back when fewer fit (early buffers hold only the zero seed).
    """
    fitting = [t for t in _distinct(candidates) if _showable(t, config)]
    return tuple(rng.sample(fitting, min(config.n_references, len(fitting))))


def choose_induction_source(
    candidates: Sequence[Task], config: RolesConfig, rng: random.Random
) -> Task | None:
    """One task whose program an induction proposal writes inputs for (from the deduction and abduction
    buffers); ``None`` when no candidate fits."""
    fitting = [t for t in _distinct(candidates) if _showable(t, config)]
    return rng.choice(fitting) if fitting else None


def _showable(task: Task, config: RolesConfig) -> bool:
    has_gold = bool(task.outputs) and len(task.outputs) == len(task.inputs)
    return has_gold and reference_chars(task) <= config.max_reference_chars


def _distinct(tasks: Sequence[Task]) -> list[Task]:
    return list({task.id: task for task in tasks}.values())


def fit_references(
    request: ProposalRequest,
    count_tokens: Callable[[Prompt], int],
    max_prompt_tokens: int,
    config: RolesConfig,
) -> ProposalRequest | None:
    """The request with references dropped one by one, last first, until its prompt fits the budget.

    ``count_tokens`` renders a prompt as the sampler will (chat template or base string, with the real
    tokenizer) and counts its tokens; the loop passes ``RolesConfig.max_prompt_tokens`` as the budget
    (paper: 6,144). References are dropped from the end, so the random order of ``choose_references``
    decides which go. ``None`` when not even one reference fits: the caller skips the prompt (and counts
    it) rather than truncating it, since a cut prompt would show a broken program. An induction request
    has one reference, so it either fits as it is or gives ``None``.
    """
    for kept in range(len(request.references), 0, -1):
        candidate = dataclasses.replace(request, references=request.references[:kept])
        if count_tokens(proposer_prompt(candidate, config)) <= max_prompt_tokens:
            return candidate
    return None
