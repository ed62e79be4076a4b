"""Benchmark of the Redis store: experiences/s through the stream, and task-buffer sampling latency.

Experiences are 1,000 tokens (prompt 300 + response 700, with a log-prob per response token), added in
batches and read + acknowledged in batches, as the rollout workers and the trainer do:

- produce: one producer adds every experience (no consumer running, no backpressure);
- consume: one consumer reads, renews its lease (as the learner does before its optimizer step) and
  acknowledges them all;
- pipeline: a producer process and a consumer process at once, with the default backpressure
  (``max_pending``), timed from start until the consumer has acknowledged the last one.

Buffer latency is per call on a full buffer (16,384 tasks): ``sample_uniform(6)`` (proposer references),
``solver_batch(64)`` (B=64 solver tasks) and ``add`` at the cap (admits one, evicts the oldest).

    .venv/bin/python -m bench.queue [--experiences 40960] [--batch 256] [--url redis://... | --embedded]

``--embedded`` runs against a private redis-server with the production settings (AOF, fsync every
second) instead of ``--url``. Prints a table and writes bench/results/queue.json. Target: >= 20,000
experiences/s on loopback.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing as mp
import os
import platform
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import redis

from azr.core.experience import Experience
from azr.core.task import Role, Task, TaskType
from azr.services.config import BufferConfig, RedisConfig, StreamConfig
from azr.services.store import connect
from azr.services.store.buffers import TaskBuffer
from azr.services.store.embedded import EmbeddedRedis
from azr.services.store.experience_stream import ExperienceStream
from azr.services.store.keys import Keys

RESULTS = Path(__file__).resolve().parent / "results" / "queue.json"
PROMPT_TOKENS, RESPONSE_TOKENS = 300, 700
TARGET_PER_S = 20_000


def batches(total: int, batch: int, tag: str) -> list[list[Experience]]:
    """``total`` distinct experiences in batches; arrays are shared between batches (ids differ)."""
    rng = np.random.default_rng(0)
    base = [
        Experience(
            id=f"{tag}-0-{i}",
            run_id="bench",
            policy_version=0,
            role=tuple(Role)[i % 2],
            task_type=tuple(TaskType)[i % 3],
            prompt_ids=rng.integers(0, 150_000, PROMPT_TOKENS, dtype=np.int32),
            response_ids=rng.integers(0, 150_000, RESPONSE_TOKENS, dtype=np.int32),
            behaviour_logprobs=-rng.exponential(size=RESPONSE_TOKENS).astype(np.float32),
            reward=float(i % 2),
            reward_parts={"format": 0.0, "solve": float(i % 2)},
            task_id=f"task-{i}",
        )
        for i in range(batch)
    ]
    return [
        [dataclasses.replace(e, id=f"{tag}-{b}-{i}") for i, e in enumerate(base)]
        for b in range(total // batch)
    ]


def redis_cpu_s(client: redis.Redis) -> float:
    """CPU seconds the Redis server has used (all clients: other users of the server count too)."""
    info: dict[str, Any] = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


@dataclass(frozen=True)
class Side:
    """What a producer or consumer process needs to know (picklable, for spawn)."""

    url: str
    prefix: str
    config: StreamConfig
    total: int
    batch: int

    def stream(self, consumer: str) -> ExperienceStream:
        client = connect(RedisConfig(url=self.url, persistence="ignore"))
        return ExperienceStream(client, Keys(self.prefix), self.config, consumer)


Report: TypeAlias = "Queue[tuple[str, float]]"


def produce(side: Side, start: Event, out: Report) -> None:
    stream = side.stream("producer")
    work = batches(side.total, side.batch, "pipeline")
    start.wait()
    cpu = time.process_time()
    for chunk in work:
        stream.add(chunk)
    out.put(("producer_cpu_s", time.process_time() - cpu))


def consume(stream: ExperienceStream, total: int) -> None:
    """Read and acknowledge until ``total`` experiences were trained."""
    done = 0
    while done < total:
        got = stream.read(current_version=0)
        done += len(got)
        stream.renew(got)
        stream.ack(got)


def consume_process(side: Side, start: Event, out: Report) -> None:
    stream = side.stream("consumer")
    start.wait()
    cpu = time.process_time()
    consume(stream, side.total)
    out.put(("consumer_cpu_s", time.process_time() - cpu))
    out.put(("done", time.perf_counter()))


def alone_phases(client: redis.Redis, total: int, batch: int) -> dict[str, dict[str, float]]:
    """Producer then consumer in this process, without backpressure: each side's own cost."""
    config = StreamConfig(read_count=batch, max_pending=max(total, batch), block_ms=100)
    keys = Keys(f"azr-bench-{secrets.token_hex(4)}")
    stream = ExperienceStream(client, keys, config, consumer="alone")
    work = batches(total, batch, "alone")
    phases: dict[str, Callable[[], object]] = {
        "produce": lambda: [stream.add(chunk) for chunk in work],
        "consume": lambda: consume(stream, total),
    }
    results = {}
    try:
        for name, run in phases.items():
            wall, cpu, server = time.perf_counter(), time.process_time(), redis_cpu_s(client)
            run()
            wall, cpu, server = (
                time.perf_counter() - wall,
                time.process_time() - cpu,
                redis_cpu_s(client) - server,
            )
            results[name] = {
                "per_s": total / wall,
                "client_cpu_us": cpu / total * 1e6,
                "redis_cpu_us": server / total * 1e6,
            }
    finally:
        _clean(client, keys)
    return results


def pipeline_phase(url: str, client: redis.Redis, total: int, batch: int) -> dict[str, float]:
    """A producer process and a consumer process at once, with the default backpressure."""
    config = StreamConfig(read_count=batch, block_ms=100)
    keys = Keys(f"azr-bench-{secrets.token_hex(4)}")
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    ExperienceStream(client, keys, config)  # creates the group before either side starts
    side = Side(url, keys.prefix, config, total, batch)
    procs = [ctx.Process(target=fn, args=(side, start, out)) for fn in (produce, consume_process)]
    try:
        for p in procs:
            p.start()
        time.sleep(3.0)  # both sides import and build their data before the clock starts
        server = redis_cpu_s(client)
        began = time.perf_counter()
        start.set()
        report = dict(out.get(timeout=600) for _ in range(3))
        server = redis_cpu_s(client) - server
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
        _clean(client, keys)
    return {
        "per_s": total / (report["done"] - began),
        "client_cpu_us": (report["producer_cpu_s"] + report["consumer_cpu_s"]) / total * 1e6,
        "redis_cpu_us": server / total * 1e6,
    }


def latency_ms(call: Callable[[], object], repeats: int) -> dict[str, float]:
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        samples.append((time.perf_counter() - began) * 1000)
    p50, p99 = np.percentile(samples, [50, 99])
    return {"p50_ms": float(p50), "p99_ms": float(p99)}


def buffer_phase(client: redis.Redis, capacity: int, repeats: int) -> dict[str, dict[str, float]]:
    keys = Keys(f"azr-bench-{secrets.token_hex(4)}")
    try:
        buf = TaskBuffer(client, keys, TaskType.DEDUCTION, BufferConfig(capacity=capacity), seed=0)

        def task(i: int) -> Task:
            program = f"def f(x, y):\n    return sorted(x)[: y + {i}]"
            return Task(type=TaskType.DEDUCTION, program=program, inputs=(f"[3, 1, 2], {i}",), step=i)

        for start in range(0, capacity, 1024):
            buf.add_many([task(i) for i in range(start, min(start + 1024, capacity))])
        assert buf.size() == capacity
        fresh = iter(range(capacity, capacity + repeats))
        cursor = buf.solver_batch(64).cursor
        return {
            "sample_uniform(6)": latency_ms(lambda: buf.sample_uniform(6), repeats),
            "solver_batch(64)": latency_ms(lambda: buf.solver_batch(64, since=cursor), repeats),
            "add at cap": latency_ms(lambda: buf.add(task(next(fresh))), repeats),
        }
    finally:
        _clean(client, keys)


def _clean(client: redis.Redis, keys: Keys) -> None:
    doomed = list(client.scan_iter(match=keys.pattern(), count=1000))
    if doomed:
        client.delete(*doomed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--experiences", type=int, default=40_960)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--capacity", type=int, default=16_384)
    parser.add_argument("--repeats", type=int, default=2_000)
    parser.add_argument("--url", default=RedisConfig().url)
    parser.add_argument("--embedded", action="store_true", help="start a private redis-server with AOF")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.embedded:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="azr-bench-redis-")))
            args.url = stack.enter_context(EmbeddedRedis(directory)).url
        run(args)


def run(args: argparse.Namespace) -> None:
    total = args.experiences - args.experiences % args.batch
    client = connect(RedisConfig(url=args.url, persistence="ignore"))
    load_before = os.getloadavg()
    rates = alone_phases(client, total, args.batch)
    rates["pipeline"] = pipeline_phase(args.url, client, total, args.batch)
    latencies = buffer_phase(client, args.capacity, args.repeats)
    load_after = os.getloadavg()

    tokens = f"{PROMPT_TOKENS}+{RESPONSE_TOKENS}"
    where = "private redis-server, AOF everysec" if args.embedded else args.url
    print(f"\nexperience stream: {total} experiences of {tokens} tokens, batch {args.batch}, on {where}")
    print(f"{'phase':<10}{'experiences/s':>15}{'target':>8}{'client CPU us/exp':>19}{'Redis CPU us/exp':>18}")
    for phase, r in rates.items():
        verdict = "ok" if r["per_s"] >= TARGET_PER_S else "BELOW"
        print(
            f"{phase:<10}{r['per_s']:>15,.0f}{verdict:>8}{r['client_cpu_us']:>19.1f}{r['redis_cpu_us']:>18.1f}"
        )
    print(f"\ntask buffer: {args.capacity} tasks, {args.repeats} calls each")
    print(f"{'call':<20}{'p50 ms':>10}{'p99 ms':>10}")
    for name, lat in latencies.items():
        print(f"{name:<20}{lat['p50_ms']:>10.3f}{lat['p99_ms']:>10.3f}")
    load = f"{load_before[0]:.2f}/{load_after[0]:.2f}"
    print(f"\nload average (1 min) before/after: {load} on {os.cpu_count()} CPUs")

    info: dict[str, Any] = client.info("server")
    aof: dict[str, Any] = client.info("persistence")
    result = {
        "experiences": total,
        "tokens_per_experience": PROMPT_TOKENS + RESPONSE_TOKENS,
        "batch": args.batch,
        "stream": rates,
        "target_per_s": TARGET_PER_S,
        "buffer_capacity": args.capacity,
        "buffer_latency": latencies,
        "environment": {
            "cpus": os.cpu_count(),
            "load_avg_before": load_before,
            "load_avg_after": load_after,
            "redis_version": info.get("redis_version"),
            "redis_aof": bool(aof.get("aof_enabled")),
            "hiredis": redis.utils.HIREDIS_AVAILABLE,
            "python": platform.python_version(),
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
