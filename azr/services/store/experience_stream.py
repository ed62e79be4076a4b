"""The experience stream: rollout workers add experiences, the trainer reads, trains and acknowledges.

A Redis Stream with one consumer group (``StreamConfig.group``); each trainer process is a consumer.

Delivery semantics: at-least-once delivery + idempotent consumption = exactly-once training.

- At-least-once: an entry read by a consumer stays pending in the group until it is acknowledged. If its
  consumer dies, the entry goes idle, and after ``reclaim_idle_ms`` the next ``read`` of any consumer
  takes it over (XAUTOCLAIM) and delivers it again. Nothing is lost while Redis lives.
- Idempotent: ``ack`` is one Lua script that records the experience ids as trained (a sorted set of ids
  scored by time, kept ``trained_retention_s``), acknowledges and deletes the entries. ``read`` skips,
  acknowledges and counts any entry whose experience id is already recorded: an entry redelivered after
  its ack was applied, a second copy from a producer that retried an add, a batch that a slow consumer
  acknowledged after another consumer had reclaimed it (``ack`` then reports it as a duplicate).
- Exactly-once training: the trainer acknowledges right after its optimizer step and publishes the new
  weights only after that. A consumer killed between its step and its ack takes that step with it (the
  weights never left the process), so the reclaimed experiences are trained once, by the next consumer;
  one killed after its ack has them recorded and they are never trained again. (The trainer's own lineage
  restarts from its last checkpoint; experiences acknowledged after it are not replayed: by the time the
  trainer is back they are older than ``max_staleness`` allows anyway.)

A read also filters: entries that do not decode, and entries delivered more than ``max_deliveries``
times (they keep killing their consumer), are moved to the quarantine stream with the reason; stale
experiences (``policy_version < current - max_staleness``) are acknowledged, dropped and counted. The
counters live in the metrics hash (``metrics.Counters``).

Backpressure: acknowledged entries are deleted, so the stream length is exactly the number of
experiences waiting untrained (unread or in training). ``add`` writes a chunk (at most ``max_pending``
experiences, in one MULTI transaction) once the length plus the chunk fits within ``max_pending``; until
then it waits, up to ``backpressure_timeout_s``, then raises ``BackpressureTimeoutError``. The check and
the write are two steps (a script doing both would copy every payload through Lua, which halves producer
throughput), so P producers racing for the last room can overshoot by at most P - 1 chunks.

The API is synchronous: producers and the trainer are Ray actors with their own threads, and the REST API
reads counters with short calls from its thread pool; nothing here needs an event loop.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import redis
from redis.typing import EncodableT, FieldT, KeyT, StreamIdT

from azr.core.experience import Experience
from azr.services.config import StreamConfig
from azr.services.store import codec
from azr.services.store.deliveries import (
    AckResult,
    BackpressureTimeoutError,
    Batch,
    Delivery,
    QuarantinedEntry,
)
from azr.services.store.keys import Keys
from azr.services.store.metrics import (
    STREAM_ADDED,
    STREAM_DUPLICATES,
    STREAM_RECLAIMED,
    STREAM_STALE,
    STREAM_TRAINED,
    QuarantineReason,
    quarantined,
)
from azr.services.store.replies import as_bytes, as_entries, as_text, first_stream_entries

__all__ = [
    "AckResult",
    "BackpressureTimeoutError",
    "Batch",
    "Delivery",
    "ExperienceStream",
    "QuarantinedEntry",
]

log = logging.getLogger(__name__)

# KEYS: stream, trained, counters. ARGV: group, retention_ms, then (entry id, experience id) pairs.
# Returns {newly trained, already trained}. Lua's unpack() is bounded by the C stack, hence the slices.
_ACK = f"""
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local entries, members, fresh = {{}}, {{}}, 0
for i = 3, #ARGV, 2 do
  entries[#entries + 1] = ARGV[i]
  members[#members + 1] = now
  members[#members + 1] = ARGV[i + 1]
end
for i = 1, #entries, 1000 do
  local last = math.min(i + 999, #entries)
  -- one ZADD per slice: NX adds only ids not yet recorded, and counts them (a repeat counts once)
  fresh = fresh + redis.call('ZADD', KEYS[2], 'NX', unpack(members, 2 * i - 1, 2 * last))
  redis.call('XACK', KEYS[1], ARGV[1], unpack(entries, i, last))
  redis.call('XDEL', KEYS[1], unpack(entries, i, last))
end
local dup = #entries - fresh
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[2]))
if fresh > 0 then redis.call('HINCRBY', KEYS[3], '{STREAM_TRAINED}', fresh) end
if dup > 0 then redis.call('HINCRBY', KEYS[3], '{STREAM_DUPLICATES}', dup) end
return {{fresh, dup}}
"""

# KEYS: stream. ARGV: group, own consumer name, min idle ms. Deletes consumers of the group that hold no
# pending entries and have been idle that long; atomic, so a consumer cannot read between check and delete
# (deleting a consumer drops its pending entries from the group for good).
_PRUNE = """
for _, row in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local info = {}
  for i = 1, #row, 2 do info[row[i]] = row[i + 1] end
  if info['name'] ~= ARGV[2] and info['pending'] == 0 and info['idle'] > tonumber(ARGV[3]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], info['name'])
  end
end
return 0
"""
_PRUNE_EVERY_S = 60.0
_Fields = dict[bytes, bytes]


@dataclass(slots=True)
class _Drops:
    """Entries a read acknowledges and deletes instead of returning."""

    stale: list[bytes] = field(default_factory=list)
    duplicates: list[bytes] = field(default_factory=list)
    quarantine: list[tuple[bytes, _Fields, int, QuarantineReason, str]] = field(default_factory=list)


class ExperienceStream:
    """One producer or consumer of the stream. Not shared between threads: it keeps the consumer's
    reclaim cursor; make one per thread (they are cheap, the state is in Redis)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        config: StreamConfig | None = None,
        consumer: str | None = None,
    ) -> None:
        self._client = client
        self._keys = keys
        self._config = config or StreamConfig()
        self._stream = keys.experiences()
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self._ack = client.register_script(_ACK)
        self._prune = client.register_script(_PRUNE)
        self._reclaim_cursor: bytes | str = "0-0"
        self._last_prune = time.monotonic()
        timeout_s = client.connection_pool.connection_kwargs.get("socket_timeout")
        if timeout_s is not None and timeout_s * 1000 <= self._config.block_ms:
            raise ValueError(
                f"the Redis socket timeout ({timeout_s} s) must exceed stream.block_ms "
                f"({self._config.block_ms} ms), or blocking reads time out; raise redis.socket_timeout_s"
            )
        self._ensure_group()

    # Producer side.

    def add(self, experiences: Iterable[Experience], timeout_s: float | None = None) -> list[str]:
        """Append experiences (one MULTI transaction per chunk of at most ``max_pending``); returns their
        entry ids.

        Waits while a chunk does not fit within ``max_pending`` waiting experiences; raises
        ``BackpressureTimeoutError`` after ``timeout_s`` (default ``backpressure_timeout_s``). Chunks
        already admitted stay admitted.
        """
        encoded = [codec.encode(exp) for exp in experiences]
        timeout_s = self._config.backpressure_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        ids: list[str] = []
        size = self._config.max_pending
        for start in range(0, len(encoded), size):
            ids += self._admit_chunk(encoded[start : start + size], deadline)
        return ids

    def waiting(self) -> int:
        """Experiences waiting untrained: not yet read, or read and not yet acknowledged."""
        return int(self._client.xlen(self._stream))

    # Consumer side.

    def read(self, current_version: int, n: int | None = None, block_ms: int | None = None) -> Batch:
        """Up to n experiences to train on (reclaimed ones first), after filtering; waits up to block_ms
        (0: do not wait) when nothing is there. Train on ``batch.deliveries``, then ``ack`` them."""
        n = self._config.read_count if n is None else n
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        block_ms = self._config.block_ms if block_ms is None else block_ms
        try:
            self._maybe_prune()
            entries = self._reclaim(n)
            reclaimed = len(entries)
            if len(entries) < n:
                entries += self._read_new(n - len(entries), block_ms if not entries else 0)
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # The stream key was deleted (and its group with it): start again, empty.
            log.warning("consumer group %s is gone (stream deleted?); recreating it", self._config.group)
            self._ensure_group()
            return Batch()
        return self._filter(entries, current_version, reclaimed)

    def ack(self, deliveries: Batch | Sequence[Delivery]) -> AckResult:
        """Record the experiences as trained and acknowledge their entries, atomically."""
        items = deliveries.deliveries if isinstance(deliveries, Batch) else deliveries
        if not items:
            return AckResult(trained=0, duplicates=0)
        args: list[bytes | str | int] = [self._config.group, self._config.trained_retention_s * 1000]
        for d in items:
            args += [d.entry_id, d.experience.id]
        fresh, dup = self._ack(keys=[self._stream, self._keys.trained(), self._keys.counters()], args=args)
        if dup:
            log.warning("%d acknowledged experiences had already been trained by another consumer", dup)
        return AckResult(trained=int(fresh), duplicates=int(dup))

    def quarantined(self, count: int = 100) -> list[QuarantinedEntry]:
        """The most recent quarantined entries, newest first."""
        out = []
        for entry_id, fields in as_entries(self._client.xrevrange(self._keys.quarantine(), count=count)):
            original = {k: v for k, v in fields.items() if not k.startswith(b"q:")}
            out.append(
                QuarantinedEntry(
                    id=entry_id.decode(),
                    source_id=fields[b"q:source"].decode(),
                    reason=QuarantineReason(fields[b"q:reason"].decode()),
                    detail=fields[b"q:detail"].decode(),
                    fields=original,
                )
            )
        return out

    # Internals.

    def _ensure_group(self) -> None:
        try:
            self._client.xgroup_create(self._stream, self._config.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _admit_chunk(self, chunk: list[dict[bytes, bytes]], deadline: float) -> list[str]:
        delay_s = 0.002
        while (waiting := self.waiting()) + len(chunk) > self._config.max_pending:
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                raise BackpressureTimeoutError(
                    f"{waiting} experiences are waiting untrained in {self._stream} (max_pending="
                    f"{self._config.max_pending}); no room for {len(chunk)} more before the timeout. "
                    "Is the trainer consuming? If it is just slow, raise stream.max_pending or "
                    "stream.backpressure_timeout_s."
                )
            time.sleep(min(delay_s, remaining_s))
            delay_s = min(delay_s * 2, 0.05)
        pipe = self._client.pipeline(transaction=True)
        for fields in chunk:
            pipe.xadd(self._stream, fields)  # type: ignore[arg-type]
        pipe.hincrby(self._keys.counters(), STREAM_ADDED, len(chunk))
        return [as_text(entry_id) for entry_id in pipe.execute()[:-1]]

    def _reclaim(self, n: int) -> list[tuple[bytes, _Fields, int]]:
        """Take over entries idle longer than reclaim_idle_ms, with their delivery counts."""
        reply = self._client.xautoclaim(
            self._stream,
            self._config.group,
            self.consumer,
            min_idle_time=self._config.reclaim_idle_ms,
            start_id=self._reclaim_cursor,
            count=n,
        )
        self._reclaim_cursor = as_bytes(reply[0])
        claimed = as_entries(reply[1])
        if not claimed:
            return []
        pipe = self._client.pipeline(transaction=False)
        for entry_id, _ in claimed:
            pipe.xpending_range(self._stream, self._config.group, min=entry_id, max=entry_id, count=1)
        counts = [rows[0]["times_delivered"] if rows else 1 for rows in pipe.execute()]
        log.info("reclaimed %d experiences from idle consumers", len(claimed))
        return [(entry_id, fields, int(c)) for (entry_id, fields), c in zip(claimed, counts, strict=True)]

    def _read_new(self, n: int, block_ms: int) -> list[tuple[bytes, _Fields, int]]:
        streams: dict[KeyT, StreamIdT] = {self._stream: ">"}
        reply = self._client.xreadgroup(
            self._config.group, self.consumer, streams, count=n, block=block_ms or None
        )
        return [(entry_id, fields, 1) for entry_id, fields in first_stream_entries(reply)]

    def _filter(
        self, entries: list[tuple[bytes, _Fields, int]], current_version: int, reclaimed: int
    ) -> Batch:
        drops = _Drops()
        candidates: list[Delivery] = []
        oldest_version = current_version - self._config.max_staleness
        for entry_id, fields, deliveries in entries:
            if deliveries > self._config.max_deliveries:
                detail = f"delivered {deliveries} times (max_deliveries={self._config.max_deliveries})"
                drops.quarantine.append(
                    (entry_id, fields, deliveries, QuarantineReason.MAX_DELIVERIES, detail)
                )
                continue
            try:
                exp = codec.decode(fields)
            except codec.MalformedEntryError as exc:
                drops.quarantine.append(
                    (entry_id, fields, deliveries, QuarantineReason.MALFORMED, exc.reason)
                )
                continue
            if exp.policy_version < oldest_version:
                drops.stale.append(entry_id)
            else:
                candidates.append(Delivery(entry_id, exp, deliveries))
        kept = self._skip_trained(candidates, drops)
        self._settle(drops, reclaimed)
        return Batch(
            deliveries=kept,
            reclaimed=reclaimed,
            stale=len(drops.stale),
            duplicates=len(drops.duplicates),
            quarantined=len(drops.quarantine),
        )

    def _skip_trained(self, candidates: list[Delivery], drops: _Drops) -> list[Delivery]:
        if not candidates:
            return []
        scores = self._client.zmscore(self._keys.trained(), [d.experience.id for d in candidates])
        kept: list[Delivery] = []
        seen: set[str] = set()
        for d, score in zip(candidates, scores, strict=True):
            if score is not None or d.experience.id in seen:
                drops.duplicates.append(d.entry_id)
            else:
                seen.add(d.experience.id)
                kept.append(d)
        return kept

    def _settle(self, drops: _Drops, reclaimed: int) -> None:
        """Quarantine, acknowledge and delete the dropped entries, and count them, in one transaction."""
        dropped = [*drops.stale, *drops.duplicates, *(q[0] for q in drops.quarantine)]
        if not dropped and not reclaimed:
            return
        pipe = self._client.pipeline(transaction=True)
        for entry_id, fields, deliveries, reason, detail in drops.quarantine:
            record: dict[FieldT, EncodableT] = {name: value for name, value in fields.items()}
            record |= {
                b"q:source": entry_id,
                b"q:reason": reason.value,
                b"q:detail": detail,
                b"q:deliveries": deliveries,
            }
            pipe.xadd(
                self._keys.quarantine(), record, maxlen=self._config.quarantine_maxlen, approximate=True
            )
            pipe.hincrby(self._keys.counters(), quarantined(reason), 1)
            log.warning("quarantined stream entry %s: %s: %s", entry_id.decode(), reason.value, detail)
        if dropped:
            pipe.xack(self._stream, self._config.group, *dropped)
            pipe.xdel(self._stream, *dropped)
        counts: Mapping[str, int] = {
            STREAM_STALE: len(drops.stale),
            STREAM_DUPLICATES: len(drops.duplicates),
            STREAM_RECLAIMED: reclaimed,
        }
        for name, count in counts.items():
            if count:
                pipe.hincrby(self._keys.counters(), name, count)
        pipe.execute()

    def _maybe_prune(self) -> None:
        """Forget consumers that hold nothing and have been idle long (one is left per dead process)."""
        if time.monotonic() - self._last_prune < _PRUNE_EVERY_S:
            return
        self._last_prune = time.monotonic()
        args: list[EncodableT] = [self._config.group, self.consumer, self._config.reclaim_idle_ms]
        self._prune(keys=[self._stream], args=args)
