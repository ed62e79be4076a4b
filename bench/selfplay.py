"""Self-play step time on the tiny preset: where the time goes, and async against sync.

    python -m bench.selfplay [--steps 6] [--batch-size 4] [--max-new-tokens 96] [--model DIR]

Runs ``azr selfplay`` twice in this process (Ray, a private Redis, the local executor, the tiny model):
once synchronous (``max_staleness`` 0) and once asynchronous (``max_staleness`` 1), and reads each run's
metrics.jsonl. The first step of each run (Ray and model start-up, first DeepSpeed use) is left out of
the means. Prints a table and writes bench/results/selfplay.json.

What each column is, per step (means):
- generate: the rollout workers sampling (proposals; learnability rollouts and answers);
- execute: the executor validating proposals and checking answers;
- store: buffer reads and writes and the experience stream's add (the round's side);
- train / publish: the learner's optimizer work and writing the weights for the workers;
- step: wall time between two finished steps (in async mode rounds and training overlap).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from azr.services.actors.driver import run_selfplay
from azr.services.run_dir import RunDirectory
from azr.services.settings import resolve

RESULTS = Path(__file__).parent / "results" / "selfplay.json"
PARTS = (
    "perf/generate_propose_s",
    "perf/generate_solve_s",
    "perf/execute_s",
    "perf/store_s",
    "perf/train_s",
    "perf/publish_s",
)


def run(mode: str, steps: int, batch_size: int, max_new_tokens: int, model: str) -> list[dict[str, float]]:
    overrides: dict[str, Any] = {
        "model": model,
        "selfplay": {"steps": steps, "batch_size": batch_size, "max_staleness": 0 if mode == "sync" else 1},
        "rollout": {"max_new_tokens": max_new_tokens},
        "trainer": {"checkpoint_interval": 10_000},
    }
    with tempfile.TemporaryDirectory(prefix=f"azr-bench-{mode}-") as tmp:
        run_dir = RunDirectory(Path(tmp))
        run_selfplay(resolve("tiny", overrides), run_dir, progress=False)
        lines = run_dir.metrics.read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def summarise(steps: list[dict[str, float]]) -> dict[str, float]:
    warm = steps[1:] or steps
    out = {
        key: statistics.fmean(s[key] for s in warm) for key in (*PARTS, "perf/step_s", "perf/tokens_per_s")
    }
    overhead = out["perf/execute_s"] + out["perf/store_s"] + out["perf/publish_s"]
    out["overhead_share"] = overhead / out["perf/step_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument(
        "--model",
        default="tiny",
        help='"tiny" (random weights: almost every response is malformed, so the executor has little to '
        "do) or a model directory such as the warm start that `azr pretrain` builds",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    results = {
        mode: summarise(run(mode, args.steps, args.batch_size, args.max_new_tokens, args.model))
        for mode in ("sync", "async")
    }
    table = Table(
        title=f"self-play step on the tiny preset (B={args.batch_size}, {args.max_new_tokens} new tokens)"
    )
    table.add_column("mode")
    for name in (*(p.removeprefix("perf/") for p in PARTS), "step_s", "exec+store+publish", "train tok/s"):
        table.add_column(name, justify="right")
    for mode, r in results.items():
        table.add_row(
            mode,
            *(f"{r[p]:.2f}" for p in PARTS),
            f"{r['perf/step_s']:.2f}",
            f"{100 * r['overhead_share']:.1f}%",
            f"{r['perf/tokens_per_s']:.0f}",
        )
    console = Console(width=160)  # the table is wide; never fold its column names
    console.print(table)
    ratio = results["async"]["perf/step_s"] / results["sync"]["perf/step_s"]
    console.print(f"async / sync step time: {ratio:.2f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps({"args": vars(args), "results": results, "async_over_sync": ratio}, indent=2)
    )
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
