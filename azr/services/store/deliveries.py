"""What the experience stream hands out: deliveries to train on, ack results, quarantined entries."""

from __future__ import annotations

from dataclasses import dataclass, field

from azr.core.experience import Experience
from azr.services.store.metrics import QuarantineReason


class BackpressureTimeoutError(TimeoutError):
    """A producer waited ``backpressure_timeout_s`` for room in the stream and found none."""


@dataclass(frozen=True, slots=True)
class Delivery:
    entry_id: bytes
    """Stream entry id; what ``ack`` acknowledges."""
    experience: Experience
    deliveries: int
    """Times this entry has been delivered (1 on first delivery, more after reclaims)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """What one ``read`` returns: experiences to train on, and what it filtered out."""

    deliveries: list[Delivery] = field(default_factory=list)
    reclaimed: int = 0
    """Entries taken over from consumers idle longer than ``reclaim_idle_ms``."""
    stale: int = 0
    duplicates: int = 0
    """Entries skipped because their experience id was already trained."""
    quarantined: int = 0

    @property
    def experiences(self) -> list[Experience]:
        return [d.experience for d in self.deliveries]

    def __len__(self) -> int:
        return len(self.deliveries)


@dataclass(frozen=True, slots=True)
class AckResult:
    trained: int
    """Experiences recorded as trained by this ack."""
    duplicates: int
    """Experiences that were already recorded (another consumer acknowledged them first)."""


@dataclass(frozen=True, slots=True)
class QuarantinedEntry:
    id: str
    source_id: str
    """Id the entry had in the experience stream."""
    reason: QuarantineReason
    detail: str
    fields: dict[bytes, bytes]
    """The original fields, as they were."""
