"""Curriculum statistics, followed incrementally from the store.

A ``Curriculum`` keeps what the dashboard shows in memory and brings it up to date with ``refresh``, which
reads only what is new since the last call: metrics records after the last stream id, tasks admitted
after each buffer's last sequence number, plus a constant number of small reads (buffer counters, run
state, proposal counters, the newest tasks). No request scans every task: ``GET /v1/stats`` serves the
JSON built by the last refresh, rebuilt only when something changed.

Departures worth knowing: the learnability distribution is over the per-step mean r_propose of each type
(the loop publishes means, not every proposal's reward); diversity counts distinct programs among the
tasks this process has seen admitted (evicted ones included), not among the tasks present now.
"""

from __future__ import annotations

import gzip
import hashlib
import math
from array import array
from collections import deque
from dataclasses import dataclass

import numpy as np
import redis

from azr.core.task import Origin, Task, TaskType
from azr.executor.errors import ErrorCode
from azr.services.api.catalog import Catalog, Use, counter_values
from azr.services.api.schemas import (
    BufferStats,
    Histogram,
    ProposalCounts,
    Stats,
    TaskOut,
    TaskUse,
    UserSeedFate,
)
from azr.services.store.buffers import BufferCounts, TaskBuffers
from azr.services.store.keys import Keys
from azr.services.store.metrics import MetricsRecord, MetricsStream, proposal_outcome
from azr.services.store.run_state import RunState

RECENT_RECORDS = 2_048
"""Newest metrics records kept for event-stream clients that resume."""
NEWEST_TASKS = 12
USER_SEEDS_SHOWN = 50
USER_SEEDS_KEPT = 2_000
_TASK_CHUNK = 2_000
_METRICS_CHUNK = 2_000
_LEARNABILITY_EDGES = [i / 10 for i in range(11)]
_ERROR_PREFIX = "executor/errors/"


@dataclass(frozen=True, slots=True)
class _SeedSeen:
    id: str
    type: TaskType
    step: int
    program: str


class Curriculum:
    """What ``GET /v1/stats`` and the event stream serve; ``refresh`` is blocking (run it in a thread)."""

    def __init__(self, client: redis.Redis, keys: Keys, series_points: int) -> None:
        self._client = client
        self._keys = keys
        self._series_points = series_points
        self._buffers = TaskBuffers(client, keys)
        self._metrics = MetricsStream(client, keys)
        self._run = RunState(client, keys)
        self._catalog = Catalog(client, keys)
        self._last_id = "0-0"
        # Columns of doubles, NaN where a record lacks the key (or held a non-finite value): numpy reads
        # them without a copy, so a rebuild over 10,000 steps costs milliseconds.
        self._steps = array("d")
        self._series: dict[str, array[float]] = {}
        self._latest: dict[str, float | None] = {}
        self._error_sums: dict[str, float] = {}
        self.recent: deque[MetricsRecord] = deque(maxlen=RECENT_RECORDS)
        self._last_seq = dict.fromkeys(TaskType, 0)
        self._programs: dict[TaskType, set[bytes]] = {t: set() for t in TaskType}
        self._seen = dict.fromkeys(TaskType, 0)
        self._user_seeds: deque[_SeedSeen] = deque(maxlen=USER_SEEDS_KEPT)
        self._fingerprint: object = None
        self.snapshot_json: bytes = b""
        self.snapshot_gzip: bytes = b""
        self.version = 0
        """Bumped whenever ``snapshot_json`` changes."""

    @property
    def latest_step(self) -> int | None:
        return int(self._steps[-1]) if self._steps else None

    def refresh(self) -> list[MetricsRecord]:
        """Read what is new in the store, rebuild the snapshot if anything changed; returns new records."""
        records = self._read_metrics()
        grew = self._read_tasks()
        counts = {t: self._buffers[t].counts() for t in TaskType}
        run_id, version = self._run.run_id(), self._run.policy_version()
        proposals = self._proposal_counts()
        fingerprint = (len(self._steps), grew, counts, run_id, version, proposals)
        if fingerprint != self._fingerprint or not self.snapshot_json:
            self._fingerprint = fingerprint
            stats = self._build(counts, run_id, version, proposals)
            self.snapshot_json = stats.model_dump_json().encode()
            # Compressed once here rather than once per request: the snapshot is read far more often
            # than it changes.
            self.snapshot_gzip = gzip.compress(self.snapshot_json, compresslevel=5)
            self.version += 1
        return records

    def _read_metrics(self) -> list[MetricsRecord]:
        fresh: list[MetricsRecord] = []
        while True:
            batch = self._metrics.since(self._last_id, count=_METRICS_CHUNK)
            for record in batch:
                self._append(record)
            fresh += batch
            if batch:
                self._last_id = batch[-1].id
            if len(batch) < _METRICS_CHUNK:
                return fresh

    def _append(self, record: MetricsRecord) -> None:
        n = len(self._steps)
        self._steps.append(float(record.step))
        for name, value in record.values.items():
            column = self._series.get(name)
            if column is None:
                column = self._series[name] = array("d", [math.nan]) * n
            column.append(math.nan if value is None else value)
            if name.startswith(_ERROR_PREFIX) and value is not None:
                code = name.removeprefix(_ERROR_PREFIX)
                self._error_sums[code] = self._error_sums.get(code, 0.0) + value
        for column in self._series.values():
            if len(column) == n:
                column.append(math.nan)  # a key this record lacks
        self._latest = record.values
        self.recent.append(record)

    def _read_tasks(self) -> int:
        """Read the tasks admitted since the last call; returns how many."""
        total = 0
        for task_type in TaskType:
            while True:
                batch = self._catalog.newer(task_type, self._last_seq[task_type], _TASK_CHUNK)
                for seq, task in batch:
                    self._last_seq[task_type] = seq
                    if task is not None:
                        self._see(task)
                total += len(batch)
                if len(batch) < _TASK_CHUNK:
                    break
        return total

    def _see(self, task: Task) -> None:
        self._seen[task.type] += 1
        self._programs[task.type].add(hashlib.blake2b(task.program.strip().encode(), digest_size=12).digest())
        if task.origin is Origin.USER:
            self._user_seeds.append(_SeedSeen(task.id, task.type, task.step, task.program))

    def _proposal_counts(self) -> tuple[tuple[int, ...], ...]:
        outcomes: list[ErrorCode | None] = [None, *ErrorCode]
        names = [proposal_outcome(t, code) for t in TaskType for code in outcomes]
        values = counter_values(self._client, self._keys, names)
        width = len(outcomes)
        return tuple(tuple(values[i * width : (i + 1) * width]) for i in range(len(TaskType)))

    def _build(
        self,
        counts: dict[TaskType, BufferCounts],
        run_id: str,
        version: int,
        proposals: tuple[tuple[int, ...], ...],
    ) -> Stats:
        series, bucket = self._downsampled()
        return Stats(
            run_id=run_id,
            policy_version=version,
            steps_seen=len(self._steps),
            latest_step=self.latest_step,
            latest=self._latest,
            series=series,
            bucket_steps=bucket,
            buffers={t: self._buffer_stats(t, counts[t]) for t in TaskType},
            proposals={
                t: ProposalCounts(
                    valid=row[0],
                    errors={code.value: n for code, n in zip(ErrorCode, row[1:], strict=True) if n},
                )
                for t, row in zip(TaskType, proposals, strict=True)
            },
            error_classes=dict(sorted(self._error_sums.items())),
            learnability={t: self._learnability(t) for t in TaskType},
            newest_tasks=self._newest(),
            user_seeds=self._seed_fates(),
        )

    def _buffer_stats(self, task_type: TaskType, counts: BufferCounts) -> BufferStats:
        distinct, seen = len(self._programs[task_type]), self._seen[task_type]
        return BufferStats(
            size=counts.size,
            by_origin=counts.by_origin,
            added=counts.added,
            evicted=counts.evicted,
            duplicates=counts.duplicates,
            distinct_programs=distinct,
            diversity=distinct / seen if seen else None,
        )

    def _downsampled(self) -> tuple[dict[str, list[float | None]], int]:
        """Every series as bucket means of at most ``series_points`` points; empty buckets are null."""
        n = len(self._steps)
        bucket = max(1, math.ceil(n / self._series_points))
        columns = {"step": self._steps, **dict(sorted(self._series.items()))}
        out: dict[str, list[float | None]] = {}
        for name, column in columns.items():
            values = np.frombuffer(column, dtype=np.float64)  # (n,)
            if bucket > 1:
                pad = (-n) % bucket
                values = np.concatenate([values, np.full(pad, math.nan)]).reshape(-1, bucket)
                present = ~np.isnan(values)
                sums = np.where(present, values, 0.0).sum(axis=1)
                kept = present.sum(axis=1)
                values = np.divide(sums, kept, out=np.full(len(kept), math.nan), where=kept > 0)
            out[name] = [None if math.isnan(v) else float(f"{v:.5g}") for v in values.tolist()]
        return out, bucket

    def _learnability(self, task_type: TaskType) -> Histogram:
        column = self._series.get(f"propose/{task_type.value}/learnability_mean", array("d"))
        values = np.frombuffer(column, dtype=np.float64)
        values = values[~np.isnan(values)]
        counts, _ = np.histogram(np.clip(values, 0.0, 1.0), bins=_LEARNABILITY_EDGES)
        return Histogram(edges=_LEARNABILITY_EDGES, counts=[int(c) for c in counts])

    def _newest(self) -> list[TaskOut]:
        tasks = [task for t in TaskType for task in self._buffers[t].newest(NEWEST_TASKS)]
        tasks.sort(key=lambda task: task.step, reverse=True)
        return [TaskOut.of(task) for task in tasks[:NEWEST_TASKS]]

    def _seed_fates(self) -> list[UserSeedFate]:
        seeds = list(self._user_seeds)[-USER_SEEDS_SHOWN:][::-1]
        present: dict[str, bool] = {}
        for task_type in TaskType:
            ids = [s.id for s in seeds if s.type is task_type]
            present.update(zip(ids, self._catalog.present(task_type, ids), strict=True))
        uses = self._catalog.use([s.id for s in seeds])
        return [
            UserSeedFate(
                id=s.id, type=s.type, step=s.step, program=s.program, in_buffer=present[s.id], use=task_use(u)
            )
            for s, u in zip(seeds, uses, strict=True)
        ]


def task_use(use: Use) -> TaskUse:
    return TaskUse(
        drawn_as_reference=use.reference,
        drawn_for_solving=use.solve,
        solve_attempts=use.solve_attempts,
        solved=use.solved,
        solve_rate=use.solved / use.solve_attempts if use.solve_attempts else None,
    )
