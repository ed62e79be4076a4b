"""Docker backend: what one job costs through the warm pool, against ``docker exec`` and ``docker run``.

Modes, measured in one run against the same engine and image, each job calling ``f`` once:

- ``warm-pool``: ``DockerBackend.run`` on a started pool: one frame to a running supervisor, one fork.
- ``docker-exec``: a fresh ``python3`` started per job with ``docker exec`` in an already running
  (equally hardened) sandbox container, through the engine API.
- ``docker-run``: a fresh hardened container per job (create, start, wait, remove).
- ``throughput-w2``: jobs per second through a pool of 2 containers per slot, 4 jobs in flight.
- ``validate-w2``: corpus validations through ``ExecutorPool`` with 2 workers (gate, both slots,
  re-parsing), 4 in flight.

Latency is the wall time of one job from the parent's side. The machine's load average is recorded:
other work on the host skews every number here.

    python -m bench.executor_docker                  # defaults: 300 / 30 / 10 jobs
    python -m bench.executor_docker --quick          # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from azr.executor.backends.base import HashSeedSlot, RunRequest
from azr.executor.backends.docker import DockerBackend
from azr.executor.backends.docker_container import ContainerSpec, container_options
from azr.executor.pool import ExecutorPool
from bench.corpus import corpus

RESULTS = Path(__file__).parent / "results" / "executor_docker.json"
PROGRAM = "def f(x):\n    return [x, x + 1]"
_ONE_SHOT = "import sys\nnamespace = {}\nexec(sys.argv[1], namespace)\nprint(repr(namespace['f'](3)))"


@dataclass
class Mode:
    mode: str
    jobs: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    jobs_per_s: float


def _summary(mode: str, latencies_s: list[float], wall_s: float) -> Mode:
    ordered = sorted(latencies_s)
    p99_index = min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))
    return Mode(
        mode=mode,
        jobs=len(ordered),
        p50_ms=statistics.median(ordered) * 1000,
        p99_ms=ordered[p99_index] * 1000,
        mean_ms=statistics.fmean(ordered) * 1000,
        jobs_per_s=len(ordered) / wall_s,
    )


async def _timed(mode: str, n: int, job: Callable[[], Awaitable[None]]) -> Mode:
    latencies: list[float] = []
    started = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        await job()
        latencies.append(time.perf_counter() - t0)
    return _summary(mode, latencies, time.perf_counter() - started)


async def bench_warm_pool(backend: DockerBackend, n: int) -> Mode:
    request = RunRequest(PROGRAM, ("3",))

    async def job() -> None:
        outcome = await backend.run(request)
        assert outcome.calls[0].output == "[3, 4]", outcome

    await job()  # warm-up
    return await _timed("warm-pool", n, job)


def _one_shot_spec(backend: DockerBackend) -> dict[str, Any]:
    """The pool's hardening, for a container that runs ``python3`` directly instead of the supervisor."""
    spec = ContainerSpec(
        image=backend.image,
        memory_bytes=640 * 1024**2,
        nano_cpus=10**9,
        pids_limit=32,
        tmpfs_bytes=32 * 1024**2,
        runtime=None,
        seccomp_profile=None,
        labels=(("org.azr.sandbox", "1"), ("org.azr.sandbox.pool", "bench")),
    )
    options = container_options(spec, HashSeedSlot.A)
    options.update(stdin_open=False, detach=True)
    return options


async def bench_exec(client: Any, backend: DockerBackend, n: int) -> Mode:
    options = _one_shot_spec(backend)
    container = client.containers.create(
        entrypoint=["python3", "-c", "import time; time.sleep(3600)"], **options
    )
    container.start()
    try:

        def job_sync() -> None:
            exec_id = client.api.exec_create(container.id, ["python3", "-c", _ONE_SHOT, PROGRAM])["Id"]
            output = client.api.exec_start(exec_id)
            assert output.strip() == b"[3, 4]", output

        async def job() -> None:
            await asyncio.to_thread(job_sync)

        await job()
        return await _timed("docker-exec", n, job)
    finally:
        container.remove(force=True)


async def bench_run(client: Any, backend: DockerBackend, n: int) -> Mode:
    import docker.types

    options = _one_shot_spec(backend)
    options["log_config"] = docker.types.LogConfig(type="json-file")  # the output is read from the logs

    def job_sync() -> None:
        container = client.containers.create(entrypoint=["python3", "-c", _ONE_SHOT, PROGRAM], **options)
        try:
            container.start()
            container.wait()
            assert container.logs().strip() == b"[3, 4]"
        finally:
            container.remove(force=True)

    async def job() -> None:
        await asyncio.to_thread(job_sync)

    await job()
    return await _timed("docker-run", n, job)


async def bench_throughput(n: int) -> Mode:
    async with DockerBackend(2) as backend:
        request = RunRequest(PROGRAM, ("3",))
        latencies: list[float] = []
        gate = asyncio.Semaphore(4)

        async def job() -> None:
            async with gate:
                t0 = time.perf_counter()
                await backend.run(request)
                latencies.append(time.perf_counter() - t0)

        started = time.perf_counter()
        await asyncio.gather(*(job() for _ in range(n)))
        return _summary("throughput-w2", latencies, time.perf_counter() - started)


async def bench_validate(n: int) -> Mode:
    tasks = corpus(n)
    async with ExecutorPool.create("docker", workers=2) as pool:
        latencies: list[float] = []
        gate = asyncio.Semaphore(4)  # as many as the pool runs at once, so latency excludes queueing

        async def validate(task: Any) -> None:
            async with gate:
                t0 = time.perf_counter()
                await pool.validate(task)
                latencies.append(time.perf_counter() - t0)

        started = time.perf_counter()
        await asyncio.gather(*(validate(task) for task in tasks))
        return _summary("validate-w2", latencies, time.perf_counter() - started)


async def main(args: argparse.Namespace) -> None:
    import docker.client

    client = docker.client.from_env()
    load_before = os.getloadavg()
    async with DockerBackend(1) as backend:
        modes = [
            await bench_warm_pool(backend, args.pool_jobs),
            await bench_exec(client, backend, args.exec_jobs),
            await bench_run(client, backend, args.run_jobs),
        ]
        image = backend.image
    modes.append(await bench_throughput(args.pool_jobs * 2))
    modes.append(await bench_validate(args.validations))
    client.close()
    print(f"{'mode':<15}{'jobs':>6}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'jobs/s':>10}")
    for m in modes:
        print(
            f"{m.mode:<15}{m.jobs:>6}{m.p50_ms:>10.2f}{m.p99_ms:>10.2f}{m.mean_ms:>10.2f}{m.jobs_per_s:>10.1f}"
        )
    load_after = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f}, after: {load_after[0]:.2f} on {os.cpu_count()} cores")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "image": image,
        "cores": os.cpu_count(),
        "load_average": {"before": load_before, "after": load_after},
        "modes": [asdict(m) for m in modes],
    }
    RESULTS.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {RESULTS}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options from ``argv`` (the command line when ``None``; ``[]`` gives the defaults)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pool-jobs", type=int, default=300, help="jobs through the warm pool")
    parser.add_argument("--exec-jobs", type=int, default=30, help="jobs with one docker exec each")
    parser.add_argument("--run-jobs", type=int, default=10, help="jobs with one docker run each")
    parser.add_argument("--validations", type=int, default=120, help="corpus tasks validated with 2 workers")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 40 / 5 / 3 jobs, 30 validations")
    args = parser.parse_args(argv)
    if args.quick:
        args.pool_jobs, args.exec_jobs, args.run_jobs, args.validations = 40, 5, 3, 30
    return args


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
