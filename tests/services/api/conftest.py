"""Fixtures for the API tests: a real Redis under a fresh key prefix, the app over a real executor pool
(in process, through Starlette's test client), and ``azr api`` as a real server process."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from fastapi.testclient import TestClient

from azr.services.api.app import create_app
from azr.services.api.settings import ApiSettings
from azr.services.config import RedisConfig
from azr.services.store import connect
from azr.services.store.keys import Keys

REPO = Path(__file__).resolve().parents[3]
REDIS_URL = os.environ.get("AZR_TEST_REDIS_URL", RedisConfig().url)
TOKEN = "api-test-token-5d2f"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def keys() -> Iterator[Keys]:
    k = Keys(f"azr-apitest-{secrets.token_hex(6)}")
    yield k
    client = redis.Redis.from_url(REDIS_URL)
    doomed = list(client.scan_iter(match=k.pattern(), count=1000))
    if doomed:
        client.delete(*doomed)
    client.close()


@pytest.fixture
def store(keys: Keys) -> Iterator[redis.Redis]:
    try:
        client = connect(RedisConfig(url=REDIS_URL, prefix=keys.prefix))
    except redis.ConnectionError as exc:
        pytest.fail(f"these tests need a Redis server at {REDIS_URL} (run scripts/host-setup.sh): {exc}")
    yield client
    client.close()


def settings_for(keys: Keys, **overrides: object) -> ApiSettings:
    base: dict[str, object] = {
        "redis_url": REDIS_URL,
        "redis_prefix": keys.prefix,
        "token": TOKEN,
        "refresh_s": 0.1,
        "executor_timeout_s": 1.0,
        # The API's tests judge the API, not the sandbox's isolation (tests/executor does that).
        "executor_allow_unisolated": True,
    }
    return ApiSettings.model_validate({**base, **overrides})


@pytest.fixture
def api(keys: Keys, store: redis.Redis) -> Iterator[TestClient]:
    with TestClient(create_app(settings_for(keys))) as client:
        yield client


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ApiProcess:
    """``azr api`` in a subprocess on 127.0.0.1 and a free port; settings through the environment."""

    def __init__(self, keys: Keys, **settings: object) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {"REDIS_URL": REDIS_URL, "REDIS_PREFIX": keys.prefix, "TOKEN": TOKEN, "REFRESH_S": 0.2}
        env |= {"EXECUTOR_ALLOW_UNISOLATED": "true", "EXECUTOR_TIMEOUT_S": 1.0}
        env |= {k.upper(): v for k, v in settings.items()}
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("AZR_API_")}
        self._env |= {f"AZR_API_{k}": str(v) for k, v in env.items() if v is not None}
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> ApiProcess:
        azr = Path(sys.executable).with_name("azr")
        command = [str(azr), "api", "--port", str(self.port)]
        self._process = subprocess.Popen(command, cwd=REPO, env=self._env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"azr api exited with {self._process.returncode} while starting")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"azr api did not become ready within {timeout_s} s")

    def stop(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None


@pytest.fixture
def server(keys: Keys, store: redis.Redis) -> Iterator[ApiProcess]:
    process = ApiProcess(keys).start()
    yield process
    process.stop()
