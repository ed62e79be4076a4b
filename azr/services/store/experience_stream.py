"""The experience stream: rollout workers add experiences, the learner reads, trains and acknowledges.

A Redis Stream with one consumer group (``StreamConfig.group``); each learner process is a consumer with
a name of its own. The learner's order of work, and what each call guarantees::

    batch = stream.read(current_version, n, block_ms)   # leased to this consumer
    with stream.keep_alive(batch):                      # renews the lease while it trains
        loss = forward_backward(batch.experiences)
    stream.renew(batch)                                 # LeaseLostError: skip the step, nothing applied
    optimizer.step()
    stream.ack(batch)                                   # LeaseLostError: discard the step, do not publish
    publish(version + 1)

Delivery guarantee. Every experience a producer's ``add`` returned for is trained exactly once, provided
Redis persists with an AOF (``connection.check_persistence``) and the learner follows the order above:

- Producers: ``add`` is idempotent by experience id (a ledger of admitted ids, kept
  ``ledger_retention_s`` and at most ``ledger_max_ids``), so a producer may retry an add whose reply it did
  not get; the copy is not written again. (Two producers adding one id at the same instant may both
  write it; reads drop the second copy, see Copies.)
- Leases: a read leases its entries to its consumer for ``reclaim_idle_ms``; ``renew`` (or
  ``keep_alive`` in the background) extends the lease. An entry whose lease lapsed (the consumer died,
  hung, or lost Redis for that long) is reclaimed by the next read of another consumer. A consumer name
  belongs to one live process: a process that takes over a name (a restarted learner) hands what the
  name still holds to be reclaimed, as the failed batch of the process that died.
- Fencing: ``renew`` and ``ack`` check, atomically in Redis, that every entry of the batch is still leased
  to the caller; if not they raise ``LeaseLostError`` and ``ack`` records nothing. ``ack`` records the ids
  as trained, acknowledges and deletes the entries in one script. So a step is either committed by its
  ack (and never trained again), or refused (and trained by whoever holds the lease); a learner killed
  between its step and its ack takes the step with it (the weights were never published).
- One learner: no other consumer takes its entries, so a pause of any length (GC, checkpoint, a Redis
  outage) never costs it its batch: nothing is trained twice or lost, whatever the timing. Several
  learners: each experience's step is committed by exactly one of them, whatever the timing; a learner
  whose ``renew`` or ``ack`` raises must drop the step it took on that batch.
- Copies: a read drops an experience already trained or already in flight under another entry.
- Retries: every call is safe to repeat, so the client retries connection errors, timeouts and LOADING
  (``connection.connect``): a retried ``ack`` returns its first answer (a token), entries delivered by a
  read whose reply was lost are delivered by the next read (this consumer's own pending list).
- Poison: decoding one entry never fails a read; the entry is quarantined with its reason. Entries of a
  failed batch come back in halves, so a failure is finally blamed on one entry alone, which is
  quarantined after ``max_failures`` such failures; healthy batch-mates are not blamed.

Stale experiences (``policy_version < current - max_staleness``) are acknowledged, dropped and counted.
Counters live in the metrics hash (``metrics.Counters``); ``health()`` gives the gauges.

Backpressure: acknowledged entries are deleted, so the stream holds exactly the experiences waiting
untrained. ``add`` writes a chunk once the waiting count plus the chunk fits within ``max_pending`` and
the stream's memory plus the chunk within ``max_pending_bytes``; until then it waits up to
``backpressure_timeout_s`` and raises ``BackpressureTimeoutError``. The check and the write are two steps
(a script doing both would copy every payload through Lua, which doubles Redis's cost per experience),
so P producers racing for the last room can overshoot by at most P - 1 chunks.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import redis
from redis.typing import EncodableT, KeyT, StreamIdT

from azr.core.experience import Experience
from azr.services.config import StreamConfig
from azr.services.store import codec, stream_scripts
from azr.services.store.deliveries import (
    AckResult,
    Admitted,
    BackpressureTimeoutError,
    Delivery,
    DeliveryBatch,
    LeaseLostError,
    QuarantinedEntry,
)
from azr.services.store.keys import Keys
from azr.services.store.lease import LeaseKeeper
from azr.services.store.metrics import (
    STREAM_DUPLICATES,
    STREAM_READ_ERRORS,
    STREAM_RECOVERED,
    STREAM_STALE,
    QuarantineReason,
    quarantined,
)
from azr.services.store.quarantine_log import QuarantineLog
from azr.services.store.replies import as_bytes, as_entries, first_stream_entries
from azr.services.store.stream_admission import Admission
from azr.services.store.stream_health import stream_health

__all__ = [
    "AckResult",
    "Admitted",
    "BackpressureTimeoutError",
    "Delivery",
    "DeliveryBatch",
    "ExperienceStream",
    "LeaseLostError",
    "QuarantinedEntry",
]

log = logging.getLogger(__name__)

_PRUNE_EVERY_S = 60.0
_Fields = dict[bytes, bytes]


@dataclass(slots=True)
class _Entry:
    id: bytes
    fields: _Fields
    deliveries: int
    strikes: int = 0


@dataclass(slots=True)
class _Drops:
    """Entries a read acknowledges and deletes instead of returning: (entry, counter, reason, detail, exp)."""

    rows: list[tuple[bytes, str, str, str, str]] = field(default_factory=list)
    stale: int = 0
    duplicates: int = 0
    quarantined: int = 0


class ExperienceStream:
    """One producer or consumer of the stream. Not shared between threads (it remembers what it has
    handed out); make one per thread, they are cheap, the state is in Redis. ``keep_alive`` is the one
    call that works from a background thread. A consumer name belongs to one live process at a time:
    what a name holds when a new process takes it is treated as the previous process's failed batch."""

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
        self._admission = Admission(client, keys, self._config)
        self._hold = client.register_script(stream_scripts.HOLD)
        self._claim = client.register_script(stream_scripts.CLAIM)
        self._renew = client.register_script(stream_scripts.RENEW)
        self._ack = client.register_script(stream_scripts.ACK)
        self._settle = client.register_script(stream_scripts.SETTLE)
        self._prune = client.register_script(stream_scripts.PRUNE)
        self._outstanding: set[bytes] = set()
        self._last_prune = time.monotonic()
        self._next_claim_at = 0.0
        self._quarantine_log = QuarantineLog(log)
        self.read_errors = 0
        timeout_s = client.connection_pool.connection_kwargs.get("socket_timeout")
        if timeout_s is not None and timeout_s * 1000 <= self._config.block_ms:
            raise ValueError(
                f"the Redis socket timeout ({timeout_s} s) must exceed stream.block_ms "
                f"({self._config.block_ms} ms), or blocking reads time out; raise redis.socket_timeout_s"
            )
        self._ensure_group()
        self._retire_previous_process()

    # Producer side.

    def add(self, experiences: Iterable[Experience], timeout_s: float | None = None) -> Admitted:
        """Append experiences, each once (an id admitted before is skipped, so retrying is safe).

        Waits while a chunk does not fit within ``max_pending`` waiting experiences and
        ``max_pending_bytes``; raises ``BackpressureTimeoutError`` after ``timeout_s`` (default
        ``backpressure_timeout_s``). Chunks already admitted stay admitted.
        """
        return self._admission.add(experiences, timeout_s)

    def waiting(self) -> int:
        """Experiences waiting untrained: not yet read, or read and not yet acknowledged."""
        return int(self._client.xlen(self._stream))

    # Consumer side.

    def read(self, current_version: int, n: int | None = None, block_ms: int | None = None) -> DeliveryBatch:
        """Up to n experiences to train on, leased to this consumer; waits up to block_ms (0: do not
        wait) when nothing is there. Entries this consumer was delivered by a read whose reply was lost
        come first; then entries reclaimed from consumers whose lease lapsed (such a batch comes alone
        and at most half the size it failed in); then new ones."""
        n = self._config.read_count if n is None else n
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        block_ms = self._config.block_ms if block_ms is None else block_ms
        try:
            self._maybe_prune()
            recovered = self._recover(n)
            reclaimed = self._reclaim(n - len(recovered)) if len(recovered) < n else []
            entries = recovered + reclaimed
            if not reclaimed and len(entries) < n:
                entries += self._read_new(n - len(entries), block_ms if not entries else 0)
            batch = self._filter(entries, current_version, len(reclaimed), len(recovered))
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # The stream key was deleted (and its group with it): start again, empty.
            log.warning("consumer group %s is gone (stream deleted?); recreating it", self._config.group)
            self._client.delete(*self._keys.stream_bookkeeping())
            self._outstanding.clear()
            self._ensure_group()
            return DeliveryBatch()
        except redis.RedisError:
            self.read_errors += 1
            raise
        self._outstanding.update(batch.entry_ids)
        return batch

    def renew(self, batch: DeliveryBatch | Sequence[Delivery]) -> float:
        """Extend the lease of a batch; raises ``LeaseLostError`` if any of it is no longer leased to this
        consumer. Returns the seconds the lease is sure to last from now: apply the step and ack within
        them. Call it right before the optimizer step."""
        ids = _entry_ids(batch)
        if not ids:
            return self._config.reclaim_idle_ms / 1000
        began = time.monotonic()
        lost = [
            as_bytes(i)
            for i in self._renew(keys=[self._stream], args=[self._config.group, self.consumer, *ids])
        ]
        if lost:
            raise LeaseLostError(lost, len(ids))
        return self._config.reclaim_idle_ms / 1000 - (time.monotonic() - began)

    @contextmanager
    def keep_alive(self, batch: DeliveryBatch | Sequence[Delivery]) -> Iterator[LeaseKeeper]:
        """Renew the batch's lease from a background thread every third of ``reclaim_idle_ms`` while the
        block runs (a long forward/backward). A lease found lost is raised by the next ``renew``/``ack``."""
        ids = _entry_ids(batch)
        keeper = LeaseKeeper(
            lambda: self._renew(keys=[self._stream], args=[self._config.group, self.consumer, *ids]),
            every_s=self._config.reclaim_idle_ms / 3000,
        )
        with keeper:
            yield keeper

    def ack(self, batch: DeliveryBatch | Sequence[Delivery]) -> AckResult:
        """Record the experiences as trained and acknowledge their entries, atomically, if the whole batch
        is still leased to this consumer; otherwise raise ``LeaseLostError`` and record nothing."""
        items = batch.deliveries if isinstance(batch, DeliveryBatch) else list(batch)
        if not items:
            return AckResult(trained=0, duplicates=0)
        token = secrets.token_hex(8)  # makes a retried ack (its reply lost) return its first answer
        args: list[EncodableT] = [
            self._config.group,
            self.consumer,
            token,
            self._config.ledger_retention_s * 1000,
            self._config.ledger_max_ids,
        ]
        for d in items:
            args += [d.entry_id, d.experience.id]
        keys = [
            self._stream,
            self._keys.trained(),
            self._keys.counters(),
            self._keys.inflight(),
            self._keys.held(),
            self._keys.strikes(),
            self._keys.acks(),
        ]
        reply = self._ack(keys=keys, args=args)
        self._outstanding.difference_update(d.entry_id for d in items)
        if int(reply[0]) == -1:
            raise LeaseLostError([as_bytes(i) for i in reply[1:]], len(items))
        fresh, dup = int(reply[0]), int(reply[1])
        if dup:
            log.warning("%d acknowledged experiences had already been trained", dup)
        return AckResult(trained=fresh, duplicates=dup)

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
                    truncated=fields.get(b"q:cut", b"0") != b"0",
                )
            )
        return out

    def health(self) -> dict[str, float]:
        """Gauges for monitoring: pending per consumer, oldest pending age, live consumers, backlog and
        ledger sizes, Redis memory, this object's read errors (names in ``stream_health``)."""
        gauges = stream_health(self._client, self._keys, self._config)
        gauges[STREAM_READ_ERRORS] = float(self.read_errors)
        return gauges

    # Internals.

    def _ensure_group(self) -> None:
        try:
            self._client.xgroup_create(self._stream, self._config.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _recover(self, n: int) -> list[_Entry]:
        """Entries pending on this consumer that it never handed out: a read whose reply was lost."""
        out: list[_Entry] = []
        cursor: bytes | str = "0"
        while len(out) < n:
            streams: dict[KeyT, StreamIdT] = {self._stream: cursor}
            page = first_stream_entries(
                self._client.xreadgroup(self._config.group, self.consumer, streams, count=max(n, 64))
            )
            if not page:
                break
            out += [_Entry(i, f, 2) for i, f in page if i not in self._outstanding][: n - len(out)]
            cursor = page[-1][0]
        if out:
            log.info("recovered %d experiences delivered by a read whose reply was lost", len(out))
        return out

    def _reclaim(self, n: int) -> list[_Entry]:
        """Entries of a consumer whose lease lapsed. Looking costs a scan of the group's pending list,
        and a lease lapses only after ``reclaim_idle_ms``: after a look that found nothing, the next one
        waits a tenth of that."""
        if time.monotonic() < self._next_claim_at:
            return []
        keys = [self._stream, self._keys.held(), self._keys.strikes(), self._keys.counters()]
        args: list[EncodableT] = [self._config.group, self.consumer, self._config.reclaim_idle_ms, n]
        reply = self._claim(keys=keys, args=args)
        out = [
            _Entry(as_bytes(reply[i]), _pairs(reply[i + 1]), int(reply[i + 3]), strikes=int(reply[i + 2]))
            for i in range(0, len(reply), 4)
        ]
        if out:
            log.info("reclaimed %d experiences whose lease lapsed", len(out))
        else:
            self._next_claim_at = time.monotonic() + self._config.reclaim_idle_ms / 10_000
        return out

    def _read_new(self, n: int, block_ms: int) -> list[_Entry]:
        streams: dict[KeyT, StreamIdT] = {self._stream: ">"}
        reply = self._client.xreadgroup(
            self._config.group, self.consumer, streams, count=n, block=block_ms or None
        )
        return [_Entry(entry_id, fields, 1) for entry_id, fields in first_stream_entries(reply)]

    def _filter(
        self, entries: list[_Entry], current_version: int, reclaimed: int, recovered: int
    ) -> DeliveryBatch:
        drops = _Drops()
        candidates: list[Delivery] = []
        oldest_version = current_version - self._config.max_staleness
        for entry in entries:
            try:
                exp = codec.decode(entry.fields)
            except Exception as exc:  # whatever goes wrong is this entry's reason, never the read's
                reason = (
                    exc.reason
                    if isinstance(exc, codec.MalformedEntryError)
                    else f"{type(exc).__name__}: {exc}"
                )
                self._drop(drops, entry, QuarantineReason.MALFORMED, reason, "")
                continue
            if entry.strikes >= self._config.max_failures:
                detail = f"its consumer failed {entry.strikes} times while it was delivered alone"
                self._drop(drops, entry, QuarantineReason.MAX_FAILURES, detail, exp.id)
            elif exp.policy_version < oldest_version:
                drops.rows.append((entry.id, STREAM_STALE, "", "", exp.id))
                drops.stale += 1
            else:
                candidates.append(Delivery(entry.id, exp, entry.deliveries))
        kept = self._hold_candidates(candidates, drops)
        if drops.rows:
            keys = [
                self._stream,
                self._keys.quarantine(),
                self._keys.counters(),
                self._keys.inflight(),
                self._keys.held(),
                self._keys.strikes(),
            ]
            head: list[EncodableT] = [
                self._config.group,
                self._config.quarantine_maxlen,
                self._config.quarantine_max_entry_bytes,
            ]
            self._settle(keys=keys, args=[*head, *(v for row in drops.rows for v in row)])
        if recovered:
            self._client.hincrby(self._keys.counters(), STREAM_RECOVERED, recovered)
        return DeliveryBatch(
            deliveries=kept,
            reclaimed=reclaimed,
            recovered=recovered,
            stale=drops.stale,
            duplicates=drops.duplicates,
            quarantined=drops.quarantined,
        )

    def _drop(self, drops: _Drops, entry: _Entry, reason: QuarantineReason, detail: str, exp_id: str) -> None:
        drops.rows.append((entry.id, quarantined(reason), reason.value, detail, exp_id))
        drops.quarantined += 1
        self._quarantine_log.record(entry.id, reason, detail)

    def _hold_candidates(self, candidates: list[Delivery], drops: _Drops) -> list[Delivery]:
        """Mark the candidates in flight; drop those already trained or in flight under another entry
        (and a second copy within this very read)."""
        if not candidates:
            return []
        unique: list[Delivery] = []
        seen: set[str] = set()
        for d in candidates:
            if d.experience.id in seen:
                drops.rows.append((d.entry_id, STREAM_DUPLICATES, "", "", d.experience.id))
                drops.duplicates += 1
            else:
                seen.add(d.experience.id)
                unique.append(d)
        args: list[EncodableT] = []
        for d in unique:
            args += [d.entry_id, d.experience.id]
        keys = [self._stream, self._keys.trained(), self._keys.inflight()]
        flags = self._hold(keys=keys, args=args)
        kept = []
        for d, flag in zip(unique, flags, strict=True):
            if int(flag):
                kept.append(d)
            else:
                drops.rows.append((d.entry_id, STREAM_DUPLICATES, "", "", d.experience.id))
                drops.duplicates += 1
        return kept

    def _retire_previous_process(self) -> None:
        """A consumer name that holds entries at start is one whose previous process died holding them
        (a learner restarted under its fixed name): hand them over to be reclaimed as a failed batch."""
        script = self._client.register_script(stream_scripts.RETIRE)
        args: list[EncodableT] = [
            self._config.group,
            self.consumer,
            f"{self.consumer}~retired",
            self._config.reclaim_idle_ms + 1,
        ]
        retired = int(script(keys=[self._stream], args=args))
        if retired:
            log.info(
                "%d experiences held by an earlier process named %s will be reclaimed", retired, self.consumer
            )

    def _maybe_prune(self) -> None:
        """Forget consumers that hold nothing and have been idle long (one is left per dead process)."""
        if time.monotonic() - self._last_prune < _PRUNE_EVERY_S:
            return
        self._last_prune = time.monotonic()
        args: list[EncodableT] = [self._config.group, self.consumer, self._config.reclaim_idle_ms]
        self._prune(keys=[self._stream, self._keys.acks()], args=args)


def _entry_ids(batch: DeliveryBatch | Sequence[Delivery]) -> list[bytes]:
    items = batch.deliveries if isinstance(batch, DeliveryBatch) else batch
    return [d.entry_id for d in items]


def _pairs(flat: object) -> _Fields:
    """A flat [field, value, ...] list (as a script returns stream fields) as a field map."""
    if not isinstance(flat, list):
        raise TypeError(f"expected a flat field list, got {type(flat).__name__}")
    return {as_bytes(flat[i]): as_bytes(flat[i + 1]) for i in range(0, len(flat), 2)}
