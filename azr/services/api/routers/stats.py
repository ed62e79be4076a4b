"""``/v1/stats``: curriculum statistics, whole or as a live stream of per-step records."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import StreamingResponse

from azr.services.api.deps import State
from azr.services.api.problems import PROBLEM_RESPONSES
from azr.services.api.schemas import Stats
from azr.services.store.metrics import MetricsRecord

router = APIRouter(prefix="/v1/stats", tags=["stats"])

EVENT_STREAM = "text/event-stream"
_ENTRY_ID = r"^\d{1,20}-\d{1,20}$"


@router.get("", response_model=Stats, responses=PROBLEM_RESPONSES, summary="Curriculum statistics")
async def read_stats(
    state: State, accept_encoding: Annotated[str | None, Header(include_in_schema=False)] = None
) -> Response:
    """Per type and over steps: buffer sizes by origin, proposal validity and error classes, solve rate,
    learnability, complexity and diversity, rewards, KL, entropy, response length, throughput, policy
    version and staleness. Built incrementally from the store; at most ``refresh_s`` old."""
    curriculum = state.curriculum
    if not curriculum.snapshot_json:
        await state.refresh()
    if "gzip" in (accept_encoding or ""):
        headers = {"Content-Encoding": "gzip", "Vary": "Accept-Encoding"}
        return Response(curriculum.snapshot_gzip, media_type="application/json", headers=headers)
    return Response(
        curriculum.snapshot_json, media_type="application/json", headers={"Vary": "Accept-Encoding"}
    )


@router.get(
    "/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {EVENT_STREAM: {}}, "description": "One 'step' event per metrics record."}},
    summary="Live per-step records (server-sent events)",
)
async def stream_stats(
    request: Request,
    state: State,
    last_event_id: Annotated[
        str | None, Header(pattern=_ENTRY_ID, description="Resume after this event id (set by browsers).")
    ] = None,
) -> StreamingResponse:
    """Each event is ``step`` with data ``{"step", "time_s", "values"}`` and the stream entry as its id.
    New clients start at the newest record; a reconnecting browser resumes after ``Last-Event-ID``."""
    heartbeat_s = state.settings.sse_heartbeat_s
    start = last_event_id or _previous(state.tail_id())

    async def events() -> AsyncIterator[str]:
        last_id = start
        yield f"retry: {int(state.settings.refresh_s * 2000)}\n\n"
        while not await request.is_disconnected():
            records = await state.records_after(last_id, heartbeat_s)
            if not records:
                yield ": idle\n\n"
                continue
            for record in records:
                yield _event(record)
            last_id = records[-1].id

    return StreamingResponse(events(), media_type=EVENT_STREAM, headers={"Cache-Control": "no-store"})


def _previous(entry_id: str) -> str:
    """The id just before ``entry_id``, so that a new client gets the newest record at once."""
    ms, _, seq = entry_id.partition("-")
    if entry_id == "0-0":
        return entry_id
    return f"{ms}-{int(seq) - 1}" if int(seq) > 0 else f"{int(ms) - 1}-{2**63}"


def _event(record: MetricsRecord) -> str:
    data = json.dumps({"step": record.step, "time_s": record.time_s, "values": record.values})
    return f"id: {record.id}\nevent: step\ndata: {data}\n\n"
