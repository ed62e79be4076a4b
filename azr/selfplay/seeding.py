"""The seeding stage: fill the buffers with valid tasks written by the initial model before training.

AZR starts every buffer from the zero seed (and any user seeds), then lets the current model propose
tasks, without training on them, until each buffer holds B x S tasks. A model that cannot yet write
valid tasks would loop forever, so the stage stops after ``max_seed_rounds`` rounds and training starts
from what the buffers hold; the zero seed guarantees every buffer has at least one task.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from azr.core.task import Task, TaskType
from azr.proposer.rewards import checks_message
from azr.roles.config import RolesConfig
from azr.selfplay.config import SelfPlayConfig
from azr.selfplay.metrics import RoundMetrics
from azr.selfplay.round import SelfPlayRound

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SeedingReport:
    rounds: int
    proposed: int
    added: int
    sizes: dict[TaskType, int]
    reached_target: bool
    """Whether every buffer reached ``B x S`` tasks (rather than the stage running out of rounds)."""


async def seed_buffers(round_: SelfPlayRound, config: SelfPlayConfig) -> SeedingReport:
    """Propose and validate (no training) until every buffer holds ``B x S`` tasks or the rounds run out."""
    target = config.batch_size * config.seed_factor
    proposed = added = rounds = 0
    sizes = dict(round_.store.sizes())
    while rounds < config.max_seed_rounds and min(sizes.values(), default=0) < target:
        metrics = RoundMetrics()
        proposals = await round_.propose(step=0, metrics=metrics)
        await round_.validate(proposals, metrics)
        added += round_.store.add([_seeded(t, round_.roles) for p in proposals if (t := p.valid_task)])
        proposed += len(proposals)
        rounds += 1
        sizes = dict(round_.store.sizes())
        log.info("seeding round %d: %d proposals, buffers %s", rounds, len(proposals), _show(sizes))
    reached = min(sizes.values(), default=0) >= target
    if not reached:
        log.warning(
            "seeding stopped after %d rounds below the target of %d tasks per buffer (%s): the model writes "
            "few valid tasks yet; training starts from what the buffers hold",
            rounds,
            target,
            _show(sizes),
        )
    return SeedingReport(rounds=rounds, proposed=proposed, added=added, sizes=sizes, reached_target=reached)


def _seeded(task: Task, roles: RolesConfig) -> Task:
    """A seeded task as it joins its buffer. Under the message check an induction message enters a buffer
    only once rollouts have shown it does not mislead; seeding samples none, so the task enters without it."""
    return task.without_message() if checks_message(task.type, roles) else task


def _show(sizes: dict[TaskType, int]) -> str:
    return ", ".join(f"{t.value} {n}" for t, n in sizes.items())
