"""Logging of quarantined stream entries that counts and samples instead of writing a line per entry."""

from __future__ import annotations

import logging
import time
from collections import Counter

from azr.services.store.metrics import QuarantineReason

_REPORT_EVERY_S = 60.0


class QuarantineLog:
    """The first quarantined entry is logged at once; after that one summary line per ``every_s`` at
    most, with the counts per reason since the last line and one example. Exact counts are in the
    counters hash and the entries themselves in the quarantine stream."""

    def __init__(self, logger: logging.Logger, every_s: float = _REPORT_EVERY_S) -> None:
        self._log = logger
        self._every_s = every_s
        self._last_report = -float("inf")
        self._pending: Counter[QuarantineReason] = Counter()
        self._example = ""

    def record(self, entry_id: bytes, reason: QuarantineReason, detail: str) -> None:
        self._pending[reason] += 1
        self._example = f"{entry_id.decode()}: {reason.value}: {detail[:200]}"
        now = time.monotonic()
        if now - self._last_report < self._every_s:
            return
        counts = ", ".join(f"{r.value} {c}" for r, c in sorted(self._pending.items()))
        self._log.warning(
            "quarantined %d stream entries (%s) since the last report; e.g. %s",
            sum(self._pending.values()),
            counts,
            self._example,
        )
        self._pending.clear()
        self._last_report = now
