"""Configuration of the services: one pydantic model per component, every field documented and range-checked.

Cross-field invariants are checked in ``model_validator``s whose messages say which setting to change.
Models are frozen: a configuration is read once at start-up and passed down, never mutated.
"""

from __future__ import annotations

from typing import Self

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
        default=30.0,
        gt=0,
        le=3600,
        description="Socket timeout of a Redis command, in seconds; must exceed the stream's block time.",
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
    reclaim_idle_ms: int = Field(
        default=300_000,
        ge=1,
        le=86_400_000,
        description="A delivered, unacknowledged experience idle this long (its consumer is presumed "
        "dead) is reclaimed by another consumer, in ms. Must exceed the longest training step.",
    )
    max_deliveries: int = Field(
        default=5,
        ge=1,
        le=1_000,
        description="An entry delivered more often than this (it keeps killing its consumer) is "
        "moved to the quarantine stream instead of being delivered again.",
    )
    quarantine_maxlen: int = Field(
        default=10_000,
        ge=1,
        le=10_000_000,
        description="Approximate cap on the quarantine stream (oldest quarantined entries are trimmed).",
    )
    trained_retention_s: int = Field(
        default=86_400,
        ge=60,
        le=30 * 86_400,
        description="How long the id of a trained experience is remembered to skip redeliveries, in s.",
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
        if self.trained_retention_s * 1000 <= self.reclaim_idle_ms:
            raise ValueError(
                "stream.trained_retention_s must exceed stream.reclaim_idle_ms, or a redelivered "
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
