"""``POST /v1/seeds``: users give self-play tasks; each is validated by the executor before it is kept."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response
from pydantic import Field, RootModel

from azr.core.task import Task
from azr.executor.errors import ErrorCode
from azr.services.api.deps import Authorized, ClientAddress, State
from azr.services.api.limits import RateLimiter
from azr.services.api.problems import PROBLEM_RESPONSES, ProblemError
from azr.services.api.schemas import SeedIn, SeedOutcome, SeedsOut
from azr.services.api.state import ApiState, run_blocking

router = APIRouter(prefix="/v1/seeds", tags=["seeds"])


class SeedsIn(RootModel[SeedIn | list[SeedIn]]):
    """One seed, or a list of them (at most ``max_seeds_per_request``)."""

    root: SeedIn | list[SeedIn] = Field(union_mode="left_to_right")


@router.post(
    "",
    status_code=201,
    response_model=SeedsOut,
    responses={
        200: {"model": SeedsOut, "description": "Every seed was already present."},
        **PROBLEM_RESPONSES,
    },
    summary="Submit seed tasks",
)
async def submit_seeds(
    body: SeedsIn, state: State, _: Authorized, client: ClientAddress, response: Response
) -> SeedsOut:
    """Validate each seed in the executor (gate, run, determinism, gold outputs) and store it with origin
    ``user``: 201 when a seed was added, 200 when all were present already. A list is all or nothing: if
    any seed is invalid, none is stored and the answer is 422 with every seed's outcome."""
    seeds = body.root if isinstance(body.root, list) else [body.root]
    limit = state.settings.max_seeds_per_request
    if not seeds or len(seeds) > limit:
        raise ProblemError(422, f"send between 1 and {limit} seeds, got {len(seeds)}")
    wait_s = state.seed_limiter.take(client, len(seeds))
    if wait_s > 0:
        state.metrics.seeds.labels("rate_limited").inc(len(seeds))
        raise ProblemError(
            429,
            f"seed submission is limited to {state.settings.seed_rate_per_s:g} per second",
            headers={"Retry-After": RateLimiter.retry_after(wait_s)},
        )
    step = state.curriculum.latest_step or 0
    tasks = [seed.to_task(step) for seed in seeds]
    outcomes = await asyncio.gather(*(_judge(state, i, task) for i, task in enumerate(tasks)))
    invalid = [o for o in outcomes if o.status == "invalid"]
    if any(o.error_class is ErrorCode.INFRA_ERROR for o in invalid):
        # The executor failed, not the seed: nothing is known about it, so nothing is refused.
        state.metrics.seeds.labels("executor_failed").inc(len(seeds))
        raise ProblemError(503, "the executor failed; try again", headers={"Retry-After": "5"})
    if invalid:
        state.metrics.seeds.labels("invalid").inc(len(invalid))
        first = invalid[0]
        detail = f"{len(invalid)} of {len(seeds)} seeds are invalid; first: {first.message}"
        if isinstance(body.root, list):
            rest = [
                o if o.status == "invalid" else o.model_copy(update={"status": "not_stored"})
                for o in outcomes
            ]
            raise ProblemError(422, detail, error_class=first.error_class, errors=rest)
        raise ProblemError(422, first.message, error_class=first.error_class, errors=[first])
    stored = await run_blocking(lambda: _store(state, tasks, outcomes))
    created = sum(o.status == "created" for o in stored)
    state.metrics.seeds.labels("created").inc(created)
    state.metrics.seeds.labels("exists").inc(len(stored) - created)
    response.status_code = 201 if created else 200
    return SeedsOut(results=stored)


async def _judge(state: ApiState, index: int, task: Task) -> SeedOutcome:
    stored = await run_blocking(lambda: state.catalog.contains(task))
    if stored is not None:
        return SeedOutcome(index=index, status="exists", task_id=task.id, outputs=list(stored.outputs))
    validation = await state.executor.validate(task)
    if validation.error is not None:
        return SeedOutcome(
            index=index,
            status="invalid",
            task_id=task.id,
            error_class=validation.error.code,
            message=f"{validation.error.code.value}: {validation.error.message}",
        )
    assert validation.outputs is not None
    return SeedOutcome(index=index, status="created", task_id=task.id, outputs=list(validation.outputs))


def _store(state: ApiState, tasks: list[Task], outcomes: list[SeedOutcome]) -> list[SeedOutcome]:
    """Add the validated tasks; one that another request added in the meantime reads as ``exists``."""
    result = list(outcomes)
    for i, (task, outcome) in enumerate(zip(tasks, outcomes, strict=True)):
        if outcome.status == "created" and not state.buffers.add(task.with_outputs(tuple(outcome.outputs))):
            result[i] = outcome.model_copy(update={"status": "exists"})
    return result


def _not_stored(outcome: SeedOutcome) -> SeedOutcome:
    return outcome.model_copy(update={"status": "not_stored"})
