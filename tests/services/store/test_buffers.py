"""Task buffers against a real Redis: dedup, eviction order, sampling, origins, zero seed, restarts, races."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
import redis

from azr.core.task import ZERO_SEED, Origin, Task, TaskType
from azr.services.config import BufferConfig, RedisConfig
from azr.services.store import connect
from azr.services.store.buffers import TaskBuffer, TaskBuffers
from azr.services.store.keys import Keys

pytestmark = pytest.mark.redis

DED = TaskType.DEDUCTION


def task(
    i: int, *, origin: Origin = Origin.PROPOSED, task_type: TaskType = DED, step: int | None = None
) -> Task:
    return Task(
        type=task_type,
        program=f"def f(x):\n    return x + {i}",
        inputs=(str(i),),
        outputs=(str(2 * i),),
        origin=origin,
        step=i if step is None else step,
    )


def chi_square(counts: Counter[int], categories: range, expected: float) -> float:
    return sum((counts[c] - expected) ** 2 / expected for c in categories)


def test_duplicates_by_content_hash_are_not_admitted(client: redis.Redis, keys: Keys) -> None:
    buf = TaskBuffer(client, keys, DED)
    assert buf.add(task(1))
    # Same content, different provenance: the same task.
    assert not buf.add(task(1, origin=Origin.USER, step=99))
    result = buf.add_many([task(2), task(3), task(2)])
    assert (result.added, result.duplicates) == (2, 1)
    counts = buf.counts()
    assert (counts.size, counts.added, counts.duplicates) == (3, 3, 2)
    assert buf.newest(10)[-1].origin is Origin.PROPOSED  # the first copy is the one kept


def test_dedup_off_keeps_copies(client: redis.Redis, keys: Keys) -> None:
    buf = TaskBuffer(client, keys, DED, BufferConfig(capacity=10, dedup=False))
    buf.add_many([task(1), task(1), task(1)])
    assert buf.size() == 3
    assert {t.id for t in buf.newest(3)} == {task(1).id}


def test_at_capacity_the_oldest_leaves_and_the_newest_stays(client: redis.Redis, keys: Keys) -> None:
    buf = TaskBuffer(client, keys, DED, BufferConfig(capacity=5))
    for i in range(12):
        assert buf.add(task(i)), "a new task must always be admitted, even at the cap"
    assert [t.step for t in buf.newest(10)] == [11, 10, 9, 8, 7]
    # One batch bigger than the capacity keeps its own last items.
    result = buf.add_many([task(i) for i in range(100, 108)])
    assert (result.added, result.evicted) == (8, 8)
    assert [t.step for t in buf.newest(10)] == [107, 106, 105, 104, 103]
    assert buf.counts().evicted == 15


def test_an_evicted_task_can_come_back(client: redis.Redis, keys: Keys) -> None:
    buf = TaskBuffer(client, keys, DED, BufferConfig(capacity=2))
    buf.add_many([task(0), task(1), task(2)])
    assert buf.add(task(0))
    assert [t.step for t in buf.newest(2)] == [0, 2]


def test_sample_uniform_is_uniform_distinct_and_seeded(client: redis.Redis, keys: Keys) -> None:
    n, k, draws = 10, 3, 3000
    buf = TaskBuffer(client, keys, DED, seed=7)
    buf.add_many([task(i) for i in range(n)])
    counts: Counter[int] = Counter()
    first: Counter[int] = Counter()
    for _ in range(draws):
        sample = [t.step for t in buf.sample_uniform(k)]
        assert len(set(sample)) == k
        counts.update(sample)
        first[sample[0]] += 1
    # Chi-square, 9 degrees of freedom: 27.9 is the 0.1% critical value. Seeded, so not flaky.
    assert chi_square(counts, range(n), draws * k / n) < 27.9
    assert chi_square(first, range(n), draws / n) < 27.9

    def draws_with(seed: int) -> list[list[str]]:
        sampler = TaskBuffer(client, keys, DED, seed=seed)
        return [[t.id for t in sampler.sample_uniform(k)] for _ in range(20)]

    assert draws_with(7) == draws_with(7)
    assert draws_with(7) != draws_with(8)


def test_sample_uniform_returns_what_there_is(client: redis.Redis, keys: Keys) -> None:
    buf = TaskBuffer(client, keys, DED)
    assert buf.sample_uniform(6) == []
    buf.add_many([task(0), task(1)])
    assert sorted(t.step for t in buf.sample_uniform(6)) == [0, 1]
    with pytest.raises(ValueError, match="k must be >= 1"):
        buf.sample_uniform(0)


def test_solver_batch_takes_fresh_tasks_newest_first_then_tops_up_uniformly(
    client: redis.Redis, keys: Keys
) -> None:
    buf = TaskBuffer(client, keys, DED, seed=3)
    buf.add_many([task(i) for i in range(20)])
    first = buf.solver_batch(8)
    assert [t.step for t in first.tasks] == list(range(19, 11, -1))

    buf.add_many([task(i) for i in range(20, 23)])
    top_up: Counter[int] = Counter()
    draws = 1000
    for _ in range(draws):
        batch = buf.solver_batch(8, since=first.cursor)
        steps = [t.step for t in batch.tasks]
        assert steps[:3] == [22, 21, 20]
        assert len(set(steps)) == 8 and all(s < 20 for s in steps[3:])
        top_up.update(steps[3:])
    # The 5 top-ups are uniform over the 20 older tasks: 19 dof, 0.1% critical value 43.8.
    assert chi_square(top_up, range(20), draws * 5 / 20) < 43.8
    # Nothing new since the last cursor: all top-up.
    assert all(t.step < 23 for t in buf.solver_batch(8, since=batch.cursor).tasks)


def test_solver_batch_from_a_small_buffer_repeats_tasks(client: redis.Redis, keys: Keys) -> None:
    buf = TaskBuffer(client, keys, DED, seed=0)
    assert buf.solver_batch(4).tasks == []
    buf.add_many([task(i) for i in range(3)])
    steps = [t.step for t in buf.solver_batch(8).tasks]
    assert len(steps) == 8
    assert steps[:3] == [2, 1, 0]
    assert set(steps[3:]) <= {0, 1, 2}


def test_origin_counts_follow_the_tasks_present(client: redis.Redis, keys: Keys) -> None:
    buf = TaskBuffer(client, keys, DED, BufferConfig(capacity=4))
    assert buf.ensure_zero_seed()
    buf.add_many([task(1, origin=Origin.USER), task(2, origin=Origin.USER), task(3)])
    counts = buf.counts()
    assert counts.by_origin == {Origin.ZERO_SEED: 1, Origin.USER: 2, Origin.PROPOSED: 1}
    buf.add_many([task(4), task(5)])  # evicts the zero seed and the first user task
    assert buf.counts().by_origin == {Origin.ZERO_SEED: 0, Origin.USER: 1, Origin.PROPOSED: 3}


def test_zero_seed_is_written_once_per_run(client: redis.Redis, keys: Keys) -> None:
    buffers = TaskBuffers(client, keys, BufferConfig(capacity=2))
    assert buffers.ensure_zero_seed() == dict.fromkeys(TaskType, True)
    seed = buffers[DED].newest(1)[0]
    assert (seed.program, seed.inputs, seed.outputs, seed.origin) == (
        ZERO_SEED.program,
        ZERO_SEED.inputs,
        ZERO_SEED.outputs,
        Origin.ZERO_SEED,
    )
    assert buffers[TaskType.ABDUCTION].newest(1)[0].type is TaskType.ABDUCTION
    induction = buffers[TaskType.INDUCTION].newest(1)[0]
    assert len(induction.inputs) == len(induction.outputs) == 10, "induction starts from ten IO pairs"
    buffers[DED].add_many([task(1), task(2)])  # the seed is evicted
    restarted = TaskBuffers(client, keys, BufferConfig(capacity=2))
    assert restarted.ensure_zero_seed() == dict.fromkeys(TaskType, False)
    assert restarted.sizes() == {DED: 2, TaskType.ABDUCTION: 1, TaskType.INDUCTION: 1}


def test_a_new_client_sees_the_same_buffer(
    client: redis.Redis, keys: Keys, redis_config: RedisConfig
) -> None:
    TaskBuffer(client, keys, DED, BufferConfig(capacity=3)).add_many([task(i) for i in range(4)])
    other_client = connect(redis_config)
    try:
        buf = TaskBuffer(other_client, keys, DED, BufferConfig(capacity=3))
        assert [t.step for t in buf.newest(5)] == [3, 2, 1]
        assert buf.add(task(4)) and not buf.add(task(3))
        assert [t.step for t in buf.newest(5)] == [4, 3, 2]
        assert buf.newest(1)[0] == task(4)
    finally:
        other_client.close()


def test_a_task_of_another_type_is_refused(client: redis.Redis, keys: Keys) -> None:
    with pytest.raises(ValueError, match="cannot go into the deduction buffer"):
        TaskBuffer(client, keys, DED).add(task(1, task_type=TaskType.ABDUCTION))


def test_concurrent_producers_never_overshoot_or_double_insert(client: redis.Redis, keys: Keys) -> None:
    capacity, threads, per_thread = 50, 6, 150
    config = BufferConfig(capacity=capacity)
    order, tasks = keys.buffer_order(DED), keys.buffer_tasks(DED)
    done = threading.Event()
    peak = {"order": 0, "tasks": 0}

    def produce(t: int) -> None:
        buf = TaskBuffer(client, keys, DED, config)
        # Half the ids are shared between all threads, so they race to insert the same task.
        for i in range(per_thread):
            buf.add(task(i if i % 2 else 10_000 + t * per_thread + i))

    def watch() -> None:
        while not done.is_set():
            pipe = client.pipeline(transaction=True)
            pipe.zcard(order)
            pipe.hlen(tasks)
            n_order, n_tasks = pipe.execute()
            peak["order"], peak["tasks"] = max(peak["order"], n_order), max(peak["tasks"], n_tasks)

    watcher = threading.Thread(target=watch)
    watcher.start()
    workers = [threading.Thread(target=produce, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done.set()
    watcher.join()

    counts = TaskBuffer(client, keys, DED, config).counts()
    assert peak["order"] <= capacity and peak["tasks"] <= capacity
    assert counts.size == capacity == client.hlen(tasks)
    unique = per_thread // 2 + threads * (per_thread // 2)
    # Shared ids may be evicted and re-admitted by a later thread, so count admissions exactly instead.
    assert counts.added + counts.duplicates == threads * per_thread
    assert counts.added >= unique
    assert counts.added - counts.evicted == capacity
    assert sum(counts.by_origin.values()) == capacity
