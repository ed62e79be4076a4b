"""Does self-play improve the warm start? Held-out accuracy after a fixed time budget, per arm, over seeds.

Two parts, both starting from the tiny preset's warm start (``azr pretrain --preset tiny``):

- the curve: one self-play run of ``--curve-minutes`` (the preset, or the arm ``--curve-arm`` names) that
  scores the held-out suite every ``--eval-every`` steps; its charts (``azr report``) show held-out
  accuracy per type, the valid-task rate, the learnability reward, reward and entropy over the run;
- the comparison: for each seed, each arm trains for the same ``--minutes`` of wall time and its final
  model is scored with ``azr eval --suite heldout`` (greedy, the preset's token limit):

  - ``preset``: the tiny preset as it is (whatever its defaults are now); ``preset-reinforce++`` the same
    with one global baseline instead of one per (role, task type), ``preset-constant`` the same with one
    fixed reward for every valid proposal instead of its learnability: the paper's two choices, measured
    in the recipe as it ships. The arms after these pin the learning rate they were measured at
    (``MEASURED_LR``) and change the rest as they say;
  - ``trr++``: the paper's algorithm on the tiny preset (Task-Relative REINFORCE++, learnability reward,
    no demonstrations);
  - ``reinforce++``: one global baseline instead of one per (role, task type);
  - ``constant``: every valid proposal earns the same reward instead of its learnability;
  - ``demonstrations``: TRR++, and each step the trainer also imitates the executor's gold answers
    to ``DEMONSTRATIONS`` buffer tasks per type beside the RL loss (``selfplay.demonstrations``);
    ``demonstrations-no-induction`` the same for deduction and abduction only, whose gold answers carry
    no proposer message, and ``demonstrations-no-messages`` all three with the messages taken out of the
    induction demonstrations; ``seeded-demonstrations`` all three, with ``SEED_TASKS_PER_TYPE`` of the
    warm start's own tasks per type in the buffers from the start (``selfplay.warm_start_seeds``);
  - ``lr-1e-4``: the preset at twice its learning rate; ``lr-1e-4-proposer-demonstrations`` the same with
    ``PROPOSER_DEMONSTRATIONS`` buffer tasks per type imitated as proposals
    (``selfplay.proposer_demonstrations``);
  - ``solver-rl``: no proposer: the solver alone, with the same reinforcement learning, on tasks the warm
    start was trained on (``selfplay.propose=false`` and ``selfplay.warm_start_seeds``), which separates
    what reinforcement learning does at this scale from what the proposer's curriculum does;
  - ``sft``: no self-play: supervised training continues on the warm-start data, at the learning rate the
    warm start ended on;
  - ``buffer-sft``: the tasks the ``trr++`` run of the same seed left in its buffers (nearly all written by
    its proposer), learnt by supervision instead: the warm start is trained, as ``sft`` is, on the solver's
    gold answers to them (the executor's outputs, the task's own input, the proposer's program), which
    separates what the curriculum holds from what reinforcement learning draws out of it;
  - ``warm``: the warm start itself (the line every arm must beat), scored once.

Reported per arm: held-out accuracy per task type (mean +- standard deviation over seeds), the format-error
rate, and for self-play arms the proposer's valid-task rate, the learnability reward's mean over the run's
steps, and the steps done. The machine's load average is recorded, since other work slows every arm.

    python -m bench.learning                                   # 30-minute curve, 3 seeds x 4 arms x 5 min
    python -m bench.learning --curve-minutes 0 --minutes 7     # the preset's comparison only
    python -m bench.learning --curve-minutes 0 --minutes 2 --seeds 1   # every arm, briefly
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from azr.core.task import TaskType
from azr.report.curves import draw, read_metrics
from azr.selfplay.rendering import PromptRenderer
from azr.services.config import RedisConfig
from azr.services.run_dir import RunDirectory
from azr.services.settings import RunSettings, resolve
from azr.services.store import connect
from azr.services.store.buffers import TaskBuffers
from azr.services.store.embedded import EmbeddedRedis
from azr.services.store.keys import Keys
from azr.trainer.models import load_tokenizer
from azr.warmstart.build import build_warm_start, draw_examples
from azr.warmstart.examples import Example, solve_example
from azr.warmstart.train import SFTSchedule, lr_factor, tokenise, train

AZR = [sys.executable, "-m", "azr"]
RESULTS = Path(__file__).resolve().parent / "results"
TYPES = [t.value for t in TaskType]
DEMONSTRATIONS = 16
"""Buffer tasks per type whose gold answers the demonstration arms imitate each step."""
PROPOSER_DEMONSTRATIONS = 4
"""Buffer tasks per type the proposer-demonstration arm imitates as proposals each step: as many as the
proposals it samples (the tiny preset's B)."""
SEED_TASKS_PER_TYPE = 300
"""The warm start's own tasks per type in the buffers of the arms that seed with them."""
MEASURED_LR = "trainer.lr=2e-5"
"""The learning rate the arms below were measured at (the tables of ``docs/learning.md``), before the
preset's rose to 5e-5: TRR++ alone at 5e-5 and above collapses within 30 steps."""
PAPER = ["selfplay.demonstrations=0", "selfplay.warm_start_seeds=0", MEASURED_LR]
"""Learning from the model's own samples only, buffers seeded by the model alone, as in the paper,
whatever the preset's defaults."""
ALL_TYPES = 'selfplay.demonstration_types=["deduction","abduction","induction"]'
DEMONSTRATED = [
    f"selfplay.demonstrations={DEMONSTRATIONS}",
    "selfplay.warm_start_seeds=0",
    ALL_TYPES,
    MEASURED_LR,
]
ARMS: dict[str, list[str]] = {
    "preset": [],
    "preset-reinforce++": ["trainer.algo.estimator=reinforce++"],
    "preset-constant": ["roles.propose_reward=constant"],
    "trr++": PAPER,
    "reinforce++": [*PAPER, "trainer.algo.estimator=reinforce++"],
    "constant": [*PAPER, "roles.propose_reward=constant"],
    "demonstrations": DEMONSTRATED,
    "demonstrations-no-induction": [
        *DEMONSTRATED,
        'selfplay.demonstration_types=["deduction","abduction"]',
    ],
    "demonstrations-no-messages": [*DEMONSTRATED, "selfplay.demonstration_messages=false"],
    "seeded-demonstrations": [*DEMONSTRATED, f"selfplay.warm_start_seeds={SEED_TASKS_PER_TYPE}"],
    "solver-rl": [*PAPER, "selfplay.propose=false", f"selfplay.warm_start_seeds={SEED_TASKS_PER_TYPE}"],
    "lr-1e-4": ["trainer.lr=1e-4"],
    "lr-1e-4-proposer-demonstrations": [
        "trainer.lr=1e-4",
        f"selfplay.proposer_demonstrations={PROPOSER_DEMONSTRATIONS}",
    ],
}
"""Self-play arms: the ``--set`` overrides that make each one from the tiny preset (a later override of
the same setting wins)."""
SUPERVISED = ("sft", "buffer-sft")
"""Arms that train the warm start with supervision instead of self-play."""


def evaluate(checkpoint: Path, out: Path, settings: RunSettings) -> dict[str, Any]:
    """``azr eval --suite heldout`` of a model, a checkpoint or a run directory, with the preset's prompts."""
    limit = str(settings.rollout.max_new_tokens)
    subprocess.run(
        [
            *AZR,
            "eval",
            "--checkpoint",
            str(checkpoint),
            "--suite",
            "heldout",
            "--out",
            str(out),
            "--max-new-tokens",
            limit,
        ],
        check=True,
        capture_output=True,
    )
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def selfplay(run: Path, minutes: float, sets: list[str]) -> float:
    """One ``azr selfplay --preset tiny`` run of ``minutes``; returns its wall time in seconds."""
    if run.exists():
        shutil.rmtree(run)
    overrides = ["selfplay.steps=100000", f"selfplay.max_minutes={minutes}", *sets]
    started = time.perf_counter()
    subprocess.run(
        [*AZR, "selfplay", "--preset", "tiny", "--out", str(run), "--no-progress"]
        + [arg for item in overrides for arg in ("--set", item)],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def selfplay_arm(name: str, seed: int, minutes: float, settings: RunSettings, root: Path) -> dict[str, Any]:
    run = root / f"{name}-seed{seed}"
    wall = selfplay(run, minutes, [*ARMS[name], f"selfplay.seed={seed}", f"rollout.seed={seed}"])
    # Step rows (evaluation rows have no solver series); a run of the solver alone has no proposer series.
    rows = [r for r in read_metrics(run) if r["step"] >= 0 and "solve/deduction/accuracy" in r]
    proposed = [r for r in rows if "propose/deduction/valid_rate" in r]
    valid = [statistics.fmean(r[f"propose/{t}/valid_rate"] for t in TYPES) for r in proposed]
    # Under the constant propose reward no solve rate is measured and the series holds 0, not a reading.
    measured = RunDirectory(run).read_config()["roles"]["propose_reward"] == "learnability"
    learn = [statistics.fmean(r[f"propose/{t}/learnability_mean"] for t in TYPES) for r in proposed]
    return {
        "run": str(run),
        "wall_s": wall,
        "steps": len(rows),
        "eval": evaluate(run, run / "eval-heldout.json", settings),
        "valid_rate": statistics.fmean(valid) if valid else math.nan,
        "learnability_mean": statistics.fmean(learn) if learn and measured else math.nan,
    }


def sft_arm(
    name: str,
    seed: int,
    minutes: float,
    settings: RunSettings,
    *,
    warm: Path,
    examples: list[Example],
    root: Path,
) -> dict[str, Any]:
    """Supervised training of the warm start on ``examples`` for ``minutes``, at the warm start's settings
    and at the learning rate its schedule ended on, held constant, reshuffled by ``seed``. (Resuming at the
    schedule's peak, ten times higher, with a fresh optimizer undoes the warm start: 0.28 / 0.30 / 0.54 fell
    to 0.15 / 0.18 / 0.26 in 3 minutes, the mean of 3 seeds.)"""
    config = settings.warm_start_config()
    warm_schedule = SFTSchedule.of(config)
    out = root / f"{name}-seed{seed}"
    tokenizer = load_tokenizer(str(warm))
    rows = tokenise(examples, tokenizer, PromptRenderer(tokenizer, config.prompt_format), config.max_tokens)
    model = AutoModelForCausalLM.from_pretrained(str(warm), dtype=torch.float32)
    final_lr = warm_schedule.lr * lr_factor(warm_schedule.steps - 1, warm_schedule)
    schedule = replace(
        warm_schedule, lr=final_lr, steps=1_000_000, warmup_steps=1, seed=config.seed + 1 + seed
    )
    started = time.perf_counter()
    losses = train(model, rows, int(tokenizer.pad_token_id), schedule, max_seconds=60 * minutes)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "run": str(out),
        "wall_s": time.perf_counter() - started,
        "steps": len(losses),
        "examples": len(rows),
        "eval": evaluate(out, out / "eval-heldout.json", settings),
    }


def buffer_examples(run: Path, settings: RunSettings) -> list[Example]:
    """The solver's gold answer to every task a finished self-play run left in its buffers, read from the
    run's own Redis (its append-only file, reopened)."""
    with EmbeddedRedis(run / "redis") as server:
        client = connect(RedisConfig(url=server.url))
        buffers = TaskBuffers(client, Keys(RedisConfig().prefix))
        tasks = [task for t in TaskType for task in buffers[t].newest(buffers[t].size())]
        client.close()
    return [solve_example(t, settings.roles) for t in tasks]


def spread(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(results: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    out = {t: spread([r["eval"]["by_type"][t]["pass_at_1"] for r in results]) for t in TYPES}
    out["overall"] = spread([r["eval"]["overall"]["pass_at_1"] for r in results])
    out["format_errors"] = spread([r["eval"]["overall"]["format_error_rate"] for r in results])
    for key in ("valid_rate", "learnability_mean", "steps"):
        if all(key in r for r in results):
            out[key] = spread([float(r[key]) for r in results])
    return out


def table(summary: dict[str, dict[str, tuple[float, float]]]) -> str:
    columns = [*TYPES, "overall", "format_errors", "valid_rate", "learnability_mean", "steps"]
    heads = ["deduction", "abduction", "induction", "overall", "format err", "valid", "learnab.", "steps"]
    width = max(12, *(len(name) + 1 for name in summary))
    lines = [f"{'arm':<{width}}" + "".join(f"{h:>17}" for h in heads)]
    for name, s in summary.items():
        cells = []
        for key in columns:
            mean, sd = s.get(key, (math.nan, math.nan))
            cell = "-" if math.isnan(mean) else f"{mean:.3f}+-{sd:.3f}"
            cells.append(f"{cell:>17}")  # wide enough for four-digit step counts, with a space between
        lines.append(f"{name:<{width}}" + "".join(cells))
    return "\n".join(lines)


def curve(run: Path, arm: str, minutes: float, eval_every: int) -> dict[str, Any]:
    """One self-play run of ``arm`` scored every ``eval_every`` steps; prints its start and end."""
    wall = selfplay(run, minutes, [*ARMS[arm], f"selfplay.eval_every={eval_every}"])
    rows = read_metrics(run)
    evals = [r for r in rows if "eval/heldout/overall/accuracy" in r]
    first, last = evals[0], evals[-1]
    steps = len({r["step"] for r in rows if r["step"] >= 0})
    print(f"curve: {arm}, {minutes:g} min, {steps} steps ({run})")
    print(f"{'held-out':<12}{'start':>10}{'end':>10}{'change':>10}")
    for t in [*TYPES, "overall"]:
        a, b = first[f"eval/heldout/{t}/accuracy"], last[f"eval/heldout/{t}/accuracy"]
        print(f"{t:<12}{a:>10.3f}{b:>10.3f}{b - a:>+10.3f}")
    return {
        "run": str(run),
        "arm": arm,
        "wall_s": wall,
        "steps": steps,
        "first": {k: v for k, v in first.items() if k.startswith("eval/heldout/")},
        "last": {k: v for k, v in last.items() if k.startswith("eval/heldout/")},
        "charts": [str(c) for c in draw([run], RESULTS / "learning-curve")],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--curve-minutes", type=float, default=30, help="the curve run's budget (0: none)")
    parser.add_argument("--curve-arm", default="preset", choices=list(ARMS), help="the curve run's arm")
    parser.add_argument("--eval-every", type=int, default=10, help="steps between the curve's evaluations")
    parser.add_argument("--minutes", type=float, default=5, help="each comparison run's budget (0: none)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--arms", default="preset,preset-reinforce++,preset-constant,sft")
    parser.add_argument("--out", type=Path, default=Path("/tmp/azr-bench-learning"))
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    settings = resolve("tiny", {})
    warm = build_warm_start(
        settings.cache_dir, settings.warm_start_config(), directory=settings.warm_start_dir()
    ).directory
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "load_before": load_before}
    RESULTS.mkdir(exist_ok=True)
    parts = [name for name, on in (("curve", args.curve_minutes > 0), ("arms", args.minutes > 0)) if on]
    path = RESULTS / f"learning-{'-'.join(parts) or 'none'}.json"

    if args.curve_minutes > 0:
        results["curve"] = curve(args.out / "curve", args.curve_arm, args.curve_minutes, args.eval_every)

    if args.minutes > 0:
        arms = args.arms.split(",")
        unknown = [a for a in arms if a not in ARMS and a not in SUPERVISED]
        if unknown:
            parser.error(f"unknown arms {unknown}: choose from {[*ARMS, *SUPERVISED]}")
        if "buffer-sft" in arms and ("trr++" not in arms or arms.index("trr++") > arms.index("buffer-sft")):
            parser.error("buffer-sft learns the tasks of the trr++ run: list trr++ before it")
        runs: dict[str, list[dict[str, Any]]] = {
            "warm": [{"run": str(warm), "eval": evaluate(warm, args.out / "warm.json", settings)}]
        }
        examples = draw_examples(settings.warm_start_config())[0] if "sft" in arms else []
        for seed in range(args.seeds):  # seeds outermost: a slowdown of the machine hits every arm alike
            for arm in arms:
                if arm == "sft":
                    result = sft_arm(
                        arm, seed, args.minutes, settings, warm=warm, examples=examples, root=args.out
                    )
                elif arm == "buffer-sft":
                    data = buffer_examples(Path(runs["trr++"][seed]["run"]), settings)
                    result = sft_arm(
                        arm, seed, args.minutes, settings, warm=warm, examples=data, root=args.out
                    )
                else:
                    result = selfplay_arm(arm, seed, args.minutes, settings, args.out)
                runs.setdefault(arm, []).append(result)
                # Written after every run: a bench stopped part-way keeps what it has measured.
                path.write_text(json.dumps(results | {"runs": runs}, indent=1))
        summary = {name: summarise(rs) for name, rs in runs.items()}
        selfplay_runs = [Path(r["run"]) for name, rs in runs.items() if name in ARMS for r in rs]
        results |= {
            "summary": summary,
            "runs": runs,
            "charts": [str(c) for c in draw(selfplay_runs, RESULTS / "learning-arms")],
        }
        print(f"held-out accuracy, {args.minutes:g} min per arm, {args.seeds} seeds, load {load_before:.1f}")
        print(table(summary))

    path.write_text(json.dumps(results, indent=1))
    print(f"results: {path}")
    for chart in results.get("curve", {}).get("charts", []) + results.get("charts", []):
        print(f"chart: {chart}")


if __name__ == "__main__":
    main()
