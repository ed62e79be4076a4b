"""The REST API and dashboard: FastAPI over the run's Redis store and an executor.

``create_app`` wires one router per resource (``routers/``) to an ``ApiState``; the state is built when
the application starts (connect to Redis, start or reach the executor, start following the store).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from fastapi import FastAPI
from fastapi.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from azr.executor.api import Executor
from azr.services.api import problems
from azr.services.api.limits import too_large_problem
from azr.services.api.routers import dashboard, health, runs, seeds, stats, tasks
from azr.services.api.settings import ApiSettings
from azr.services.api.state import ApiState, ReadinessProbe, open_client, started_executor
from azr.services.body_limit import BodySizeLimit

log = logging.getLogger(__name__)


def create_app(
    settings: ApiSettings | None = None,
    *,
    executor: tuple[Executor, ReadinessProbe] | None = None,
) -> FastAPI:
    """Build the application. ``executor`` lends one that the caller started (and will stop); without
    it the application starts the one the settings name."""
    settings = settings or ApiSettings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = open_client(settings)
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(client.close)
            if executor is None:
                runner, ready = await stack.enter_async_context(started_executor(settings))
            else:
                runner, ready = executor
            state = ApiState(settings, client, runner, ready)
            app.state.api = state
            await state.refresh()
            follower = asyncio.create_task(_follow(state))
            log.info("API ready over %s (prefix %s)", settings.redis_url, settings.redis_prefix)
            try:
                yield
            finally:
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower

    app = FastAPI(
        title="AZR",
        summary="Seed tasks and curriculum statistics of an Absolute Zero self-play run.",
        version="1",
        lifespan=lifespan,
    )
    problems.install(app)
    app.add_middleware(RequestMetrics)
    app.add_middleware(GZipMiddleware, minimum_size=4_096)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes, refusal=too_large_problem)
    for module in (seeds, tasks, stats, runs, health, dashboard):
        app.include_router(module.router)
    return app


async def _follow(state: ApiState) -> None:
    """Refresh the curriculum every ``refresh_s``; a failed refresh (Redis away) is logged and retried."""
    while True:
        await asyncio.sleep(state.settings.refresh_s)
        try:
            await state.refresh()
        except Exception:
            log.exception("following the store failed; retrying in %.1f s", state.settings.refresh_s)


class RequestMetrics:
    """ASGI middleware: count and time each request under its route template (never the raw path: ids
    would make one series per task), and say the time in a ``Server-Timing`` header. Plain ASGI rather
    than ``BaseHTTPMiddleware``, which costs a task and a stream per request."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                # Time spent in the application before answering (browsers' devtools show it; the
                # benchmark separates it from time queued on a busy host).
                elapsed_ms = (time.perf_counter() - started) * 1000
                headers = [
                    *message.get("headers", []),
                    (b"server-timing", f"app;dur={elapsed_ms:.2f}".encode()),
                ]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self._app(scope, receive, sending)
        finally:
            state: ApiState | None = getattr(scope["app"].state, "api", None)
            if state is not None:
                route = str(getattr(scope.get("route"), "path", "unmatched"))
                state.metrics.requests.labels(scope["method"], route, str(status)).inc()
                state.metrics.latency.labels(scope["method"], route).observe(time.perf_counter() - started)
