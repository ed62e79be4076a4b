"""The producer side of the experience stream: idempotent, chunked adds with backpressure (see
``experience_stream`` for the guarantees)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.typing import EncodableT

from azr.core.experience import Experience
from azr.services.config import StreamConfig
from azr.services.store import codec, stream_scripts
from azr.services.store.deliveries import Admitted, BackpressureTimeoutError
from azr.services.store.keys import Keys
from azr.services.store.metrics import STREAM_ADDED

log = logging.getLogger(__name__)

_CHUNK_MAX_BYTES = 16 << 20  # one MULTI blocks Redis while it runs; keep each write short


class Admission:
    """Adds experiences to the stream, each id once."""

    def __init__(self, client: redis.Redis, keys: Keys, config: StreamConfig) -> None:
        self._keys = keys
        self._config = config
        self._stream = keys.experiences()
        self._admit = client.register_script(stream_scripts.ADMIT)
        self._writer = _without_retries(client)

    def add(self, experiences: Iterable[Experience], timeout_s: float | None) -> Admitted:
        timeout_s = self._config.backpressure_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        added = duplicates = 0
        for chunk, size_bytes in self._chunks(experiences):
            a, d = self._admit_chunk(chunk, size_bytes, deadline)
            added, duplicates = added + a, duplicates + d
        return Admitted(added=added, duplicates=duplicates)

    def _chunks(self, experiences: Iterable[Experience]) -> Iterator[tuple[list[bytes], int]]:
        """(id, payload) argument lists of at most max_pending experiences and bounded bytes."""
        max_bytes = min(self._config.max_pending_bytes, _CHUNK_MAX_BYTES)
        chunk: list[bytes] = []
        size_bytes = 0
        for exp in experiences:
            payload = codec.encode(exp)[codec.FIELD]
            if len(payload) > self._config.max_pending_bytes:
                raise ValueError(
                    f"experience {exp.id} is {len(payload)} bytes, more than stream.max_pending_bytes "
                    f"({self._config.max_pending_bytes})"
                )
            if chunk and (
                len(chunk) // 2 >= self._config.max_pending or size_bytes + len(payload) > max_bytes
            ):
                yield chunk, size_bytes
                chunk, size_bytes = [], 0
            chunk += [exp.id.encode(), payload]
            size_bytes += len(payload)
        if chunk:
            yield chunk, size_bytes

    def _admit_chunk(self, chunk: list[bytes], size_bytes: int, deadline: float) -> tuple[int, int]:
        """Write the experiences of a chunk not admitted before: ``ADMIT`` says which (and whether there
        is room), one MULTI writes them with their ids in the ledger. The MULTI goes through a client that
        does not retry: if its reply is lost, the next round's ``ADMIT`` finds what it wrote."""
        ids, payloads = chunk[0::2], chunk[1::2]
        head: list[EncodableT] = [
            self._config.max_pending,
            self._config.max_pending_bytes,
            size_bytes,
            self._config.ledger_retention_s * 1000,
            self._config.ledger_max_ids,
        ]
        delay_s = 0.002
        attempted: set[bytes] = set()  # written by a MULTI whose reply was lost, maybe
        while True:
            flags = self._admit(keys=[self._stream, self._keys.admitted()], args=[*head, *ids])
            if int(flags[0]) == -1:
                self._wait_for_room(flags, len(ids), deadline, delay_s)
                delay_s = min(delay_s * 2, 0.05)
                continue
            fresh = [(i, p) for i, p, f in zip(ids, payloads, flags, strict=True) if int(f)]
            fresh = list(dict(fresh).items())  # a second copy within the chunk is written once
            if not fresh:
                by_us = len(attempted)  # an earlier round's MULTI did go through
                return by_us, len(ids) - by_us
            now_ms = int(time.time() * 1000)
            pipe = self._writer.pipeline(transaction=True)
            for _, payload in fresh:
                pipe.xadd(self._stream, {codec.FIELD: payload})
            pipe.zadd(self._keys.admitted(), {i: now_ms for i, _ in fresh}, nx=True)
            pipe.zremrangebyrank(self._keys.admitted(), 0, -self._config.ledger_max_ids - 1)
            pipe.hincrby(self._keys.counters(), STREAM_ADDED, len(fresh))
            try:
                pipe.execute()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if time.monotonic() > deadline:
                    raise
                attempted.update(i for i, _ in fresh)
                log.warning("adding experiences failed (%s); checking what was written and retrying", exc)
                continue
            return len(fresh), len(ids) - len(fresh)

    def _wait_for_room(self, reply: list[object], count: int, deadline: float, delay_s: float) -> None:
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            raise BackpressureTimeoutError(
                f"{reply[1]} experiences ({int(str(reply[2])):,} bytes) are waiting untrained in "
                f"{self._stream} (max_pending={self._config.max_pending}, max_pending_bytes="
                f"{self._config.max_pending_bytes}); no room for {count} more before the timeout. Is the "
                "trainer consuming? If it is just slow, raise stream.max_pending, stream.max_pending_bytes "
                "or stream.backpressure_timeout_s."
            )
        time.sleep(min(delay_s, remaining_s))


def _without_retries(client: redis.Redis) -> redis.Redis:
    """A client on the same server whose commands are never retried blindly (for a MULTI that is not
    idempotent by itself)."""
    pool = client.connection_pool
    kwargs = {**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0)}
    return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs))
