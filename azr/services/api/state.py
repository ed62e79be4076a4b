"""What the routes share: settings, the store's objects, the executor, the followed curriculum.

The store is synchronous (redis-py), so every Redis call made by a route runs in a worker thread
(``run_blocking``) and never stalls the event loop. One background task follows the store
(``Curriculum.refresh`` every ``refresh_s``) and wakes the event-stream clients when new records arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import redis
from anyio import to_thread

from azr.executor.api import Executor
from azr.services.api.catalog import Catalog
from azr.services.api.curriculum import Curriculum
from azr.services.api.limits import RateLimiter
from azr.services.api.observability import ApiMetrics
from azr.services.api.settings import ApiSettings
from azr.services.store import connect
from azr.services.store.buffers import TaskBuffers
from azr.services.store.keys import Keys
from azr.services.store.metrics import MetricsRecord, MetricsStream
from azr.services.store.run_state import RunState

log = logging.getLogger(__name__)
T = TypeVar("T")


class ReadinessProbe(Protocol):
    async def __call__(self) -> str | None:
        """None when the executor can take work, else why not."""


@dataclass
class ApiState:
    settings: ApiSettings
    client: redis.Redis
    executor: Executor
    executor_ready: ReadinessProbe
    keys: Keys = field(init=False)
    buffers: TaskBuffers = field(init=False)
    metrics_stream: MetricsStream = field(init=False)
    run: RunState = field(init=False)
    catalog: Catalog = field(init=False)
    curriculum: Curriculum = field(init=False)
    seed_limiter: RateLimiter = field(init=False)
    metrics: ApiMetrics = field(init=False)
    _refresh_lock: asyncio.Lock = field(init=False, default_factory=asyncio.Lock)
    _news: asyncio.Condition = field(init=False, default_factory=asyncio.Condition)

    def __post_init__(self) -> None:
        self.keys = Keys(self.settings.redis_prefix)
        self.buffers = TaskBuffers(self.client, self.keys)
        self.metrics_stream = MetricsStream(self.client, self.keys)
        self.run = RunState(self.client, self.keys)
        self.catalog = Catalog(self.client, self.keys)
        self.curriculum = Curriculum(self.client, self.keys, self.settings.series_points)
        self.seed_limiter = RateLimiter(self.settings.seed_rate_per_s, self.settings.seed_burst)
        self.metrics = ApiMetrics(self.curriculum)

    async def refresh(self) -> None:
        """Bring the curriculum up to date (one refresh at a time) and wake event-stream clients."""
        async with self._refresh_lock:
            fresh = await run_blocking(self.curriculum.refresh)
        if fresh:
            async with self._news:
                self._news.notify_all()

    async def records_after(self, last_id: str, wait_s: float) -> list[MetricsRecord]:
        """Records newer than ``last_id``, waiting up to ``wait_s`` for one. They come from memory, or
        from the stream when ``last_id`` is older than every record still held in memory."""
        found = _after(self.curriculum.recent, last_id)
        if found is None:
            return await run_blocking(lambda: self.metrics_stream.since(last_id, count=1000))
        if found:
            return found
        async with self._news:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._news.wait(), wait_s)
        return _after(self.curriculum.recent, last_id) or []

    def tail_id(self) -> str:
        recent = self.curriculum.recent
        return recent[-1].id if recent else "0-0"


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _after(recent: deque[MetricsRecord], last_id: str) -> list[MetricsRecord] | None:
    """Records of ``recent`` after ``last_id``; None when some may have left memory already."""
    if not recent:
        return []
    key = _id_key(last_id)
    if key < _id_key(recent[0].id) and len(recent) == recent.maxlen:
        return None
    return [record for record in recent if _id_key(record.id) > key]


async def run_blocking(call: Callable[[], T]) -> T:
    return await to_thread.run_sync(call)


@contextlib.asynccontextmanager
async def started_executor(settings: ApiSettings) -> AsyncIterator[tuple[Executor, ReadinessProbe]]:
    """The executor named by the settings, started, with its readiness probe; closed on exit."""
    if settings.executor == "service":
        from azr.services.executor_service.client import ExecutorClient

        token = settings.executor_token.get_secret_value() if settings.executor_token else None
        async with ExecutorClient(settings.executor_url, token=token) as client:

            async def service_ready() -> str | None:
                try:
                    health = await client.health()
                except Exception as exc:
                    return f"executor service unreachable: {exc!r}"
                status = health.get("status")
                return None if status == "ok" else f"executor service is {status}"

            yield client, service_ready
        return
    from azr.executor.limits import SandboxLimits
    from azr.executor.pool import ExecutorPool

    timeout_s = settings.executor_timeout_s
    pool = ExecutorPool.create(
        settings.executor_backend,
        workers=settings.executor_workers,
        limits=SandboxLimits(timeout_s=timeout_s, cpu_time_s=max(1, math.ceil(timeout_s))),
        allow_unisolated=settings.executor_allow_unisolated,
    )
    async with pool:

        async def pool_ready() -> str | None:
            return None

        yield pool, pool_ready


def open_client(settings: ApiSettings) -> redis.Redis:
    client: redis.Redis = connect(settings.redis_config())
    return client
