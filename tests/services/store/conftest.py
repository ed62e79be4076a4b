"""Fixtures for the store tests: a real Redis and a fresh random key prefix per test, removed afterwards."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import numpy as np
import pytest
import redis

from azr.services.config import RedisConfig
from azr.services.store import connect
from azr.services.store.keys import Keys
from azr.trainer.experience import Experience

REDIS_URL = os.environ.get("AZR_TEST_REDIS_URL", RedisConfig().url)


@pytest.fixture(scope="session")
def redis_config() -> RedisConfig:
    return RedisConfig(url=REDIS_URL)


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


def make_experience(
    i: int, *, policy_version: int = 0, prompt_len: int = 7, response_len: int = 5, seed: int = 0
) -> Experience:
    """A deterministic experience with distinctive values (large and negative ids, tiny log-probs)."""
    rng = np.random.default_rng(seed * 1_000_003 + i)
    return Experience(
        id=f"exp-{i}",
        run_id="run-test",
        policy_version=policy_version,
        role=("propose", "solve")[i % 2],
        task_type=("deduction", "abduction", "induction")[i % 3],
        prompt_ids=rng.integers(-(2**31), 2**31 - 1, size=prompt_len, dtype=np.int32),
        response_ids=rng.integers(0, 200_000, size=response_len, dtype=np.int32),
        behaviour_logprobs=-rng.exponential(size=response_len).astype(np.float32),
        reward=float(rng.normal()),
        reward_parts={"format": -0.5, "solve": float(i % 2)},
        task_id=f"task-{i}",
    )
