"""``/v1/runs/current``: which run this API serves and where it stands."""

from __future__ import annotations

from fastapi import APIRouter

from azr.services.api.deps import State
from azr.services.api.schemas import RunOut
from azr.services.api.state import run_blocking

router = APIRouter(prefix="/v1/runs", tags=["runs"])


@router.get("/current", response_model=RunOut, summary="The current run")
async def current_run(state: State) -> RunOut:
    def read() -> RunOut:
        latest = state.metrics_stream.latest(1)
        return RunOut(
            run_id=state.run.run_id(),
            policy_version=state.run.policy_version(),
            step=latest[0].step if latest else None,
            step_time_s=latest[0].time_s if latest else None,
            buffer_sizes=state.buffers.sizes(),
        )

    return await run_blocking(read)
