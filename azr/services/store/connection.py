"""Redis clients for the store: bounded waits, retries with backoff, and a check of how Redis persists.

Every client made here returns raw bytes (the stream carries binary arrays), gives up on a hung command
after ``socket_timeout_s`` and retries a command that failed with a connection error, a timeout or
``LOADING`` (Redis reloading its AOF after a restart) with exponential backoff and jitter until
``retry_deadline_s`` after its first attempt. Blind retries are only sound because every operation of the
store is safe to repeat: adds carry an idempotency key, acks a token, reads recover what a lost reply
delivered (see ``experience_stream``).

Running Redis for training data: ``redis-server --appendonly yes --appendfsync everysec
--maxmemory-policy noeviction`` with its directory on a persistent volume (``azr selfplay`` without a
Redis URL starts such a server itself, see ``embedded``). Without the AOF a restart loses confirmed
experiences and resets the run id and policy version; with RDB snapshots alone a restart reloads an old
snapshot, so experiences are both lost and trained again; an eviction policy drops keys when memory is
full. ``check_persistence`` looks at these settings when a client is made.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from azr.services.config import RedisConfig

log = logging.getLogger(__name__)

T = TypeVar("T")
_BACKOFF_BASE_S = 0.05
_BACKOFF_CAP_S = 2.0


class PersistenceError(RuntimeError):
    """Redis would lose or evict experiences (no AOF, or an eviction policy) and the config refuses."""


class DeadlineRetry(Retry):
    """redis-py's ``Retry``, bounded by time instead of by a count: a restart of a few seconds is ridden
    out, a hung server costs at most about ``deadline_s`` plus one socket timeout."""

    def __init__(self, deadline_s: float) -> None:
        super().__init__(ExponentialWithJitterBackoff(base=_BACKOFF_BASE_S, cap=_BACKOFF_CAP_S), retries=-1)
        self.deadline_s = deadline_s

    def call_with_retry(
        self,
        do: Callable[[], T],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> T:
        self._backoff.reset()  # type: ignore[no-untyped-call]
        deadline = time.monotonic() + self.deadline_s
        failures = 0
        while True:
            try:
                return do()
            except self._supported_errors as error:
                if is_retryable and not is_retryable(error):
                    raise
                failures += 1
                if with_failure_count:
                    fail(error, failures)
                else:
                    fail(error)
                pause_s = self._backoff.compute(failures)
                if time.monotonic() + pause_s > deadline:
                    raise
                log.debug("Redis command failed (%s); retry %d in %.2f s", error, failures, pause_s)
                time.sleep(pause_s)


def connect(config: RedisConfig | None = None) -> redis.Redis:
    """A Redis client for the store (bytes replies, bounded waits, retries), checked with a PING so a bad
    URL fails here, and with Redis's persistence checked as ``config.persistence`` says."""
    config = config or RedisConfig()
    client = redis.Redis.from_url(
        config.url,
        socket_timeout=config.socket_timeout_s,
        socket_connect_timeout=config.connect_timeout_s,
        retry=DeadlineRetry(config.retry_deadline_s),
        retry_on_timeout=True,
        decode_responses=False,
    )
    client.ping()
    check_persistence(client, config)
    return client


def persistence_problems(client: redis.Redis) -> list[str]:
    """What in this Redis's settings can lose or evict stored experiences; empty when none."""
    try:
        settings = {name: _config_value(client, name) for name in ("appendonly", "maxmemory-policy", "save")}
    except redis.ResponseError as exc:  # CONFIG renamed or disabled, as on some managed services
        return [f"cannot read the server's settings ({exc}); make sure it runs with appendonly yes"]
    problems = []
    if settings["appendonly"] != "yes":
        loses = (
            "restores an older snapshot (RDB), so experiences are lost and retrained"
            if settings["save"]
            else "starts empty"
        )
        problems.append(f"appendonly is {settings['appendonly']!r}: after a restart Redis {loses}")
    if settings["maxmemory-policy"] != "noeviction":
        problems.append(
            f"maxmemory-policy is {settings['maxmemory-policy']!r}: when full, Redis evicts keys "
            "(experiences, ledgers) instead of refusing writes; use noeviction"
        )
    return problems


def check_persistence(client: redis.Redis, config: RedisConfig) -> None:
    """Refuse, warn or ignore (``config.persistence``) a Redis that would lose or evict experiences."""
    if config.persistence == "ignore":
        return
    problems = persistence_problems(client)
    if not problems:
        return
    advice = (
        "run redis-server with --appendonly yes --maxmemory-policy noeviction (or let azr start its own), "
        "or set redis.persistence"
    )
    message = f"Redis at {config.url} is not safe for training data: {'; '.join(problems)}; {advice}"
    if config.persistence == "refuse":
        raise PersistenceError(message)
    log.warning("%s", message)


def _config_value(client: redis.Redis, name: str) -> str:
    reply: dict[Any, Any] = client.config_get(name)
    value = next(iter(reply.values()), b"")
    return value.decode() if isinstance(value, bytes) else str(value)
