"""Metrics in Redis for the API and the dashboard: a stream of per-step records and a hash of counters.

Counter names are built here and only here, namespaced with ``/`` like the logged diagnostics
(``proposals/deduction/error/timeout``, ``stream/stale_dropped``). Buffer sizes are gauges read live from
the buffers (``TaskBuffers.sizes``), not counters.

A metrics record is ``{step, t, values}`` where ``values`` is a JSON object of floats; a non-finite value
(a diverged loss) is kept as ``null`` rather than refused, so the dashboard shows that it happened.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import redis
from redis.typing import EncodableT, FieldT

from azr.core.task import TaskType, TaskUse
from azr.executor.errors import ErrorCode
from azr.services.config import MetricsConfig
from azr.services.store.keys import Keys
from azr.services.store.replies import as_bytes, as_entries, as_fields, first_stream_entries


class QuarantineReason(StrEnum):
    MALFORMED = "malformed"  # the entry does not decode as an experience
    MAX_FAILURES = "max_failures"  # delivered alone, it kept failing its consumer (died, lease lapsed)


STREAM_ADDED = "stream/added"
STREAM_TRAINED = "stream/trained"
STREAM_DUPLICATES = "stream/duplicates_skipped"
STREAM_STALE = "stream/stale_dropped"
STREAM_RECLAIMED = "stream/reclaimed"
STREAM_RECOVERED = "stream/recovered"
STREAM_READ_ERRORS = "stream/read_errors"
STREAM_LEASES_LOST = "stream/leases_lost"
STREAM_COUNTERS = (
    STREAM_ADDED,
    STREAM_TRAINED,
    STREAM_DUPLICATES,
    STREAM_STALE,
    STREAM_RECLAIMED,
    STREAM_RECOVERED,
    STREAM_LEASES_LOST,
)
"""The stream's lifetime counters (``stream/read_errors`` is a per-process gauge of ``health()``)."""


def quarantined(reason: QuarantineReason) -> str:
    return f"stream/quarantined/{reason.value}"


def proposal_outcome(task_type: TaskType, error: ErrorCode | None) -> str:
    """Counter of proposals of a type that were valid (``error`` None) or failed with an error class."""
    outcome = "valid" if error is None else f"error/{error.value}"
    return f"proposals/{task_type.value}/{outcome}"


def solve_outcome(task_type: TaskType, correct: bool) -> str:
    return f"solves/{task_type.value}/{'correct' if correct else 'wrong'}"


def task_use(task_id: str, use: TaskUse) -> str:
    """The counter of one kind of use of one task (see ``azr.core.task.TaskUse``)."""
    return f"tasks/{task_id}/{use.value}"


class Counters:
    """Monotonic integer counters in one Redis hash."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self._key = keys.counters()

    @property
    def key(self) -> str:
        """The hash key, for callers that increment counters inside their own transaction."""
        return self._key

    def incr(self, name: str, by: int = 1) -> int:
        return int(self._client.hincrby(self._key, name, by))

    def incr_many(self, deltas: Mapping[str, int]) -> None:
        pipe = self._client.pipeline(transaction=True)
        for name, by in deltas.items():
            if by:
                pipe.hincrby(self._key, name, by)
        pipe.execute()

    def get(self, name: str) -> int:
        value = self._client.hget(self._key, name)
        return 0 if value is None else int(value)

    def get_many(self, names: Sequence[str]) -> dict[str, int]:
        """The named counters in one round trip (0 for those never incremented)."""
        values = self._client.hmget(self._key, list(names)) if names else []
        return {name: 0 if v is None else int(v) for name, v in zip(names, values, strict=True)}

    def all(self) -> dict[str, int]:
        return {k.decode(): int(v) for k, v in as_fields(self._client.hgetall(self._key)).items()}


@dataclass(frozen=True, slots=True)
class MetricsRecord:
    id: str
    """Stream entry id; pass the last one seen to ``MetricsStream.since`` to tail."""
    step: int
    time_s: float
    """Unix time the record was published."""
    values: dict[str, float | None]


class MetricsStream:
    """Per-step metric records, capped at about ``MetricsConfig.maxlen``."""

    def __init__(self, client: redis.Redis, keys: Keys, config: MetricsConfig | None = None) -> None:
        self._client = client
        self._key = keys.metrics()
        self._maxlen = (config or MetricsConfig()).maxlen

    def publish(self, step: int, values: Mapping[str, float]) -> str:
        """Append a record; returns its id."""
        clean = {name: float(v) if math.isfinite(v) else None for name, v in values.items()}
        fields: dict[FieldT, EncodableT] = {
            "step": step,
            "t": repr(time.time()),
            "values": json.dumps(clean, separators=(",", ":")),
        }
        entry_id = self._client.xadd(self._key, fields, maxlen=self._maxlen, approximate=True)
        return as_bytes(entry_id).decode()

    def latest(self, n: int) -> list[MetricsRecord]:
        """The n most recent records, oldest first."""
        return [_record(i, f) for i, f in reversed(as_entries(self._client.xrevrange(self._key, count=n)))]

    def since(
        self, last_id: str = "0-0", count: int = 1000, block_ms: int | None = None
    ) -> list[MetricsRecord]:
        """Records after ``last_id`` (all from the start with the default), waiting up to ``block_ms``."""
        reply = self._client.xread({self._key: last_id}, count=count, block=block_ms)
        return [_record(i, f) for i, f in first_stream_entries(reply)]


def _record(entry_id: bytes, fields: Mapping[bytes, bytes]) -> MetricsRecord:
    values = json.loads(fields[b"values"])
    return MetricsRecord(
        id=entry_id.decode(), step=int(fields[b"step"]), time_s=float(fields[b"t"]), values=values
    )
