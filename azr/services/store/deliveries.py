"""What the experience stream hands out and the errors it raises: deliveries to train on, ack results,
admission results, quarantined entries."""

from __future__ import annotations

from dataclasses import dataclass, field

from azr.core.experience import Experience
from azr.services.store.metrics import QuarantineReason


class BackpressureTimeoutError(TimeoutError):
    """A producer waited ``backpressure_timeout_s`` for room in the stream and found none."""


class LeaseLostError(RuntimeError):
    """Some experiences of a batch are no longer leased to this consumer (its lease lapsed and another
    consumer reclaimed them, or Redis lost them). The step trained on the batch must not be applied or
    published: skip it, or restore the weights from before it. Nothing of the batch was acknowledged."""

    def __init__(self, lost: list[bytes], held: int) -> None:
        shown = ", ".join(entry.decode() for entry in lost[:5])
        super().__init__(
            f"{len(lost)} of {held} experiences of the batch are no longer leased to this consumer "
            f"(e.g. {shown}); do not apply the step trained on it. If this happens without a crash, "
            "renew the lease more often (ExperienceStream.keep_alive) or raise stream.reclaim_idle_ms"
        )
        self.lost = lost


@dataclass(frozen=True, slots=True)
class Delivery:
    entry_id: bytes
    """Stream entry id; what ``ack`` acknowledges."""
    experience: Experience
    deliveries: int
    """Times this entry has been delivered (1 on first delivery, more after reclaims)."""


@dataclass(frozen=True, slots=True)
class DeliveryBatch:
    """What one ``read`` returns: experiences to train on (leased to this consumer until acknowledged),
    and what it filtered out."""

    deliveries: list[Delivery] = field(default_factory=list)
    reclaimed: int = 0
    """Entries taken over from consumers whose lease lapsed (a batch of them comes alone, see read)."""
    recovered: int = 0
    """Entries this consumer had been delivered by a read whose reply was lost, delivered now."""
    stale: int = 0
    duplicates: int = 0
    """Entries skipped because their experience is already trained or in flight elsewhere."""
    quarantined: int = 0

    @property
    def experiences(self) -> list[Experience]:
        return [d.experience for d in self.deliveries]

    @property
    def entry_ids(self) -> list[bytes]:
        return [d.entry_id for d in self.deliveries]

    def __len__(self) -> int:
        return len(self.deliveries)


@dataclass(frozen=True, slots=True)
class AckResult:
    trained: int
    """Experiences recorded as trained by this ack."""
    duplicates: int
    """Experiences that were already recorded as trained (a copy trained earlier)."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """What one ``add`` did."""

    added: int
    """Experiences written to the stream."""
    duplicates: int
    """Experiences whose id had been admitted before (a producer's retry): not written again."""


@dataclass(frozen=True, slots=True)
class QuarantinedEntry:
    id: str
    source_id: str
    """Id the entry had in the experience stream."""
    reason: QuarantineReason
    detail: str
    fields: dict[bytes, bytes]
    """The original fields, as they were (values cut at ``quarantine_max_entry_bytes``)."""
    truncated: bool = False
