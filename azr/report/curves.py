"""Learning curves of self-play runs: several runs on one chart per quantity, written as PNG files.

Each run directory holds ``metrics.jsonl`` (one JSON object per step, ``azr.selfplay.metrics`` and the
learner's keys, ``eval/...`` keys where the run evaluated). A chart shows one quantity (say, solver
accuracy) with one line per (run, task type); a quantity no run recorded is skipped. Curves are smoothed
with a trailing moving average, since one step holds only a few tasks per type on the tiny preset.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed or wanted

import matplotlib.pyplot as plt

TYPES = ("deduction", "abduction", "induction")
LEGEND_CHARS = 96
"""Label characters that fit side by side in a legend row across a chart's width."""


@dataclass(frozen=True, slots=True)
class Chart:
    """One PNG: a title, a file name and the metric keys it draws (``{type}`` is filled per task type)."""

    name: str
    title: str
    keys: tuple[str, ...]
    smoothed: bool = True
    """Per-step quantities are noisy and smoothed; an evaluation already averages a whole suite."""
    fraction: bool = False
    """A rate between 0 and 1, drawn on the whole of that axis so that charts of runs compare at a glance."""


CHARTS = (
    Chart("solve_accuracy", "solver accuracy (self-play tasks)", ("solve/{type}/accuracy",), fraction=True),
    Chart(
        "eval_accuracy",
        "held-out accuracy",
        ("eval/heldout/{type}/accuracy",),
        smoothed=False,
        fraction=True,
    ),
    Chart("valid_rate", "proposer valid-task rate", ("propose/{type}/valid_rate",), fraction=True),
    Chart(
        "eval_valid_rate",
        "proposer valid-task rate on the held-out requests",
        ("eval/heldout/propose/{type}/valid_rate",),
        smoothed=False,
        fraction=True,
    ),
    Chart("learnability", "learnability reward (mean)", ("propose/{type}/learnability_mean",)),
    Chart(
        "message_gain",
        "induction: solve rate with the message minus without it",
        ("propose/induction/message_gain_mean",),
    ),
    Chart("reward", "reward (mean)", ("solve/{type}/reward_mean", "propose/{type}/reward_mean")),
    Chart("entropy", "policy entropy", ("train/entropy",)),
    Chart("imitation", "imitation loss on demonstrations (nats/token)", ("train/imitation_nll",)),
    Chart("response_length", "response length (tokens)", ("response/length_mean",)),
)


def read_metrics(run_dir: Path) -> list[dict[str, float]]:
    """The steps of ``run_dir/metrics.jsonl`` in order (a cut-off last line is skipped)."""
    rows = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and "step" in data:
            rows.append({k: float(v) for k, v in data.items() if isinstance(v, int | float)})
    return rows


def smooth(values: Sequence[float], window: int) -> list[float]:
    """Trailing moving average over ``window`` steps (NaNs skipped)."""
    out = []
    for i in range(len(values)):
        recent = [v for v in values[max(0, i - window + 1) : i + 1] if not math.isnan(v)]
        out.append(sum(recent) / len(recent) if recent else math.nan)
    return out


def draw(run_dirs: Sequence[Path], out_dir: Path, *, window: int = 5) -> list[Path]:
    """One PNG per chart that any run has data for; returns their paths."""
    runs = {_label(d, run_dirs): read_metrics(d) for d in run_dirs}
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for chart in CHARTS:
        lines = _lines(chart, runs, window)
        if not lines:
            continue
        figure, axes = plt.subplots(figsize=(7, 4.5), layout="constrained")
        for line in lines:
            color, style = _style(line, lines)
            axes.plot(line.steps, line.values, label=line.label, color=color, linestyle=style)
        axes.set_title(chart.title)
        axes.set_xlabel("step")
        axes.grid(alpha=0.3)
        if chart.fraction:
            axes.set_ylim(0.0, 1.0)
        # Below the axes, where it never hides a curve, in as many columns (up to three) as the labels fit.
        longest = max(len(line.label) for line in lines)
        columns = max(1, min(len(TYPES), LEGEND_CHARS // longest))
        figure.legend(loc="outside lower center", ncols=columns, fontsize="small")
        path = out_dir / f"{chart.name}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        written.append(path)
    return written


@dataclass(frozen=True, slots=True)
class _Line:
    run: str
    quantity: str
    task_type: str
    steps: list[float]
    values: list[float]

    @property
    def label(self) -> str:
        return " ".join(part for part in (self.run, self.quantity, self.task_type) if part)


LINE_STYLES = ("solid", "dashed", "dotted")
"""One per task type when several runs share a chart: the colour then tells the runs apart."""


def _style(line: _Line, lines: Sequence[_Line]) -> tuple[str | None, str]:
    """Several runs: a colour per run (and quantity), a line style per task type, so that no two lines
    look alike while there are at most ten colours' worth of runs; one run: matplotlib's colour cycle."""
    if len({other.run for other in lines}) == 1:
        return None, "solid"
    series = list(dict.fromkeys((other.run, other.quantity) for other in lines))
    style = LINE_STYLES[TYPES.index(line.task_type) % len(LINE_STYLES)] if line.task_type else "solid"
    return f"C{series.index((line.run, line.quantity)) % 10}", style


def _lines(chart: Chart, runs: dict[str, list[dict[str, float]]], window: int) -> list[_Line]:
    lines = []
    for run, rows in runs.items():
        for template in chart.keys:
            for task_type in TYPES if "{type}" in template else ("",):
                key = template.format(type=task_type)
                points = [(r["step"], r[key]) for r in rows if key in r]
                if points:
                    # Where a chart draws several quantities, their first part tells them apart
                    # ("solve", "propose").
                    quantity = template.split("/")[0] if len(chart.keys) > 1 else ""
                    values = [v for _, v in points]
                    steps = [s for s, _ in points]
                    smoothed = smooth(values, window if chart.smoothed else 1)
                    lines.append(_Line(run, quantity, task_type, steps, smoothed))
    return lines


def _label(run_dir: Path, all_dirs: Sequence[Path]) -> str:
    """A run's name on the charts: its directory name, or its path when names clash."""
    names = [d.name for d in all_dirs]
    return run_dir.name if names.count(run_dir.name) == 1 else str(run_dir)
