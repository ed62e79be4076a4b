"""Request limits: the 413 body of the size cap, and a token bucket per client on seed submission."""

from __future__ import annotations

import json
import math
import time
from collections import OrderedDict
from http import HTTPStatus

from azr.services.api.problems import PROBLEM_JSON

MAX_CLIENTS_TRACKED = 10_000


def too_large_problem(max_bytes: int) -> tuple[bytes, bytes]:
    """The API's 413 (for ``azr.services.body_limit.BodySizeLimit``): an ``application/problem+json``."""
    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    problem = {
        "type": "about:blank",
        "title": status.phrase,
        "status": status.value,
        "detail": f"request body larger than {max_bytes} bytes",
    }
    return PROBLEM_JSON.encode(), json.dumps(problem).encode()


class RateLimiter:
    """A token bucket per client: ``rate_per_s`` tokens a second, at most ``burst`` saved up."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self._rate_per_s = rate_per_s
        self._burst = burst
        # client -> (tokens, time of last update); least recently seen first, so the oldest go first.
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, client: str, tokens: int) -> float:
        """Take ``tokens`` for ``client``: 0 when granted, else the seconds to wait before retrying."""
        now = time.monotonic()
        saved, then = self._buckets.pop(client, (float(self._burst), now))
        saved = min(float(self._burst), saved + (now - then) * self._rate_per_s)
        if saved >= tokens:
            self._buckets[client] = (saved - tokens, now)
            wait_s = 0.0
        else:
            self._buckets[client] = (saved, now)
            wait_s = (tokens - saved) / self._rate_per_s
        while len(self._buckets) > MAX_CLIENTS_TRACKED:
            self._buckets.popitem(last=False)
        return wait_s

    @staticmethod
    def retry_after(wait_s: float) -> str:
        return str(max(1, math.ceil(wait_s)))
