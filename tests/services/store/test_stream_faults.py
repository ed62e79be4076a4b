"""The experience stream under faults, against private redis-server processes: replies lost after Redis
applied the command (a proxy on loopback), Redis killed and restarted with its AOF, a hung Redis, a
Redis that does not persist, poison entries, bounds by bytes, and the monitoring gauges."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from azr.core.task import Task, TaskType
from azr.services.config import BufferConfig, RedisConfig, StreamConfig
from azr.services.store import connect
from azr.services.store.buffers import TaskBuffer
from azr.services.store.connection import PersistenceError
from azr.services.store.embedded import EmbeddedRedis
from azr.services.store.experience_stream import Admitted, BackpressureTimeoutError, ExperienceStream
from azr.services.store.keys import Keys
from azr.services.store.metrics import STREAM_DUPLICATES, STREAM_TRAINED, Counters, QuarantineReason
from azr.services.store.run_state import RunState
from tests.services.store.factories import make_experience
from tests.services.store.fault_proxy import FaultProxy
from tests.services.store.test_codec import pack

pytestmark = pytest.mark.redis

FAST = StreamConfig(read_count=64, max_pending=256, block_ms=20, reclaim_idle_ms=300, ledger_retention_s=60)
KEYS = Keys("azr-faults")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path / "redis") as embedded:
        yield embedded


def store_config(url: str, **changes: object) -> RedisConfig:
    return RedisConfig(url=url, persistence="refuse", retry_deadline_s=10).model_copy(update=changes)


def test_lost_replies_are_retried_without_duplicates_or_losses(server: EmbeddedRedis) -> None:
    with FaultProxy(server.port) as proxy:
        stream = ExperienceStream(connect(store_config(proxy.url)), KEYS, FAST, consumer="learner")
        stream.ack(stream.read(0, block_ms=0))  # loads the scripts, so the replies lost below are theirs

        proxy.drop_reply_to(b"MULTI")  # the write of an add went through; its reply did not
        assert stream.add([make_experience(i) for i in range(6)]) == Admitted(added=6, duplicates=0)
        assert stream.add([make_experience(i) for i in range(6)]) == Admitted(added=0, duplicates=6)

        proxy.drop_reply_to(b"\r\n>\r\n")  # XREADGROUP ... >: six entries delivered, the reply lost
        first = stream.read(0, n=3, block_ms=0)
        second = stream.read(0, n=6, block_ms=0)
        assert proxy.dropped == 2
        trained = [d.experience.id for d in [*first.deliveries, *second.deliveries]]
        assert sorted(trained) == [f"exp-{i}" for i in range(6)] and second.recovered >= 3

        proxy.drop_reply_to(stream._ack.sha.encode())  # the ack applied, its reply lost: same answer
        assert stream.ack(first).trained == len(first)
        assert stream.ack(second).trained == len(second)
        assert proxy.dropped == 3
    counters = Counters(connect(store_config(server.url)), KEYS)
    assert counters.get(STREAM_TRAINED) == 6 and counters.get(STREAM_DUPLICATES) == 0


def test_a_redis_killed_mid_step_restarts_from_its_aof_and_the_ack_goes_through(
    server: EmbeddedRedis,
) -> None:
    client = connect(store_config(server.url))
    stream = ExperienceStream(client, KEYS, FAST, consumer="learner")
    RunState(client, KEYS).advance_policy_version(7)
    run_id = RunState(client, KEYS).run_id()
    stream.add([make_experience(i) for i in range(20)])
    batch = stream.read(0, n=12)
    server.kill()  # SIGKILL while the learner trains
    acked: list[int] = []
    # The ack is retried through the outage and the AOF reload. (The restart stays on this thread: the
    # server is bound to the life of the thread that starts it.)
    learner = threading.Thread(target=lambda: acked.append(stream.ack(batch).trained))
    learner.start()
    time.sleep(0.5)
    server.restart()
    learner.join(timeout=20)
    assert acked == [12]
    assert RunState(client, KEYS).policy_version() == 7 and RunState(client, KEYS).run_id() == run_id
    rest = stream.read(0, n=64)
    assert sorted(d.experience.id for d in rest.deliveries) == sorted(f"exp-{i}" for i in range(12, 20))
    stream.ack(rest)
    assert Counters(client, KEYS).get(STREAM_TRAINED) == 20 and stream.waiting() == 0


def test_a_hung_redis_fails_a_call_within_the_retry_deadline(server: EmbeddedRedis) -> None:
    stream = ExperienceStream(
        connect(store_config(server.url, socket_timeout_s=0.2, retry_deadline_s=0.5)),
        KEYS,
        FAST.model_copy(update={"block_ms": 50}),
    )
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        with pytest.raises((redis.TimeoutError, redis.ConnectionError)):
            stream.read(0)
        # A bound on behaviour, not a speed target: without timeouts the call would never return.
        assert time.monotonic() - began < 20
        assert stream.read_errors == 1
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert stream.health()["stream/read_errors"] == 1
    assert RedisConfig().socket_timeout_s <= 5 and RedisConfig().retry_deadline_s <= 15


def test_persistence_is_checked_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with EmbeddedRedis(tmp_path / "volatile", appendonly=False) as volatile:
        with pytest.raises(PersistenceError, match="appendonly is 'no'"):
            connect(store_config(volatile.url))
        with caplog.at_level(logging.WARNING):
            connect(store_config(volatile.url, persistence="warn"))
        assert "not safe for training data" in caplog.text
    with EmbeddedRedis(tmp_path / "durable") as durable:
        client = connect(store_config(durable.url))  # AOF and noeviction: accepted
        client.config_set("maxmemory-policy", "allkeys-lru")
        with pytest.raises(PersistenceError, match="evicts keys"):
            connect(store_config(durable.url))


def test_a_poison_entry_is_quarantined_alone_and_its_batch_mates_train(
    server: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    client = connect(store_config(server.url))
    stream = ExperienceStream(client, KEYS, FAST)
    stream.add([make_experience(0)])
    huge = pack(parts=b'{"solve": 1' + b"0" * 400 + b"}")  # a number too large for a float
    for _ in range(30):
        client.xadd(KEYS.experiences(), dict(huge.items()))
    stream.add([make_experience(1)])
    with caplog.at_level(logging.WARNING):
        batch = stream.read(0)
    assert [d.experience.id for d in batch.deliveries] == ["exp-0", "exp-1"]
    assert batch.quarantined == 30
    entry = stream.quarantined(1)[0]
    assert entry.reason is QuarantineReason.MALFORMED and "not a finite float" in entry.detail
    assert caplog.text.count("quarantined") == 1  # counted and sampled, not a line per entry


def test_bounds_by_bytes(server: EmbeddedRedis) -> None:
    client = connect(store_config(server.url))
    config = FAST.model_copy(
        update={"max_pending_bytes": 1 << 20, "quarantine_max_entry_bytes": 1024, "ledger_max_ids": 1000}
    )
    stream = ExperienceStream(client, KEYS, config)
    big = [make_experience(i, prompt_len=20_000, response_len=10_000) for i in range(12)]  # 160 kB each
    with pytest.raises(BackpressureTimeoutError, match="bytes\\) are waiting untrained"):
        stream.add(big, timeout_s=0.3)
    assert 0 < stream.waiting() < 12  # the backlog stopped near 1 MiB
    with pytest.raises(ValueError, match=r"more than stream\.max_pending_bytes"):
        stream.add([make_experience(99, prompt_len=300_000)])
    while stream.waiting():
        stream.ack(stream.read(0))

    client.xadd(KEYS.experiences(), {b"junk": b"j" * 100_000})
    stream.read(0)
    (entry,) = stream.quarantined()
    assert entry.truncated and entry.fields == {b"junk": b"j" * 1024}

    for start in range(0, 1500, 250):
        stream.add([make_experience(i, prompt_len=1, response_len=1) for i in range(start, start + 250)])
        stream.ack(stream.read(0, n=250))
    assert client.zcard(KEYS.trained()) == 1000 and client.zcard(KEYS.admitted()) == 1000

    buffer = TaskBuffer(client, KEYS, TaskType.DEDUCTION, BufferConfig(max_task_bytes=4096))
    huge_task = Task(
        type=TaskType.DEDUCTION, program="def f(x):\n    return x", inputs=("'" + "a" * 5000 + "'",)
    )
    result = buffer.add_many([huge_task])
    assert (result.added, result.too_large) == (0, 1) and buffer.size() == 0


def test_health_gauges(server: EmbeddedRedis) -> None:
    client = connect(store_config(server.url))
    learner = ExperienceStream(client, KEYS, FAST, consumer="learner")
    learner.add([make_experience(i) for i in range(10)])
    learner.ack(learner.read(0, n=4))
    learner.read(0, n=3)
    time.sleep(0.2)
    gauges = learner.health()
    assert gauges["stream/pending/learner"] == 3 and gauges["stream/pending"] == 3
    assert gauges["stream/backlog"] == 6 and gauges["stream/backlog_bytes"] > 0
    assert gauges["stream/oldest_pending_age_s"] >= 0.2
    assert gauges["stream/consumers_live"] == 1
    assert gauges["stream/ledger_ids"] == 14  # 10 admitted + 4 trained
    assert gauges["stream/ledger_bytes"] > 0 and gauges["redis/used_memory_bytes"] > 0
    assert gauges["stream/read_errors"] == 0
    assert all(isinstance(v, float) for v in gauges.values())
