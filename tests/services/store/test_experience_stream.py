"""The experience stream against a real Redis: crash recovery, idempotency, staleness, backpressure,
quarantine. The crash test kills a real consumer subprocess with SIGKILL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from azr.services.config import RedisConfig, StreamConfig
from azr.services.store import codec
from azr.services.store.experience_stream import (
    Admitted,
    BackpressureTimeoutError,
    ExperienceStream,
    LeaseLostError,
)
from azr.services.store.keys import Keys
from azr.services.store.metrics import (
    STREAM_DUPLICATES,
    STREAM_STALE,
    STREAM_TRAINED,
    Counters,
    QuarantineReason,
    quarantined,
)
from azr.services.store.replies import as_text
from tests.services.store.factories import make_experience

pytestmark = pytest.mark.redis

REPO = Path(__file__).resolve().parents[3]
FAST = StreamConfig(read_count=64, max_pending=256, block_ms=20, reclaim_idle_ms=300, ledger_retention_s=60)


def stream_waiting(client: redis.Redis, keys: Keys) -> int:
    return int(client.xlen(keys.experiences()))


def drain(stream: ExperienceStream, current_version: int = 0) -> list[str]:
    """Read, 'train' and ack until nothing is waiting; returns the trained experience ids in order."""
    trained: list[str] = []
    deadline = time.monotonic() + 20
    while stream.waiting() and time.monotonic() < deadline:
        batch = stream.read(current_version=current_version)
        trained += [d.experience.id for d in batch.deliveries]
        stream.ack(batch)
    assert stream.waiting() == 0, "the stream did not drain"
    return trained


# A foreign entry, one of the older one-field-per-value layout, and a truncated payload.
MALFORMED: list[tuple[dict[bytes, bytes], str]] = [
    ({b"hello": b"world"}, "fields: expected only"),
    ({b"v": b"1", b"id": b"exp-9"}, "codec version 1"),
    ({codec.FIELD: codec.encode(make_experience(9))[codec.FIELD][:-3]}, "length mismatch"),
]


def test_malformed_entries_are_quarantined_with_their_reason(client: redis.Redis, keys: Keys) -> None:
    stream = ExperienceStream(client, keys, FAST)
    stream.add([make_experience(0)])
    bad = [fields for fields, _ in MALFORMED]
    bad_ids = [as_text(client.xadd(keys.experiences(), dict(fields.items()))) for fields in bad]
    stream.add([make_experience(1)])

    batch = stream.read(current_version=0)
    assert [d.experience.id for d in batch.deliveries] == ["exp-0", "exp-1"]
    assert batch.quarantined == 3
    assert stream.waiting() == 2  # the quarantined entries are acknowledged and gone
    held = {q.source_id: q for q in stream.quarantined()}
    assert set(held) == set(bad_ids)
    for source_id, (fields, reason) in zip(bad_ids, MALFORMED, strict=True):
        entry = held[source_id]
        assert entry.reason is QuarantineReason.MALFORMED and reason in entry.detail
        assert entry.fields == fields  # kept as they were, for inspection
    assert Counters(client, keys).get(quarantined(QuarantineReason.MALFORMED)) == 3


def test_consumer_killed_mid_batch_loses_nothing_and_trains_nothing_twice(
    client: redis.Redis, keys: Keys, redis_config: RedisConfig, tmp_path: Path
) -> None:
    n, batch, mini_batch, ack_steps = 48, 24, 8, 1
    stream = ExperienceStream(client, keys, FAST, consumer="survivor")
    stream.add([make_experience(i) for i in range(n)])
    journal = tmp_path / "journal.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.services.store.crashing_consumer",
            f"--url={redis_config.url}",
            f"--prefix={keys.prefix}",
            f"--journal={journal}",
            f"--stream-config={FAST.model_dump_json()}",
            f"--batch={batch}",
            f"--mini-batch={mini_batch}",
            f"--ack-steps={ack_steps}",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "STEPPED", "the consumer did not reach its crash point"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
        proc.wait()

    events = [json.loads(line) for line in journal.read_text().splitlines()]
    acked = [i for e in events if e["event"] == "acked" for i in e["ids"]]
    stepped = [i for e in events if e["event"] == "stepped" for i in e["ids"]]
    assert len(acked) == ack_steps * mini_batch and len(stepped) == (ack_steps + 1) * mini_batch
    lost_step = [i for i in stepped if i not in acked]  # trained by the dead process, never acknowledged

    time.sleep(FAST.reclaim_idle_ms / 1000 + 0.1)
    # What it held is taken over first (second delivery), alone and in halves, then new ones come.
    unacked = batch - len(acked)
    halves = [stream.read(current_version=0) for _ in range(2)]
    assert [b.reclaimed for b in halves] == [len(b) for b in halves] == [unacked // 2] * 2
    reclaimed = [d for b in halves for d in b.deliveries]
    assert {d.experience.id for d in reclaimed} == {f"exp-{i}" for i in range(batch)} - set(acked)
    assert {d.deliveries for d in reclaimed} == {2}
    for half in halves:
        stream.ack(half)
    survivor = [d.experience.id for d in reclaimed] + drain(stream)

    # Exactly once: what the dead consumer committed plus what the survivor trained is every experience
    # once; the step that died with the process is redone, committed work is not.
    lineage = Counter(acked + survivor)
    assert set(lineage) == {f"exp-{i}" for i in range(n)} and set(lineage.values()) == {1}
    assert set(lost_step) <= set(survivor)
    counters = Counters(client, keys)
    assert counters.get(STREAM_TRAINED) == n and counters.get(STREAM_DUPLICATES) == 0
    assert client.zcard(keys.trained()) == n
    assert client.hlen(keys.strikes()) == 0  # the crash was blamed on no entry


def test_a_retried_add_writes_nothing_twice(client: redis.Redis, keys: Keys) -> None:
    stream = ExperienceStream(client, keys, FAST)
    assert stream.add([make_experience(i) for i in range(4)]) == Admitted(added=4, duplicates=0)
    assert drain(stream) == [f"exp-{i}" for i in range(4)]
    # A producer that retried its add: the same experiences again, one of them twice in one call.
    again = [make_experience(2), make_experience(3), make_experience(4), make_experience(4)]
    assert stream.add(again) == Admitted(added=1, duplicates=3)
    assert stream.waiting() == 1
    assert drain(stream) == ["exp-4"]
    assert Counters(client, keys).get(STREAM_TRAINED) == 5


def test_copies_the_producer_ledger_missed_are_trained_once(client: redis.Redis, keys: Keys) -> None:
    """Copies written around the admission ledger (forgotten ids, another writer): a read drops an id
    already trained, or in flight under another entry, even one read by another consumer."""
    first = ExperienceStream(client, keys, FAST, consumer="first")
    second = ExperienceStream(client, keys, FAST, consumer="second")
    payload = codec.encode(make_experience(7))
    for _ in range(3):
        client.xadd(keys.experiences(), dict(payload.items()))
    taken = first.read(current_version=0, n=1)
    assert [d.experience.id for d in taken.deliveries] == ["exp-7"]
    copies = second.read(current_version=0)
    assert len(copies) == 0 and copies.duplicates == 2  # in flight with "first"
    first.ack(taken)
    client.xadd(keys.experiences(), dict(payload.items()))
    late = second.read(current_version=0)
    assert len(late) == 0 and late.duplicates == 1  # already trained
    assert stream_waiting(client, keys) == 0
    assert Counters(client, keys).get(STREAM_TRAINED) == 1


def test_a_lease_lost_to_a_reclaim_is_refused_at_renew_and_ack(client: redis.Redis, keys: Keys) -> None:
    slow = ExperienceStream(client, keys, FAST, consumer="slow")
    fast = ExperienceStream(client, keys, FAST, consumer="fast")
    slow.add([make_experience(i) for i in range(3)])
    taken = slow.read(current_version=0)
    assert slow.renew(taken) > 0
    time.sleep(FAST.reclaim_idle_ms / 1000 + 0.1)  # a pause longer than the lease (GC, checkpoint, outage)
    retaken = [fast.read(current_version=0) for _ in range(2)]  # the lapsed batch comes back in halves
    assert [b.reclaimed for b in retaken] == [2, 1]
    with pytest.raises(LeaseLostError, match="3 of 3 experiences"):
        slow.renew(taken)  # detected before the optimizer step
    assert sum(fast.ack(b).trained for b in retaken) == 3
    with pytest.raises(LeaseLostError):
        slow.ack(taken)  # and at commit: nothing recorded
    counters = Counters(client, keys)
    assert counters.get(STREAM_TRAINED) == 3 and counters.get(STREAM_DUPLICATES) == 0


def test_a_kept_lease_outlives_a_long_step(client: redis.Redis, keys: Keys) -> None:
    config = FAST.model_copy(update={"reclaim_idle_ms": 900})  # renewed every 300 ms: room for a busy CI
    worker = ExperienceStream(client, keys, config, consumer="worker")
    other = ExperienceStream(client, keys, config, consumer="other")
    worker.add([make_experience(i) for i in range(3)])
    batch = worker.read(current_version=0)
    with worker.keep_alive(batch) as keeper:
        deadline = time.monotonic() + 2 * config.reclaim_idle_ms / 1000
        while time.monotonic() < deadline:  # a step two leases long, while another consumer polls
            assert len(other.read(current_version=0, block_ms=0)) == 0
            time.sleep(0.05)
    assert keeper.renewals >= 2 and not keeper.lost
    worker.renew(batch)
    assert worker.ack(batch).trained == 3


def test_a_failed_batch_is_bisected_and_only_the_culprit_quarantined(client: redis.Redis, keys: Keys) -> None:
    """Consumers that die on whatever batch holds exp-5: the batch comes back in halves, the healthy
    halves are trained, and only exp-5 is quarantined, after max_failures deaths alone."""
    config = FAST.model_copy(update={"max_failures": 2, "read_count": 8})
    producer = ExperienceStream(client, keys, config)
    producer.add([make_experience(i) for i in range(8)])
    trained: list[str] = []
    for attempt in range(12):
        if not producer.waiting():
            break
        consumer = ExperienceStream(client, keys, config, consumer=f"c{attempt}")
        batch = consumer.read(current_version=0, block_ms=0)
        if "exp-5" in {d.experience.id for d in batch.deliveries}:
            time.sleep(config.reclaim_idle_ms / 1000 + 0.1)  # it "dies": never acks
            continue
        consumer.ack(batch)
        trained += [d.experience.id for d in batch.deliveries]
    assert sorted(trained) == sorted(f"exp-{i}" for i in range(8) if i != 5)
    (entry,) = producer.quarantined()
    assert entry.reason is QuarantineReason.MAX_FAILURES and codec.decode(entry.fields).id == "exp-5"
    assert producer.waiting() == 0
    assert Counters(client, keys).get(quarantined(QuarantineReason.MAX_FAILURES)) == 1


def test_a_learner_restarted_under_its_name_gets_its_batch_back_and_blames_a_poison(
    client: redis.Redis, keys: Keys
) -> None:
    """A learner with a fixed consumer name that keeps dying on exp-1: each restart (a new object under
    the same name) gets what the dead one held back at once, in halves, and exp-1 ends in quarantine."""
    config = FAST.model_copy(update={"max_failures": 2})
    ExperienceStream(client, keys, config).add([make_experience(i) for i in range(4)])
    trained: list[str] = []
    for _ in range(8):
        learner = ExperienceStream(client, keys, config, consumer="learner")  # a new process
        batch = learner.read(current_version=0, block_ms=0)
        if not batch.deliveries and not learner.waiting():
            break
        if "exp-1" not in {d.experience.id for d in batch.deliveries}:
            learner.ack(batch)
            trained += [d.experience.id for d in batch.deliveries]
    assert sorted(trained) == ["exp-0", "exp-2", "exp-3"]
    (entry,) = learner.quarantined()
    assert entry.reason is QuarantineReason.MAX_FAILURES and codec.decode(entry.fields).id == "exp-1"


def test_stale_experiences_are_dropped_acked_and_counted(client: redis.Redis, keys: Keys) -> None:
    stream = ExperienceStream(client, keys, FAST.model_copy(update={"max_staleness": 1}))
    stream.add([make_experience(i, policy_version=v) for i, v in enumerate([0, 3, 4, 5, 2, 6])])
    batch = stream.read(current_version=5)
    assert sorted(d.experience.policy_version for d in batch.deliveries) == [4, 5, 6]
    assert batch.stale == 3
    assert stream.waiting() == 3  # the stale ones are acknowledged and deleted, not left pending
    assert Counters(client, keys).get(STREAM_STALE) == 3


def test_producer_waits_for_the_trainer_then_times_out_clearly(client: redis.Redis, keys: Keys) -> None:
    config = FAST.model_copy(update={"max_pending": 8, "read_count": 4})
    stream = ExperienceStream(client, keys, config)
    stream.add([make_experience(i) for i in range(8)])
    done = threading.Event()

    def produce() -> None:
        stream.add([make_experience(i) for i in range(8, 12)], timeout_s=10)
        done.set()

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        batch = stream.read(current_version=0)
        assert not done.wait(0.3), "the producer must wait while max_pending experiences are untrained"
        assert stream.waiting() == 8  # read but unacknowledged still counts as waiting
        stream.ack(batch)
        assert done.wait(5), "the producer must resume once the trainer acknowledges"
    finally:
        producer.join()
    assert stream.waiting() == 8

    start = time.monotonic()
    with pytest.raises(
        BackpressureTimeoutError, match=r"8 experiences \(.* bytes\) are waiting untrained .*max_pending=8"
    ):
        stream.add([make_experience(99)], timeout_s=0.2)
    assert 0.2 <= time.monotonic() - start < 2
    assert stream.waiting() == 8


def test_a_batch_larger_than_max_pending_goes_in_by_chunks(client: redis.Redis, keys: Keys) -> None:
    config = FAST.model_copy(update={"max_pending": 8, "read_count": 8})
    stream = ExperienceStream(client, keys, config)
    trained: list[str] = []

    def consume() -> None:
        deadline = time.monotonic() + 10
        while len(trained) < 20 and time.monotonic() < deadline:
            batch = stream.read(current_version=0)
            assert stream.waiting() <= 8
            trained.extend(d.experience.id for d in batch.deliveries)
            stream.ack(batch)

    consumer = threading.Thread(target=consume)
    consumer.start()
    stream.add([make_experience(i) for i in range(20)], timeout_s=10)
    consumer.join()
    assert trained == [f"exp-{i}" for i in range(20)]


def test_config_rejects_settings_that_would_stall(redis_config: RedisConfig, keys: Keys) -> None:
    with pytest.raises(ValueError, match="raise max_pending"):
        StreamConfig(max_pending=10, read_count=64)
    with pytest.raises(ValueError, match=r"must exceed stream\.block_ms"):
        StreamConfig(block_ms=1000, reclaim_idle_ms=500)
    short_timeout = redis.Redis.from_url(redis_config.url, socket_timeout=0.5)
    with pytest.raises(ValueError, match=r"raise redis\.socket_timeout_s"):
        ExperienceStream(short_timeout, keys, StreamConfig(block_ms=1000))
    short_timeout.close()


def test_a_deleted_stream_is_recreated_with_its_group(client: redis.Redis, keys: Keys) -> None:
    stream = ExperienceStream(client, keys, FAST)
    client.delete(keys.experiences())  # e.g. an operator cleared it: the consumer group goes with it
    assert len(stream.read(current_version=0, block_ms=0)) == 0
    stream.add([make_experience(0)])
    assert [d.experience.id for d in stream.read(current_version=0).deliveries] == ["exp-0"]


def test_large_batches_ack_in_one_call(client: redis.Redis, keys: Keys) -> None:
    config = FAST.model_copy(update={"read_count": 2500, "max_pending": 2500})
    stream = ExperienceStream(client, keys, config)
    stream.add([make_experience(i, prompt_len=1, response_len=1) for i in range(2500)])
    batch = stream.read(current_version=0)
    assert len(batch) == 2500
    assert stream.ack(batch).trained == 2500
    assert stream.waiting() == 0 and client.xpending(keys.experiences(), config.group)["pending"] == 0


def test_idle_consumers_holding_nothing_are_forgotten(
    client: redis.Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("azr.services.store.experience_stream._PRUNE_EVERY_S", 0.0)
    ghost = ExperienceStream(client, keys, FAST, consumer="ghost")
    ghost.add([make_experience(9)])
    ghost.ack(ghost.read(current_version=0))  # leaves its last ack behind, then goes quiet
    assert client.hexists(keys.acks(), "ghost")
    holder = ExperienceStream(client, keys, FAST, consumer="holder")
    holder.add([make_experience(0)])
    assert len(holder.read(current_version=0)) == 1  # pending on "holder" from now on
    time.sleep(FAST.reclaim_idle_ms / 1000 + 0.1)
    ExperienceStream(client, keys, FAST, consumer="live").read(current_version=0, n=1)

    def names() -> set[str]:
        return {as_text(c["name"]) for c in client.xinfo_consumers(keys.experiences(), FAST.group)}

    # "holder" had its entry reclaimed by that read; it is forgotten by the next prune, "ghost" already.
    assert "ghost" not in names() and "live" in names()
    assert not client.hexists(keys.acks(), "ghost")
