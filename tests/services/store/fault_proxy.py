"""A TCP proxy on loopback between a Redis client and server that can lose a reply on purpose.

``drop_reply_to(pattern)`` arms it: the next request containing ``pattern`` reaches Redis (and is
applied), but when Redis's reply comes back the proxy closes that connection instead of forwarding it,
which is what a client sees when the network fails after the server did the work.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self


class FaultProxy:
    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pattern: bytes | None = None
        self.dropped = 0
        self._sockets: list[socket.socket] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def drop_reply_to(self, pattern: bytes) -> None:
        with self._lock:
            self._pattern = pattern

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closed.set()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            self._sockets += [client, server]
            doomed = threading.Event()  # set when this connection's next reply must be lost
            threading.Thread(target=self._requests, args=(client, server, doomed), daemon=True).start()
            threading.Thread(target=self._replies, args=(server, client, doomed), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket, doomed: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(1 << 16):
                with self._lock:
                    if self._pattern is not None and self._pattern in data:
                        self._pattern = None
                        doomed.set()
                server.sendall(data)
        _close(client, server)

    def _replies(self, server: socket.socket, client: socket.socket, doomed: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := server.recv(1 << 16):
                if doomed.is_set():
                    self.dropped += 1
                    break
                client.sendall(data)
        _close(client, server)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()
