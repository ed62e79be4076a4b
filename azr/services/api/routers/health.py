"""Probes and Prometheus: ``/healthz`` (the process is up), ``/readyz`` (Redis and the executor answer),
``/metrics``."""

from __future__ import annotations

import redis
from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from azr.services.api.deps import State
from azr.services.api.schemas import Health, Readiness
from azr.services.api.state import run_blocking

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(state: State) -> JSONResponse:
    problems: list[str] = []
    try:
        await run_blocking(state.client.ping)
        redis_ok = True
    except redis.RedisError as exc:
        redis_ok = False
        problems.append(f"redis unreachable: {exc}")
    executor_problem = await state.executor_ready()
    if executor_problem:
        problems.append(executor_problem)
    ready = Readiness(
        status="not_ready" if problems else "ready",
        redis=redis_ok,
        executor=executor_problem is None,
        detail="; ".join(problems),
    )
    return JSONResponse(ready.model_dump(), status_code=503 if problems else 200)


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def metrics(state: State) -> Response:
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
