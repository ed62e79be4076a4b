"""Benchmark of the REST API: latency of GET /v1/stats and GET /v1/tasks under 50 concurrent clients,
and seeds accepted per second.

The store is filled as a long run leaves it: 16,384 tasks per type and 10,000 steps of metrics records
(the keys the self-play loop publishes). ``azr api`` runs as its own process (one uvicorn worker, the
in-process executor pool); the clients run in this process on asyncio, so on a small machine they
compete with the server for the CPUs, and the numbers are an upper bound on what a remote client sees.

- stats: GET /v1/stats (gzip accepted, as browsers do);
- stats live: the same while a new metrics record arrives every ``--step-interval-s`` (each one makes the
  API rebuild its snapshot, as during a run);
- tasks: GET /v1/tasks?limit=50 (the newest page), and tasks filtered: origin=user&type=abduction
  (a sparse filter, which reads up to ``tasks_scan_limit`` entries);
- seeds: distinct valid seeds posted one per request by 8 clients, each validated by the executor.

Each row gives the latency the clients saw (queueing on the host included) and the time spent inside
the application (its ``Server-Timing`` header), which a crowded machine inflates far less.

    .venv/bin/python -m bench.api [--clients 50] [--requests 2000] [--seeds 200] [--url redis://...]

Prints a table and writes bench/results/api.json. Target: GET /v1/stats p99 under 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

import httpx
import numpy as np
import redis

from azr.core.task import Origin, Task, TaskType
from azr.services.config import RedisConfig
from azr.services.store import connect
from azr.services.store.buffers import TaskBuffers
from azr.services.store.keys import Keys
from azr.services.store.metrics import MetricsStream

RESULTS = Path(__file__).resolve().parent / "results" / "api.json"
SERVER_LOG = RESULTS.with_name("api-server.log")
TARGET_STATS_P99_MS = 50.0
TASKS_PER_TYPE = 16_384
STEPS = 10_000


def step_values(step: int, rng: np.random.Generator) -> dict[str, float]:
    """A metrics record with the keys the self-play loop publishes (values are noise around a trend)."""
    values: dict[str, float] = {"step": step, "policy_version": step, "time_s": 4.0 * step}
    for t in TaskType:
        for name in ("valid_rate", "reward_mean", "learnability_mean", "complexity_mean"):
            values[f"propose/{t.value}/{name}"] = float(rng.random())
        values[f"solve/{t.value}/accuracy"] = float(rng.random())
        values[f"solve/{t.value}/reward_mean"] = float(rng.random())
        values[f"buffer/{t.value}/size"] = float(TASKS_PER_TYPE)
    for code in ("syntax_error", "timeout", "runtime_error", "forbidden"):
        values[f"executor/errors/{code}"] = float(rng.integers(0, 5))
    for name in ("pg_loss", "entropy", "kl", "clip_frac", "grad_norm"):
        values[f"train/{name}"] = float(rng.random())
    for name in ("tokens_per_s", "step_s", "generate_s", "execute_s", "train_s", "publish_s"):
        values[f"perf/{name}"] = float(rng.random())
    values |= {"perf/trainer_idle_ratio": 0.2, "batch/staleness_max": 1.0, "response/length_mean": 300.0}
    return values


def fill(client: redis.Redis, keys: Keys) -> None:
    buffers = TaskBuffers(client, keys)
    for task_type in TaskType:
        for start in range(0, TASKS_PER_TYPE, 1_024):
            buffers[task_type].add_many(
                Task(
                    type=task_type,
                    program=f"def f(x):\n    return x * {i % 97} + {i}",
                    inputs=(f"{i}", f"{i + 1}"),
                    outputs=(f"{i * (i % 97) + i}", f"{(i + 1) * (i % 97) + i}"),
                    message="multiply and add" if task_type is TaskType.INDUCTION else "",
                    origin=Origin.USER if i % 1_000 == 0 else Origin.PROPOSED,
                    step=i * STEPS // TASKS_PER_TYPE,
                )
                for i in range(start, min(start + 1_024, TASKS_PER_TYPE))
            )
    rng = np.random.default_rng(0)
    stream = MetricsStream(client, keys)
    for step in range(STEPS):
        stream.publish(step, step_values(step, rng))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_api(redis_url: str, keys: Keys, port: int, log: BinaryIO) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AZR_API_")}
    env |= {
        "AZR_API_REDIS_URL": redis_url,
        "AZR_API_REDIS_PREFIX": keys.prefix,
        "AZR_API_SEED_RATE_PER_S": "10000",
        "AZR_API_SEED_BURST": "10000",
        "AZR_API_EXECUTOR_WORKERS": "2",
    }
    command = [str(Path(sys.executable).with_name("azr")), "api", "--port", str(port), "--allow-unisolated"]
    command += ["--log-level", "warning"]
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("azr api did not become ready in 120 s")


async def load(base: str, path: str, clients: int, requests: int) -> dict[str, float]:
    """``requests`` GETs of ``path`` spread over ``clients`` concurrent connections; latency per request."""
    latencies: list[float] = []
    in_app: list[float] = []
    per_client = requests // clients
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as http:

        async def client() -> None:
            for _ in range(per_client):
                started = time.perf_counter()
                reply = await http.get(path)
                await reply.aread()
                latencies.append((time.perf_counter() - started) * 1000)
                reply.raise_for_status()
                in_app.append(float(reply.headers["server-timing"].partition("dur=")[2]))

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        elapsed_s = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "p50_ms": float(np.percentile(latencies, 50)),
        "p99_ms": float(np.percentile(latencies, 99)),
        "app_p50_ms": float(np.percentile(in_app, 50)),
        "app_p99_ms": float(np.percentile(in_app, 99)),
        "per_s": len(latencies) / elapsed_s,
    }


async def seeds(base: str, count: int, clients: int = 8) -> dict[str, float]:
    tag = secrets.token_hex(3)
    bodies = [
        {"type": "deduction", "program": f"def f(x):\n    return x * {i} + 0x{tag}", "inputs": [str(i)]}
        for i in range(count)
    ]
    statuses: list[int] = []
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:

        async def client(share: list[dict[str, Any]]) -> None:
            for body in share:
                statuses.append((await http.post("/v1/seeds", json=body)).status_code)

        started = time.perf_counter()
        await asyncio.gather(*(client(bodies[i::clients]) for i in range(clients)))
        elapsed_s = time.perf_counter() - started
    accepted = statuses.count(201)
    return {"submitted": count, "accepted": accepted, "per_s": accepted / elapsed_s}


def publish_steps(client: redis.Redis, keys: Keys, interval_s: float, stop: threading.Event) -> None:
    rng = np.random.default_rng(1)
    stream = MetricsStream(client, keys)
    step = STEPS
    while not stop.wait(interval_s):
        stream.publish(step, step_values(step, rng))
        step += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--step-interval-s", type=float, default=1.0)
    parser.add_argument("--url", default=RedisConfig().url)
    args = parser.parse_args()

    keys = Keys(f"azr-bench-api-{secrets.token_hex(4)}")
    client = connect(RedisConfig(url=args.url, prefix=keys.prefix, persistence="ignore"))
    load_before = os.getloadavg()
    try:
        started = time.perf_counter()
        fill(client, keys)
        fill_s = time.perf_counter() - started
        result = measure(args, client, keys)
    finally:
        doomed = list(client.scan_iter(match=keys.pattern(), count=1000))
        if doomed:
            client.delete(*doomed)
    result["fill_s"] = fill_s
    result["environment"] = {
        "cpus": os.cpu_count(),
        "load_avg_before": load_before,
        "load_avg_after": os.getloadavg(),
        "python": platform.python_version(),
    }
    report(result)


def measure(args: argparse.Namespace, client: redis.Redis, keys: Keys) -> dict[str, Any]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    SERVER_LOG.parent.mkdir(parents=True, exist_ok=True)
    with SERVER_LOG.open("wb") as log:
        return _measure(args, client, keys, start_api(args.url, keys, port, log), base)


def _measure(
    args: argparse.Namespace, client: redis.Redis, keys: Keys, process: subprocess.Popen[bytes], base: str
) -> dict[str, Any]:
    try:
        first = httpx.get(f"{base}/v1/stats", timeout=60).json()
        assert first["steps_seen"] >= STEPS, "the API had not read the metrics at start"
        rows: dict[str, dict[str, float]] = {}
        rows["GET /v1/stats"] = asyncio.run(load(base, "/v1/stats", args.clients, args.requests))
        stop = threading.Event()
        publisher = threading.Thread(target=publish_steps, args=(client, keys, args.step_interval_s, stop))
        publisher.start()
        try:
            rows["GET /v1/stats (live)"] = asyncio.run(load(base, "/v1/stats", args.clients, args.requests))
        finally:
            stop.set()
            publisher.join()
        rows["GET /v1/tasks"] = asyncio.run(load(base, "/v1/tasks?limit=50", args.clients, args.requests))
        sparse = "/v1/tasks?limit=50&origin=user&type=abduction"
        rows["GET /v1/tasks (filtered)"] = asyncio.run(load(base, sparse, args.clients, args.requests))
        seed_rate = asyncio.run(seeds(base, args.seeds))
        stats_bytes = len(httpx.get(f"{base}/v1/stats", timeout=60).content)
    except httpx.TransportError as exc:
        raise RuntimeError(
            f"the API failed (exit status {process.poll()}; see {SERVER_LOG}): {exc!r}"
        ) from exc
    finally:
        process.terminate()
        process.wait(timeout=30)
    return {
        "tasks_per_type": TASKS_PER_TYPE,
        "steps": STEPS,
        "clients": args.clients,
        "latency": rows,
        "target_stats_p99_ms": TARGET_STATS_P99_MS,
        "seeds": seed_rate,
        "stats_body_bytes": stats_bytes,
        "step_interval_s": args.step_interval_s,
    }


def report(result: dict[str, Any]) -> None:
    rows: dict[str, dict[str, float]] = result["latency"]
    print(f"\nAPI: {TASKS_PER_TYPE} tasks per type, {STEPS} steps of metrics, {result['clients']} clients")
    print(f"{'request':<26}{'requests':>9}{'p50 ms':>9}{'p99 ms':>9}{'app p50':>9}{'app p99':>9}{'req/s':>7}")
    for name, r in rows.items():
        print(
            f"{name:<26}{r['requests']:>9.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}"
            f"{r['app_p50_ms']:>9.2f}{r['app_p99_ms']:>9.2f}{r['per_s']:>7.0f}"
        )
    print("(p50/p99: as the clients saw it, queueing included; app: time inside the API, Server-Timing)")
    verdict = "ok" if rows["GET /v1/stats"]["p99_ms"] < TARGET_STATS_P99_MS else "ABOVE TARGET"
    print(f"target: GET /v1/stats p99 < {TARGET_STATS_P99_MS:.0f} ms: {verdict}")
    seed_rate = result["seeds"]
    print(f"seeds: {seed_rate['accepted']:.0f}/{seed_rate['submitted']} accepted, {seed_rate['per_s']:.1f}/s")
    print(
        f"stats body: {result['stats_body_bytes'] / 1024:.0f} KiB; store filled in {result['fill_s']:.1f} s"
    )
    env = result["environment"]
    before, after = env["load_avg_before"][0], env["load_avg_after"][0]
    print(f"load average (1 min) before/after: {before:.2f}/{after:.2f} on {env['cpus']} CPUs")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
