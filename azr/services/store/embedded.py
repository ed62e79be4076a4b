"""A private ``redis-server`` for one run or one test, with its data and log in one directory.

``azr selfplay`` with no Redis URL starts one for the run; the store's fault tests start, kill and
restart them. The server listens on 127.0.0.1 only (a free port unless one is given), persists with an
append-only file (``appendfsync everysec``: a crash of the machine loses at most about one second of
writes, a crash of the server process loses nothing already acknowledged to the client) and never evicts
keys (``maxmemory-policy noeviction``: a full Redis refuses writes instead of silently dropping
experiences). RDB snapshots are off: the AOF is the one source of truth, so a restart cannot reload an
older snapshot and retrain or lose what came after it.

The child gets ``PR_SET_PDEATHSIG`` = SIGTERM on Linux, so a parent killed with SIGKILL does not leave
the server running: it shuts down gracefully (flushing its AOF) when the thread that started it exits.
Start it from a thread that lives as long as the run (the main thread).

    with EmbeddedRedis(run_dir / "redis") as server:
        client = connect(RedisConfig(url=server.url))
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import redis

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None
_LOG_NAME = "redis.log"
_LOG_TAIL_BYTES = 2_000


class EmbeddedRedisError(RuntimeError):
    """The private Redis could not be started (not installed, port taken, bad data directory)."""


class EmbeddedRedis:
    """One ``redis-server`` child process. ``start`` returns its URL; ``stop`` shuts it down gracefully;
    ``kill`` SIGKILLs it (for fault tests); ``restart`` starts it again on the same directory and port,
    so it reloads its AOF."""

    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        appendonly: bool = True,
        executable: str = "redis-server",
        start_timeout_s: float = 30.0,
        stop_timeout_s: float = 30.0,
    ) -> None:
        self.directory = Path(directory)
        self.appendonly = appendonly
        self._port = port
        self._executable = executable
        self._start_timeout_s = start_timeout_s
        self._stop_timeout_s = stop_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the embedded Redis has no port before start()")
        return self._port

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.directory / _LOG_NAME

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> str:
        """Start the server and wait until it answers PING (its AOF loaded); returns its URL."""
        if self.running():
            return self.url
        binary = shutil.which(self._executable)
        if binary is None:
            raise EmbeddedRedisError(
                f"{self._executable!r} is not installed, so no private Redis can be started; install "
                "the redis-server package, or point redis.url at a running Redis"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._port is None:
            self._port = _free_port()
        self._proc = subprocess.Popen(
            [binary, *self._arguments()],
            cwd=self.directory,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # One prctl call through a function resolved before the fork: nothing in the child takes a
            # lock another thread could hold, which is what makes preexec_fn unsafe in general.
            preexec_fn=_die_with_parent if _PRCTL is not None else None,  # noqa: PLW1509
        )
        try:
            self._wait_ready()
        except BaseException:
            self.kill()
            raise
        log.info("embedded Redis (pid %d) serving %s from %s", self._proc.pid, self.url, self.directory)
        return self.url

    def stop(self) -> None:
        """Shut down gracefully (SIGTERM: Redis fsyncs its AOF and exits), wait and reap; SIGKILL if it
        does not exit within ``stop_timeout_s``."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=self._stop_timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("embedded Redis (pid %d) ignored SIGTERM; killing it", proc.pid)
                proc.kill()
                proc.wait()
        self._proc = None

    def kill(self) -> None:
        """SIGKILL the server and reap it: what it had not yet written to its AOF is lost."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        self._proc = None

    def restart(self) -> str:
        """Start again on the same directory and port (stopping it first if it runs): the AOF reloads."""
        self.stop()
        return self.start()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _arguments(self) -> list[str]:
        return [
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.directory),
            "--logfile",
            _LOG_NAME,
            "--daemonize",
            "no",
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "everysec",
            "--maxmemory-policy",
            "noeviction",
        ]

    def _wait_ready(self) -> None:
        assert self._proc is not None
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1.0, socket_connect_timeout=1.0)
        deadline = time.monotonic() + self._start_timeout_s
        delay_s = 0.01
        try:
            while True:
                if self._proc.poll() is not None:
                    raise EmbeddedRedisError(
                        f"redis-server exited with status {self._proc.returncode} at start; the end of "
                        f"its log ({self.log_path}):\n{self._log_tail()}"
                    )
                # LOADING (AOF replay) is a ResponseError subclass, a port not yet bound a ConnectionError.
                # The pid check makes sure the answer is ours, not another server's on a port taken since.
                with contextlib.suppress(redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                    info: dict[str, object] = client.info("server")
                    if info.get("process_id") == self._proc.pid:
                        return
                if time.monotonic() > deadline:
                    raise EmbeddedRedisError(
                        f"redis-server did not answer PING within {self._start_timeout_s} s; the end of "
                        f"its log ({self.log_path}):\n{self._log_tail()}"
                    )
                time.sleep(delay_s)
                delay_s = min(delay_s * 2, 0.2)
        finally:
            client.close()

    def _log_tail(self) -> str:
        try:
            with self.log_path.open("rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - _LOG_TAIL_BYTES))
                return f.read().decode(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"


def _free_port() -> int:
    """A port free on 127.0.0.1 now (the kernel picks it); the server binds it a moment later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: ask the kernel to SIGTERM it when its parent thread dies.
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)
