"""A real executor service in a subprocess (uvicorn on 127.0.0.1, a free port), stopped after use."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
TOKEN = "test-token-9c1e"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServiceProcess:
    """``uvicorn azr.services.executor_service.app:create_app`` with settings from the environment."""

    def __init__(self, port: int, **settings: object) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._env = {**os.environ, **{f"AZR_EXECUTOR_{k.upper()}": str(v) for k, v in settings.items()}}
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> ServiceProcess:
        command = [
            sys.executable, "-m", "uvicorn", "azr.services.executor_service.app:create_app", "--factory",
            "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
        ]  # fmt: skip
        self._process = subprocess.Popen(command, cwd=REPO, env=self._env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the service exited with {self._process.returncode} while starting")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the service did not become healthy within {timeout_s} s")

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(sig)
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    """One service with a token, shared by the tests that do not stop or overload it."""
    process = ServiceProcess(free_port(), token=TOKEN, max_batch_jobs=64, max_body_bytes=256 * 1024).start()
    try:
        yield process
    finally:
        process.stop()
