"""Does self-play improve the warm start? Held-out accuracy after a fixed budget, per arm, over seeds.

Arms (each starts from the warm start built by ``azr pretrain --preset tiny``):

- ``trr++``: ``azr selfplay --preset tiny`` as shipped (Task-Relative REINFORCE++);
- ``reinforce++``: the same with one global baseline (``trainer.algo.estimator=reinforce++``);
- ``sft``: no self-play: supervised training continues on the warm-start data for the mean wall time of
  the self-play arms (the same budget in seconds);
- ``warm``: the warm start itself, evaluated once (the line to beat).

Every arm's checkpoint is scored with ``azr eval --suite heldout`` (greedy, the preset's token limit).
Reported per arm: held-out accuracy per task type (mean +- standard deviation over seeds), the format
error rate, and for self-play arms the proposer's valid-task rate and the learnability reward's mean over
the run's steps, and wall time. The learnability-vs-constant propose reward comparison needs a constant
reward setting in the roles, which the loop does not offer yet; that arm is not run.

The budget is a parameter, because one arm of the issue's size (30 minutes x 3 seeds) does not fit in a
shared 2-core machine's afternoon; the load average is recorded with the results, since other work on the
machine slows every arm.

    python -m bench.learning                          # 30 steps x 3 seeds per arm (hours on 2 cores)
    python -m bench.learning --steps 3 --seeds 1      # a short run that exercises every arm
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from azr.core.task import TaskType
from azr.executor.pool import ExecutorPool, PoolConfig
from azr.report.curves import draw, read_metrics
from azr.selfplay.rendering import PromptRenderer
from azr.services.settings import resolve
from azr.trainer.models import load_tokenizer
from azr.warmstart.build import build_warm_start
from azr.warmstart.config import WarmStartConfig
from azr.warmstart.data import build_examples
from azr.warmstart.train import SFTSchedule, tokenise, train

AZR = [sys.executable, "-c", "from azr.services.cli import main; main()"]
RESULTS = Path(__file__).resolve().parent / "results"
TYPES = [t.value for t in TaskType]


def warm_config() -> WarmStartConfig:
    """The warm start ``azr pretrain --preset tiny`` builds (same fingerprint, so the cache is shared)."""
    s = resolve("tiny", {})
    return WarmStartConfig(
        roles=s.roles,
        prompt_format=s.selfplay.prompt_format,
        executor_backend=s.executor.backend,
        executor_workers=s.executor.workers,
        allow_unisolated=s.executor.allow_unisolated,
    )


def evaluate(checkpoint: Path, out: Path) -> dict[str, Any]:
    subprocess.run(
        [*AZR, "eval", "--checkpoint", str(checkpoint), "--suite", "heldout", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def selfplay_arm(
    estimator: str, seed: int, *, steps: int, sets: list[str], warm: Path, root: Path
) -> dict[str, Any]:
    run = root / f"{estimator}-seed{seed}"
    overrides = [
        f"model={warm}",
        f"trainer.algo.estimator={estimator}",
        f"selfplay.seed={seed}",
        f"rollout.seed={seed}",
        *sets,
    ]
    started = time.perf_counter()
    subprocess.run(
        [*AZR, "selfplay", "--preset", "tiny", "--steps", str(steps), "--out", str(run), "--no-progress"]
        + [arg for item in overrides for arg in ("--set", item)],
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - started
    rows = read_metrics(run)
    valid = [statistics.fmean(r[f"propose/{t}/valid_rate"] for t in TYPES) for r in rows]
    learn = [statistics.fmean(r[f"propose/{t}/learnability_mean"] for t in TYPES) for r in rows]
    return {
        "run": str(run),
        "wall_s": wall,
        "eval": evaluate(run, run / "eval-heldout.json"),
        "valid_rate": statistics.fmean(valid) if valid else 0.0,
        "learnability_mean": statistics.fmean(learn) if learn else 0.0,
    }


def sft_arm(seed: int, seconds: float, warm: Path, root: Path) -> dict[str, Any]:
    """Continue supervised training on the warm-start data for ``seconds``."""
    config = warm_config()
    out = root / f"sft-seed{seed}"

    async def data() -> list[Any]:
        pool_config = PoolConfig(workers=config.executor_workers, allow_unisolated=config.allow_unisolated)
        async with ExecutorPool.from_config(pool_config) as pool:
            examples, _ = await build_examples(
                pool, config.roles, per_type=config.tasks_per_type, seed=config.seed
            )
            return examples

    tokenizer = load_tokenizer(str(warm))
    rows = tokenise(
        asyncio.run(data()), tokenizer, PromptRenderer(tokenizer, config.prompt_format), config.max_tokens
    )
    model = AutoModelForCausalLM.from_pretrained(str(warm), dtype=torch.float32)
    schedule = SFTSchedule(10_000, config.batch_size, False, config.lr / 2, 1, seed + 1)
    started = time.perf_counter()
    losses = train(model, rows, int(tokenizer.pad_token_id), schedule, max_seconds=seconds)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    wall = time.perf_counter() - started
    return {
        "run": str(out),
        "wall_s": wall,
        "steps": len(losses),
        "eval": evaluate(out, out / "eval-heldout.json"),
    }


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    def spread(values: list[float]) -> tuple[float, float]:
        return statistics.fmean(values), statistics.pstdev(values) if len(values) > 1 else 0.0

    out: dict[str, Any] = {}
    for t in TYPES:
        out[t] = spread([r["eval"]["by_type"][t]["pass_at_1"] for r in results])
    out["format_errors"] = spread([r["eval"]["overall"]["format_error_rate"] for r in results])
    for key in ("valid_rate", "learnability_mean", "wall_s"):
        if all(key in r for r in results):
            out[key] = spread([r[key] for r in results])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=30, help="self-play steps per run (the budget)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--arms", default="trr++,reinforce++,sft")
    parser.add_argument("--set", dest="sets", action="append", default=[], help="extra selfplay --set")
    parser.add_argument("--out", type=Path, default=Path("/tmp/azr-bench-learning"))
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    warm = build_warm_start(resolve("tiny", {}).cache_dir, warm_config()).directory
    args.out.mkdir(parents=True, exist_ok=True)
    arms: dict[str, list[dict[str, Any]]] = {
        "warm": [{"run": str(warm), "eval": evaluate(warm, args.out / "warm.json")}]
    }
    for estimator in [a for a in args.arms.split(",") if a != "sft"]:
        arms[estimator] = [
            selfplay_arm(estimator, s, steps=args.steps, sets=args.sets, warm=warm, root=args.out)
            for s in range(args.seeds)
        ]
    if "sft" in args.arms.split(","):
        walls = [r["wall_s"] for name, rs in arms.items() if name != "warm" for r in rs]
        budget = statistics.fmean(walls) if walls else 60.0
        arms["sft"] = [sft_arm(s, budget, warm, args.out) for s in range(args.seeds)]
    summary = {name: summarise(rs) for name, rs in arms.items()}
    runs = [Path(r["run"]) for name, rs in arms.items() if name not in ("warm", "sft") for r in rs]
    charts = draw(runs, RESULTS / "learning") if runs else []
    print(
        f"held-out accuracy after {args.steps} self-play steps ({args.seeds} seeds; load {load_before:.1f})"
    )
    print(
        f"{'arm':<12}"
        + "".join(f"{t:>16}" for t in TYPES)
        + f"{'format err':>14}{'valid':>14}{'learnab.':>14}{'wall s':>10}"
    )
    for name, s in summary.items():
        cells = "".join(f"{s[t][0]:>9.3f}+-{s[t][1]:<5.3f}" for t in TYPES)
        extra = "".join(
            f"{s[k][0]:>9.3f}+-{s[k][1]:<3.2f}" if k in s else f"{'-':>14}"
            for k in ("format_errors", "valid_rate", "learnability_mean")
        )
        wall = f"{s['wall_s'][0]:>10.0f}" if "wall_s" in s else f"{'-':>10}"
        print(f"{name:<12}{cells}{extra}{wall}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "learning.json"
    path.write_text(
        json.dumps(
            {
                "args": {k: str(v) for k, v in vars(args).items()},
                "load_before": load_before,
                "summary": summary,
                "arms": arms,
                "charts": [str(c) for c in charts],
            },
            indent=1,
        )
    )
    print(f"results: {path}")
    for chart in charts:
        print(f"chart: {chart}")


if __name__ == "__main__":
    main()
