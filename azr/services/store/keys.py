"""The one place that names Redis keys. Every key the services write lives under ``{prefix}:``."""

from __future__ import annotations

from dataclasses import dataclass

from azr.core.task import TaskType


@dataclass(frozen=True, slots=True)
class Keys:
    """Key names under one prefix (``RedisConfig.prefix``)."""

    prefix: str

    def __post_init__(self) -> None:
        if not self.prefix or ":" in self.prefix or "*" in self.prefix:
            raise ValueError(f"key prefix must be non-empty without ':' or '*', got {self.prefix!r}")

    def pattern(self) -> str:
        """Glob matching every key under the prefix (for SCAN)."""
        return f"{self.prefix}:*"

    # Task buffers: order (zset member -> insertion sequence), tasks (hash member -> task JSON),
    # meta (hash: sequence counter, per-origin counts, lifetime counters, seed marker).
    def buffer_order(self, task_type: TaskType) -> str:
        return f"{self.prefix}:buffer:{task_type.value}:order"

    def buffer_tasks(self, task_type: TaskType) -> str:
        return f"{self.prefix}:buffer:{task_type.value}:tasks"

    def buffer_meta(self, task_type: TaskType) -> str:
        return f"{self.prefix}:buffer:{task_type.value}:meta"

    # Experience stream.
    def experiences(self) -> str:
        return f"{self.prefix}:experiences"

    def trained(self) -> str:
        """Sorted set: ids of trained experiences, scored by the time (ms) they were acknowledged."""
        return f"{self.prefix}:experiences:trained"

    def admitted(self) -> str:
        """Sorted set: ids of experiences written to the stream, scored by the time (ms) they were added."""
        return f"{self.prefix}:experiences:admitted"

    def inflight(self) -> str:
        """Hash: experience id -> entry id of the copy delivered and not yet acknowledged or dropped."""
        return f"{self.prefix}:experiences:inflight"

    def held(self) -> str:
        """Hash: entry id -> size of the batch it failed in, kept for entries of failed batches only (to
        bisect them)."""
        return f"{self.prefix}:experiences:held"

    def strikes(self) -> str:
        """Hash: entry id -> failures of its consumer while it was delivered alone."""
        return f"{self.prefix}:experiences:strikes"

    def acks(self) -> str:
        """Hash: consumer -> token and result of its last ack (so a retried ack is answered, not redone)."""
        return f"{self.prefix}:experiences:acks"

    def stream_bookkeeping(self) -> list[str]:
        """Keys that describe entries of the stream; they go when the stream goes."""
        return [self.inflight(), self.held(), self.strikes(), self.acks()]

    def quarantine(self) -> str:
        return f"{self.prefix}:experiences:quarantine"

    # Metrics and run state.
    def metrics(self) -> str:
        return f"{self.prefix}:metrics"

    def counters(self) -> str:
        return f"{self.prefix}:counters"

    def run(self) -> str:
        return f"{self.prefix}:run"
