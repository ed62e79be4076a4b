"""A cap on request bodies, enforced before anything parses them (shared by the HTTP services)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

Refusal = Callable[[int], tuple[bytes, bytes]]
"""Given the cap in bytes: the 413 response's (content type, body), in the service's own error format."""


class BodySizeLimit:
    """ASGI middleware: a body over ``max_bytes`` gets 413, whether it declares its length or not.

    A declared ``Content-Length`` above the cap is refused before a byte is read; a chunked body is read
    up to the cap and refused as soon as it passes it, so memory use per request stays bounded.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, refusal: Refusal) -> None:
        self._app = app
        self._max_bytes = max_bytes
        self._refusal = refusal

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
        content_type, body = self._refusal(self._max_bytes)
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
