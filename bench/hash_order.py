"""Hash-order dependence: how often a set-order-dependent task slips through validation, and at what cost.

Every task here returns the iteration order of a small set of short random strings, so every one of
them is nondeterministic across interpreters; a task that validates as ``ok`` is a miss. Two kinds:

- ``input-set``: ``def f(s): return list(s)`` called with the set as its input;
- ``built-set``: the program builds the set itself (``list({'ab', 'cd'})``).

For each task the report also says whether the two fixed seeds of the earlier design (slots A and B)
would have missed it, by comparing what the backend returns in those two slots. The cost is the mean
validation latency of these tasks (every seed of the pool) against the same number of set-free tasks (two).

    python -m bench.hash_order               # 400 tasks of 2 to 5 strings
    python -m bench.hash_order --tasks 100   # quick run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import string
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from azr.core.task import Task, TaskType
from azr.executor.backends.local import LocalBackend
from azr.executor.errors import ErrorCode
from azr.executor.hash_order import BASE_RUNS, SET_RUNS
from azr.executor.pool import ExecutorPool
from azr.executor.sandbox.records import HashSeedSlot, RunRequest

RESULTS = Path(__file__).parent / "results" / "hash_order.json"


@dataclass
class Row:
    kind: str
    set_size: int
    tasks: int
    missed: int
    missed_by_two_fixed_seeds: int

    @property
    def miss_rate(self) -> float:
        return self.missed / self.tasks

    @property
    def two_seed_miss_rate(self) -> float:
        return self.missed_by_two_fixed_seeds / self.tasks


def _words(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(1, 6))))
    return sorted(words)


def _task(kind: str, words: list[str]) -> Task:
    literal = "{" + ", ".join(repr(w) for w in words) + "}"
    if kind == "input-set":
        return Task(TaskType.DEDUCTION, "def f(s):\n    return list(s)", (literal,))
    return Task(TaskType.DEDUCTION, f"def f(x):\n    return list({literal})", ("0",))


async def _two_seed_miss(backend: LocalBackend, task: Task) -> bool:
    a, b = await asyncio.gather(
        *(
            backend.run(RunRequest(task.program, task.inputs, slot=s))
            for s in (HashSeedSlot.A, HashSeedSlot.B)
        )
    )
    return a.calls == b.calls


async def _latency_ms(pool: ExecutorPool, tasks: list[Task]) -> float:
    """Median validation latency, one task at a time (so runs of one task do not queue behind another's)."""
    times = []
    for task in tasks:
        started = time.perf_counter()
        await pool.validate(task)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    backend = LocalBackend(workers=1)
    rows: list[Row] = []
    async with ExecutorPool(backend, max_in_flight=2, owns_backend=True) as pool:
        for kind in ("input-set", "built-set"):
            for size in range(2, 6):
                tasks = [_task(kind, _words(rng, size)) for _ in range(args.tasks // 8)]
                validations = await asyncio.gather(*(pool.validate(t) for t in tasks))
                for v in validations:
                    assert v.error is None or v.error.code is ErrorCode.NONDETERMINISTIC, v.error
                two_seed = await asyncio.gather(*(_two_seed_miss(backend, t) for t in tasks))
                missed = sum(v.ok for v in validations)
                rows.append(Row(kind, size, len(tasks), missed, sum(two_seed)))
        cost_tasks = [_task("input-set", _words(rng, 3)) for _ in range(args.cost_tasks)]
        plain_tasks = [
            Task(TaskType.DEDUCTION, "def f(s):\n    return sorted(s)", (repr(_words(rng, 3)),))
            for _ in range(args.cost_tasks)
        ]
        set_ms = await _latency_ms(pool, cost_tasks)
        plain_ms = await _latency_ms(pool, plain_tasks)
    total = sum(r.tasks for r in rows)
    missed = sum(r.missed for r in rows)
    two_seed_missed = sum(r.missed_by_two_fixed_seeds for r in rows)
    report = {
        "tasks": total,
        "miss_rate": missed / total,
        "two_fixed_seeds_miss_rate": two_seed_missed / total,
        "runs_per_set_task": SET_RUNS,
        "runs_per_other_task": BASE_RUNS,
        "median_validation_ms_set_task": set_ms,
        "median_validation_ms_other_task": plain_ms,
        "rows": [asdict(r) | {"miss_rate": r.miss_rate} for r in rows],
    }
    console = Console()
    table = Table(title=f"hash-order misses over {total} set-order-dependent tasks (workers=1)")
    for column in ("kind", "strings", "tasks", f"missed ({SET_RUNS} seeds)", "missed (seeds 1, 2)"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r.kind, str(r.set_size), str(r.tasks), f"{r.miss_rate:.1%}", f"{r.two_seed_miss_rate:.1%}"
        )
    table.add_row(
        "all", "", str(total), f"{missed / total:.2%}", f"{two_seed_missed / total:.1%}", style="bold"
    )
    console.print(table)
    console.print(
        f"cost: median validation {set_ms:.1f} ms for a set task ({SET_RUNS} runs) vs "
        f"{plain_ms:.1f} ms for a set-free task ({BASE_RUNS} runs)"
    )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", type=int, default=400, help="set-order-dependent tasks in all (default 400)"
    )
    parser.add_argument(
        "--cost-tasks", type=int, default=30, help="tasks per kind for the latency comparison"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random word sets")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_parse_args()))
