"""Background renewal of a batch's lease while the learner trains on it (see ``experience_stream``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import redis

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Calls ``renew`` every ``every_s`` seconds on a daemon thread until the block exits. ``renew`` returns
    the entries no longer leased; once any are, renewing stops (``lost`` says so) and the learner's next
    ``renew``/``ack`` raises. Redis errors are logged and retried at the next tick: a short outage must
    not end the renewals."""

    def __init__(self, renew: Callable[[], Any], every_s: float) -> None:
        self._renew = renew
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
        self.lost = False
        self.renewals = 0

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                lost = self._renew()
            except redis.RedisError as exc:
                log.warning("could not renew a lease (will retry): %s", exc)
                continue
            self.renewals += 1
            if lost:
                log.warning("%d experiences of the batch in training are no longer leased", len(lost))
                self.lost = True
                return
