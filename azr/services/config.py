"""Configuration of the services: one pydantic model per component, every field documented and range-checked.

Cross-field invariants are checked in ``model_validator``s whose messages say which setting to change.
Models are frozen: a configuration is read once at start-up and passed down, never mutated.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RedisConfig(_Section):
    """Where the shared state lives (task buffers, experience stream, metrics, run state)."""

    url: str = Field(
        default="redis://127.0.0.1:6379/0",
        pattern=r"^(redis|rediss|unix)://",
        description="Redis connection URL (redis://, rediss:// or unix://).",
    )
    prefix: str = Field(
        default="azr",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="Namespace of every key written: keys are '{prefix}:...'. Use one prefix per run family.",
    )
    socket_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="Socket timeout of one Redis command, in seconds: how long a hung Redis can stall one "
        "attempt. Must exceed the stream's block time.",
    )
    connect_timeout_s: float = Field(
        default=2.0, gt=0, le=600, description="Timeout of opening a connection to Redis, in seconds."
    )
    retry_deadline_s: float = Field(
        default=15.0,
        ge=0,
        le=3600,
        description="A command that fails with a connection error, a timeout or LOADING (Redis reloading "
        "its data) is retried with exponential backoff until this long after its first attempt, in s; "
        "0 disables retries. Every store operation is safe to retry.",
    )
    persistence: Literal["refuse", "warn", "ignore"] = Field(
        default="warn",
        description="What to do at start when Redis does not persist with an append-only file "
        "(appendonly yes) or may evict keys (maxmemory-policy other than noeviction): refuse to start, "
        "log a warning, or say nothing. Without AOF a Redis restart loses confirmed experiences and "
        "resets the run.",
    )


class BufferConfig(_Section):
    """The per-type task buffers the proposer samples references from and the solver samples tasks from."""

    capacity: int = Field(
        default=16_384,
        ge=1,
        le=10_000_000,
        description="Tasks kept per task type; at the cap the oldest task is evicted to admit a new one.",
    )
    dedup: bool = Field(
        default=True,
        description="Drop a task whose content hash (Task.id) is already in the buffer. Off keeps copies.",
    )
    max_task_bytes: int = Field(
        default=1 << 20,
        ge=1024,
        le=64 << 20,
        description="Largest task admitted, in bytes of its JSON; larger tasks are refused and counted "
        "(a task of hundreds of MB stalls Redis for seconds).",
    )


class StreamConfig(_Section):
    """The experience stream from the rollout workers to the trainer."""

    group: str = Field(
        default="trainer",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="Name of the consumer group the trainer processes read in.",
    )
    read_count: int = Field(
        default=256, ge=1, le=65_536, description="Most experiences one read returns (XREADGROUP COUNT)."
    )
    block_ms: int = Field(
        default=1_000,
        ge=0,
        le=60_000,
        description="How long a read waits for new experiences before returning what it has, in ms.",
    )
    max_staleness: int = Field(
        default=1,
        ge=0,
        le=1_000_000,
        description="Oldest policy version trained on is current - max_staleness; older experiences are "
        "dropped and counted. 0 trains only on the current policy.",
    )
    max_pending: int = Field(
        default=8_192,
        ge=1,
        le=10_000_000,
        description="Backpressure: a producer waits while adding its chunk would leave more than this "
        "many experiences waiting untrained (unread or not yet acknowledged).",
    )
    backpressure_timeout_s: float = Field(
        default=600.0,
        gt=0,
        le=86_400,
        description="How long a producer waits for room before failing with BackpressureTimeout, in s.",
    )
    max_pending_bytes: int = Field(
        default=1 << 30,
        ge=1 << 20,
        le=1 << 40,
        description="Backpressure by size: a producer also waits while adding its chunk would leave more "
        "than this many payload bytes waiting untrained. An experience larger than this is refused.",
    )
    reclaim_idle_ms: int = Field(
        default=60_000,
        ge=1,
        le=86_400_000,
        description="The lease of a delivered experience, in ms: its consumer renews it while it trains "
        "(ExperienceStream.renew); once it has gone this long unrenewed (the consumer died, hung or lost "
        "Redis) another consumer reclaims it, and the first one's ack is refused (LeaseLostError).",
    )
    max_failures: int = Field(
        default=3,
        ge=1,
        le=1_000,
        description="An entry is quarantined once its consumer failed (died, or let its lease lapse) "
        "this many times while the entry was delivered alone. Entries of a failed batch come back in "
        "halves until a failure can be blamed on one entry, so healthy batch-mates are never blamed.",
    )
    quarantine_maxlen: int = Field(
        default=10_000,
        ge=1,
        le=10_000_000,
        description="Approximate cap on the quarantine stream (oldest quarantined entries are trimmed).",
    )
    quarantine_max_entry_bytes: int = Field(
        default=64 << 10,
        ge=256,
        le=64 << 20,
        description="Bytes of a quarantined entry's payload kept for inspection; the rest is cut off.",
    )
    ledger_retention_s: int = Field(
        default=3_600,
        ge=60,
        le=30 * 86_400,
        description="How long the ids of admitted and of trained experiences are remembered, in s: a "
        "producer's retry or a redelivery within this window is recognised and skipped.",
    )
    ledger_max_ids: int = Field(
        default=1_000_000,
        ge=1_000,
        le=100_000_000,
        description="Most ids each ledger (admitted, trained) keeps, whatever the rate; the oldest go "
        "first. About 100 bytes of Redis memory per id.",
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.max_pending < self.read_count:
            raise ValueError(
                f"stream.max_pending ({self.max_pending}) is below stream.read_count ({self.read_count}): "
                "producers would stall before a full batch could be read; raise max_pending"
            )
        if self.reclaim_idle_ms <= self.block_ms:
            raise ValueError(
                f"stream.reclaim_idle_ms ({self.reclaim_idle_ms}) must exceed stream.block_ms "
                f"({self.block_ms}), or live consumers would have their entries taken from them"
            )
        if self.ledger_retention_s * 1000 <= self.reclaim_idle_ms:
            raise ValueError(
                "stream.ledger_retention_s must exceed stream.reclaim_idle_ms, or a redelivered "
                "experience could be forgotten before it is skipped"
            )
        return self


class MetricsConfig(_Section):
    """The metrics stream (per-step metric records) read by the API and the dashboard."""

    maxlen: int = Field(
        default=100_000,
        ge=1,
        le=10_000_000,
        description="Approximate cap on the metrics stream; the oldest records are trimmed beyond it.",
    )
