"""The executor service: FastAPI around one ``ExecutorPool``.

Endpoints (``/v1`` needs ``Authorization: Bearer <token>`` when a token is configured):

- ``POST /v1/batches`` with ``{"jobs": [...]}`` (the DESIGN.md job objects): 202 and a batch id to poll,
  or, with ``?stream=true``, 200 and an NDJSON stream of results in completion order. A full queue answers
  429, a service not ready or shutting down 503, both with ``Retry-After``; the batch is then not started.
- ``GET /v1/batches/{id}?after=N&wait_s=S``: the results from position N on, waiting up to S seconds for
  the first new one.
- ``GET /healthz``: pool state and the isolation the backend achieved (503 until the pool is ready).
- ``GET /metrics``: Prometheus text.

A request body larger than ``max_body_bytes`` is refused with 413 before it is parsed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from azr.executor.backends.base import Backend
from azr.executor.pool import ExecutorPool, make_backend
from azr.services.auth import bearer_allows
from azr.services.body_limit import BodySizeLimit
from azr.services.executor_service.batches import AdmissionError, BatchRunner
from azr.services.executor_service.limits import too_large_detail
from azr.services.executor_service.metrics import ServiceMetrics
from azr.services.executor_service.schemas import BatchAccepted, BatchIn, BatchStatus, Health, Problem
from azr.services.executor_service.settings import ExecutorServiceSettings

log = logging.getLogger(__name__)

NDJSON = "application/x-ndjson"


@runtime_checkable
class PoolStatsSource(Protocol):
    """A backend that keeps a pool of sandboxes and can count them."""

    def pool_stats(self) -> Mapping[str, int]: ...


@dataclass
class ServiceState:
    """What the routes share: settings, metrics, and the pool once it has started."""

    settings: ExecutorServiceSettings
    status: Literal["ok", "starting", "draining"] = "starting"
    backend: Backend | None = None
    pool: ExecutorPool | None = None
    runner: BatchRunner | None = None
    metrics: ServiceMetrics = field(init=False)

    def __post_init__(self) -> None:
        self.metrics = ServiceMetrics(self.pool_stats)

    def pool_stats(self) -> dict[str, int] | None:
        return dict(self.backend.pool_stats()) if isinstance(self.backend, PoolStatsSource) else None


def create_app(settings: ExecutorServiceSettings | None = None) -> FastAPI:
    """Build the application; the pool starts (and is probed) when the application starts."""
    settings = settings or ExecutorServiceSettings()
    state = ServiceState(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        config = settings.pool_config()
        state.backend = make_backend(config)
        pool = ExecutorPool(
            state.backend,
            limits=config.limits,
            gate=config.gate,
            max_in_flight=config.in_flight,
            owns_backend=True,
        )
        await pool.__aenter__()  # probes the primary slots; a backend that cannot run fails the start-up here
        state.pool = pool
        state.runner = BatchRunner(
            pool,
            max_pending_jobs=settings.max_pending_jobs,
            result_ttl_s=settings.result_ttl_s,
            on_result=state.metrics.observe,
        )
        state.status = "ok"
        log.info("executor service ready: backend %s, isolation %s", settings.backend, pool.isolation)
        try:
            yield
        finally:
            state.status = "draining"
            await state.runner.aclose()
            await pool.aclose()

    app = FastAPI(
        title="AZR executor",
        summary="Validate tasks and check answers in sandboxes.",
        version="1",
        lifespan=lifespan,
    )
    app.state.executor = state
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes, refusal=too_large_detail)
    app.include_router(router)
    return app


def _state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.executor
    return state


State = Annotated[ServiceState, Depends(_state)]
_bearer = HTTPBearer(auto_error=False)


def _authorize(
    state: State, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    if not bearer_allows(credentials, state.settings.token):
        raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})


def _running(state: State) -> BatchRunner:
    if state.status != "ok" or state.runner is None:
        state.metrics.refused.labels("not_ready").inc()
        raise HTTPException(
            503, f"the executor is {state.status}", headers={"Retry-After": str(state.settings.retry_after_s)}
        )
    return state.runner


Authorized = Annotated[None, Depends(_authorize)]
Runner = Annotated[BatchRunner, Depends(_running)]

router = APIRouter()
_REFUSALS: dict[int | str, dict[str, Any]] = {code: {"model": Problem} for code in (401, 413, 422, 429, 503)}


@router.post("/v1/batches", status_code=202, response_model=BatchAccepted, responses=_REFUSALS)
async def submit_batch(
    body: BatchIn,
    state: State,
    runner: Runner,
    _: Authorized,
    stream: Annotated[bool, Query(description="Stream NDJSON results instead of answering 202.")] = False,
) -> Response | BatchAccepted:
    if len(body.jobs) > state.settings.max_batch_jobs:
        raise HTTPException(
            413, f"a batch holds at most {state.settings.max_batch_jobs} jobs, got {len(body.jobs)}"
        )
    try:
        batch = runner.admit([job.job for job in body.jobs])
    except AdmissionError as exc:
        state.metrics.refused.labels(exc.reason).inc()
        raise HTTPException(
            exc.status_code, str(exc), headers={"Retry-After": str(state.settings.retry_after_s)}
        ) from None
    finally:
        state.metrics.pending.set(runner.pending_jobs)
    if not stream:
        return BatchAccepted(batch_id=batch.id, size=batch.size)

    async def lines() -> AsyncIterator[str]:
        try:
            async for result in batch.stream():
                yield result.to_json() + "\n"
        finally:
            runner.discard(batch)  # a client that left takes its unfinished jobs with it

    return StreamingResponse(lines(), media_type=NDJSON)


@router.get("/v1/batches/{batch_id}", response_model=BatchStatus, responses={404: {"model": Problem}})
async def poll_batch(
    batch_id: str,
    state: State,
    runner: Runner,
    _: Authorized,
    after: Annotated[int, Query(ge=0, description="Results already seen.")] = 0,
    wait_s: Annotated[float, Query(ge=0, description="Wait this long for a new result.")] = 0.0,
) -> BatchStatus:
    batch = runner.get(batch_id)
    if batch is None:
        raise HTTPException(404, f"no batch {batch_id!r} (unknown, or its results expired)")
    if wait_s > 0:
        await batch.wait_beyond(after, min(wait_s, state.settings.max_poll_wait_s))
    return BatchStatus(
        batch_id=batch.id,
        size=batch.size,
        done=len(batch.results),
        complete=batch.complete,
        results=[result.to_dict() for result in batch.results[after:]],
    )


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
async def healthz(state: State) -> JSONResponse:
    isolation: dict[str, Any] = {}
    if state.pool is not None:
        report = state.pool.isolation
        isolation = {**asdict(report), "full": report.full}
    health = Health(
        status=state.status,
        backend=state.settings.backend,
        isolation=isolation,
        pool=state.pool_stats(),
        pending_jobs=state.runner.pending_jobs if state.runner else 0,
        max_pending_jobs=state.settings.max_pending_jobs,
    )
    return JSONResponse(health.model_dump(), status_code=200 if state.status == "ok" else 503)


@router.get("/metrics", response_class=Response)
async def metrics(state: State) -> Response:
    if state.runner is not None:
        state.metrics.pending.set(state.runner.pending_jobs)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
