"""Metrics stream, counters and run state against a real Redis."""

from __future__ import annotations

import math
import threading

import pytest
import redis

from azr.core.task import TaskType
from azr.executor.errors import ErrorCode
from azr.services.config import MetricsConfig
from azr.services.store.keys import Keys
from azr.services.store.metrics import Counters, MetricsStream, proposal_outcome
from azr.services.store.run_state import RunState

pytestmark = pytest.mark.redis


def test_metrics_records_round_trip_and_are_capped(client: redis.Redis, keys: Keys) -> None:
    metrics = MetricsStream(client, keys, MetricsConfig(maxlen=50))
    metrics.publish(0, {"losses/pg": 0.25})
    for step in range(1, 500):
        metrics.publish(step, {"losses/pg": float(step)})
    records = metrics.latest(3)
    assert [r.step for r in records] == [497, 498, 499]
    assert records[-1].values == {"losses/pg": 499.0}
    assert client.xlen(keys.metrics()) < 500  # approximate trimming keeps it near maxlen
    # Tailing from a known id returns only what came after.
    assert [r.step for r in metrics.since(records[-2].id)] == [499]
    assert MetricsStream(client, keys).since("0-0", count=1)[0].step > 0  # the oldest were trimmed


def test_metrics_tail_wakes_up_on_publish(client: redis.Redis, keys: Keys) -> None:
    metrics = MetricsStream(client, keys)
    last = metrics.publish(0, {"reward": 1.0})
    threading.Timer(0.1, metrics.publish, args=(1, {"reward": math.inf})).start()
    (record,) = metrics.since(last, block_ms=5_000)
    assert record.step == 1 and record.values == {"reward": None}


def test_counters_accumulate_under_namespaced_names(client: redis.Redis, keys: Keys) -> None:
    counters = Counters(client, keys)
    timeout = proposal_outcome(TaskType.DEDUCTION, ErrorCode.TIMEOUT)
    assert timeout == "proposals/deduction/error/timeout"
    counters.incr_many({timeout: 2, proposal_outcome(TaskType.DEDUCTION, None): 5})
    counters.incr(timeout)
    assert counters.all() == {timeout: 3, "proposals/deduction/valid": 5}
    assert counters.get("never/incremented") == 0


def test_run_state_is_stable_and_versions_only_move_forward(client: redis.Redis, keys: Keys) -> None:
    state = RunState(client, keys)
    run_id = state.run_id()
    assert RunState(client, keys).run_id() == run_id
    assert state.policy_version() == 0
    assert state.advance_policy_version(3) == 3
    assert state.advance_policy_version(2) == 3  # a late publish of an older version is ignored
    assert RunState(client, keys).policy_version() == 3
    with pytest.raises(ValueError, match="start at 0"):
        state.advance_policy_version(-1)
