"""The seeding stage: fill the buffers with valid tasks written by the initial model before training.

AZR starts every buffer from the zero seed (and any user seeds), then lets the current model propose
tasks, without training on them, until each buffer holds B x S tasks. A model that cannot yet write
valid tasks would loop forever, so the stage stops after ``max_seed_rounds`` rounds and training starts
from what the buffers hold; the zero seed guarantees every buffer has at least one task. A run that does
not propose (``selfplay.propose=false``) has no seeding stage: its solver trains on the seeds alone.

User seeds from a file (``selfplay.seed_tasks``) go in first, all or none: each is validated by the
executor, which computes its gold outputs, and must fit a solver prompt; one that fails stops the run
before anything trains on a task set that is not the one asked for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from azr.core.task import Origin, Task, TaskType, seed_problem
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


class SeedTasksError(ValueError):
    """Seed tasks that cannot be read, or that the executor refused or no solver prompt can hold; none of
    them was added. ``reasons`` holds (0-based position in the file's tasks, why) for each refused task."""

    def __init__(self, message: str, reasons: Sequence[tuple[int, str]] = ()) -> None:
        super().__init__(message)
        self.reasons = list(reasons)

    @classmethod
    def refused(cls, source: str, reasons: Sequence[tuple[int, str]]) -> SeedTasksError:
        shown = "; ".join(f"task {i + 1}: {why}" for i, why in reasons[:5])
        more = f" (and {len(reasons) - 5} more)" if len(reasons) > 5 else ""
        return cls(f"{source}: {len(reasons)} invalid seed task(s), none added: {shown}{more}", reasons)


async def add_seed_tasks(round_: SelfPlayRound, tasks: Sequence[Task], *, source: str) -> int:
    """Validate ``tasks`` and add them to their buffers as user seeds; returns how many were new.

    Raises ``SeedTasksError`` naming every task (1-based, in file order) that breaks the seed rules every
    seed follows (``azr.core.task.seed_problem``: those of ``POST /v1/seeds``), and otherwise every one
    the executor refused or whose solver prompt is over ``roles.max_prompt_tokens``; it adds none then.
    """
    problems = [seed_problem(t) for t in tasks]
    reasons = [(i, problem) for i, problem in enumerate(problems) if problem is not None]
    if reasons:
        raise SeedTasksError.refused(source, reasons)
    validations = await asyncio.gather(*(round_.executor.validate(t) for t in tasks))
    seeds: list[Task] = []
    for i, (task, validation) in enumerate(zip(tasks, validations, strict=True)):
        if validation.error is not None:
            reasons.append((i, f"{validation.error.code.value}: {validation.error.message}"))
            continue
        assert validation.outputs is not None
        seed = replace(task, outputs=tuple(validation.outputs), origin=Origin.USER)
        if round_.solver_prompt_ids(seed) is None:
            reasons.append(
                (i, f"its solver prompt is over max_prompt_tokens={round_.roles.max_prompt_tokens}")
            )
            continue
        seeds.append(seed)
    if reasons:
        raise SeedTasksError.refused(source, reasons)
    return round_.store.add(seeds)


async def seed_buffers(round_: SelfPlayRound, config: SelfPlayConfig) -> SeedingReport:
    """Propose and validate (no training) until every buffer holds ``B x S`` tasks or the rounds run out;
    nothing when the run does not propose."""
    target = config.batch_size * config.seed_factor if config.propose else 0
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
