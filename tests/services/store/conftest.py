"""Fixtures for the store tests: a real Redis and a fresh random key prefix per test, removed afterwards."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
import redis

from azr.services.config import RedisConfig
from azr.services.store import connect
from azr.services.store.keys import Keys

REDIS_URL = os.environ.get("AZR_TEST_REDIS_URL", RedisConfig().url)


@pytest.fixture(scope="session")
def redis_config() -> RedisConfig:
    return RedisConfig(url=REDIS_URL, persistence="ignore")  # the shared test server runs without AOF


@pytest.fixture
def client(redis_config: RedisConfig) -> Iterator[redis.Redis]:
    try:
        conn = connect(redis_config)
    except redis.ConnectionError as exc:
        pytest.fail(f"these tests need a Redis server at {REDIS_URL} (run scripts/host-setup.sh): {exc}")
    yield conn
    conn.close()


@pytest.fixture
def keys(client: redis.Redis) -> Iterator[Keys]:
    k = Keys(f"azr-test-{secrets.token_hex(6)}")
    yield k
    doomed = list(client.scan_iter(match=k.pattern(), count=1000))
    if doomed:
        client.delete(*doomed)
