"""Executor throughput: validations per second over the benchmark corpus, isolated, against a naive baseline.

Modes, all over the same corpus (``bench/corpus.py``) in one run:

- ``isolated-wN``: ``ExecutorPool`` with N workers and the static gate; each validation runs the program
  under its hash seeds inside the backend's sandbox (two; all ten for the tasks that may iterate a set,
  37 of the 600), with the parent re-parsing every output.
- ``naive``: what a straightforward harness does: one ``python -c`` subprocess per run, two runs per
  validation (``PYTHONHASHSEED`` 1 and 2), outputs compared as ``repr`` texts; as many subprocesses at
  once as there are cores. No sandbox, no gate, no re-parsing.

With ``--backend docker`` the run ends with ``bench.executor_docker``: the per-job round trip through the
warm pool against ``docker exec`` and ``docker run`` per job, and throughput with 2 workers.

The isolated modes pass over the corpus ``--rounds`` times (default 3) through one pool, so that a rate
is measured over several seconds; the naive mode, at about 15 s a pass, makes one.

Latency is per job: from when the pool takes a job up to its result. The machine's load average is
recorded, since other work on the host skews every number here. ``bench/results/executor.json`` keeps
the latest report of each backend under its name.

    python -m bench.executor                 # full corpus (600 programs), 1 and 2 workers
    python -m bench.executor --limit 100     # quick run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.table import Table

from azr.core.task import Task
from azr.executor.errors import ExecutorError
from azr.executor.jobs import Job, JobOp
from azr.executor.pool import ExecutorPool
from bench.corpus import corpus

RESULTS = Path(__file__).parent / "results" / "executor.json"
NAIVE_TIMEOUT_S = 5.0

_NAIVE_RUNNER = """
import ast, json, sys
job = json.load(sys.stdin)
namespace = {}
exec(job["program"], namespace)
outputs = []
for text in job["inputs"]:
    try:
        outputs.append(repr(namespace["f"](*ast.literal_eval("(" + text + ",)"))))
    except Exception as exc:
        outputs.append("error: " + type(exc).__name__)
print(json.dumps(outputs))
"""


@dataclass
class ModeResult:
    mode: str
    workers: int
    tasks: int
    elapsed_s: float
    validations_per_s: float
    p50_ms: float
    p99_ms: float
    valid: int
    parent_cpu_ms: float
    """CPU time of this (the trusted parent) process per validation: judge, gate, parsing, event loop."""
    errors: dict[str, int] = field(default_factory=dict)


def _summarise(
    mode: str,
    *,
    workers: int,
    elapsed_s: float,
    cpu_s: float,
    latencies_ms: list[float],
    errors: Counter[str],
) -> ModeResult:
    ordered = sorted(latencies_ms)
    return ModeResult(
        mode=mode,
        workers=workers,
        tasks=len(ordered),
        elapsed_s=round(elapsed_s, 3),
        validations_per_s=round(len(ordered) / elapsed_s, 1),
        p50_ms=round(statistics.median(ordered), 2),
        p99_ms=round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
        valid=len(ordered) - sum(errors.values()),
        parent_cpu_ms=round(cpu_s * 1000 / len(ordered), 2),
        errors=dict(errors),
    )


async def bench_pool(
    tasks: list[Task],
    backend: Literal["local", "docker"],
    workers: int,
    allow_unisolated: bool,
    rounds: int = 1,
) -> tuple[ModeResult, dict[str, object]]:
    jobs = [Job(id=str(i), op=JobOp.VALIDATE, task=task) for i, task in enumerate(tasks * rounds)]
    async with ExecutorPool.create(backend, workers=workers, allow_unisolated=allow_unisolated) as pool:
        latencies: list[float] = []
        errors: Counter[str] = Counter()
        started, cpu_started = time.perf_counter(), time.process_time()
        async for result in pool.map(jobs):
            latencies.append(result.elapsed_ms)
            if result.error is not None:
                errors[result.error.code.value] += 1
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        isolation = asdict(pool.isolation) | {"full": pool.isolation.full}
    return _summarise(
        f"isolated-w{workers}",
        workers=workers,
        elapsed_s=elapsed,
        cpu_s=cpu,
        latencies_ms=latencies,
        errors=errors,
    ), isolation


async def bench_naive(tasks: list[Task], concurrency: int) -> ModeResult:
    slots = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    errors: Counter[str] = Counter()

    async def validate(task: Task) -> None:
        async with slots:
            started = time.perf_counter()
            first, second = [await _naive_run(task, seed) for seed in ("1", "2")]
            latencies.append((time.perf_counter() - started) * 1000)
        if first is None or second is None or any(o.startswith("error:") for o in first):
            errors["error"] += 1
        elif first != second:
            errors["nondeterministic"] += 1

    started, cpu_started = time.perf_counter(), time.process_time()
    await asyncio.gather(*(validate(task) for task in tasks))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return _summarise(
        "naive", workers=concurrency, elapsed_s=elapsed, cpu_s=cpu, latencies_ms=latencies, errors=errors
    )


async def _naive_run(task: Task, hash_seed: str) -> list[str] | None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _NAIVE_RUNNER,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={"PYTHONHASHSEED": hash_seed, "PATH": os.environ.get("PATH", "")},
    )
    payload = json.dumps({"program": task.program, "inputs": list(task.inputs)}).encode()
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(payload), NAIVE_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        return None
    if process.returncode != 0:
        return None
    outputs: list[str] = json.loads(stdout)
    return outputs


def _table(results: list[ModeResult], load: tuple[float, float, float]) -> Table:
    table = Table(title=f"Executor validations over the corpus (load average {load[0]:.2f} at start)")
    columns = (
        "mode",
        "workers",
        "validations",
        "valid",
        "validations/s",
        "p50 ms",
        "p99 ms",
        "parent cpu ms",
        "elapsed s",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "mode" else "right")
    for r in results:
        table.add_row(
            r.mode,
            str(r.workers),
            str(r.tasks),
            str(r.valid),
            f"{r.validations_per_s:.1f}",
            f"{r.p50_ms:.1f}",
            f"{r.p99_ms:.1f}",
            f"{r.parent_cpu_ms:.2f}",
            f"{r.elapsed_s:.2f}",
        )
    return table


async def main(args: argparse.Namespace) -> None:
    tasks = corpus(n=args.limit) if args.limit else corpus()
    load_start = os.getloadavg()
    results: list[ModeResult] = []
    isolation: dict[str, object] = {}
    for workers in args.workers:
        result, isolation = await bench_pool(
            tasks, args.backend, workers, args.allow_unisolated, rounds=args.rounds
        )
        results.append(result)
    naive = await bench_naive(tasks, concurrency=max(args.workers))
    results.append(naive)
    best = max(r.validations_per_s for r in results if r.mode != "naive")
    report = {
        "backend": args.backend,
        "tasks": len(tasks),
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "isolation": isolation,
        "modes": [asdict(r) for r in results],
        "speedup_vs_naive": round(best / naive.validations_per_s, 1),
    }
    console = Console(width=120)
    console.print(_table(results, load_start))
    console.print(
        f"best isolated: {best:.1f} validations/s, {report['speedup_vs_naive']}x the naive baseline; "
        f"load average {load_start[0]:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus"
    )
    _save(args.backend, report)
    console.print(f"wrote {RESULTS} ({args.backend})")
    if args.backend == "docker":
        from bench import executor_docker

        console.print("per-job round trips: warm pool against docker exec and docker run")
        await executor_docker.main(executor_docker.parse_args([]))


def _save(backend: str, report: dict[str, object]) -> None:
    """Keep the latest report of each backend side by side in one file."""
    previous: dict[str, object] = {}
    if RESULTS.is_file():
        with contextlib.suppress(ValueError):
            loaded = json.loads(RESULTS.read_text())
            previous = loaded if isinstance(loaded, dict) and "modes" not in loaded else {}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({**previous, backend: report}, indent=2) + "\n")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("local", "docker"), default="local")
    parser.add_argument("--limit", type=int, default=0, help="use the first N corpus programs (0: all)")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="worker counts to measure (default: 1 2)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="passes over the corpus in each isolated mode, for steadier rates (the naive mode makes one)",
    )
    parser.add_argument(
        "--allow-unisolated", action="store_true", help="run where full isolation is unavailable"
    )
    return parser.parse_args()


if __name__ == "__main__":
    try:
        asyncio.run(main(_parse_args()))
    except (ExecutorError, ImportError, OSError, RuntimeError) as exc:
        sys.exit(f"the executor could not start: {exc}")
