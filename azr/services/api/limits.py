"""Request limits: a cap on body size, and a token bucket per client on seed submission."""

from __future__ import annotations

import json
import math
import time
from collections import OrderedDict
from http import HTTPStatus

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from azr.services.api.problems import PROBLEM_JSON

MAX_CLIENTS_TRACKED = 10_000


class BodySizeLimit:
    """ASGI middleware: a body over ``max_bytes`` gets 413 before it is parsed, declared or chunked."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self._app = app
        self._max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self._max_bytes):
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client left; let the application see it
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self._app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
        problem = {
            "type": "about:blank",
            "title": status.phrase,
            "status": status.value,
            "detail": f"request body larger than {self._max_bytes} bytes",
        }
        body = json.dumps(problem).encode()
        headers = [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status.value, "headers": headers})
        await send({"type": "http.response.body", "body": body})


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
