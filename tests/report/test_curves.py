"""``azr report`` draws PNG charts from metrics.jsonl files shaped like a real run's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from PIL import Image

from azr.core.task import TaskType
from azr.report.curves import CHARTS, _lines, _style, draw, read_metrics, smooth
from azr.selfplay.metrics import RoundMetrics

AZR = [sys.executable, "-c", "from azr.services.cli import main; main()"]


def _run(
    root: Path, steps: int, accuracy_step: float, *, message_check: bool = False, imitating: bool = False
) -> Path:
    """A run directory whose metrics.jsonl holds the keys one round really writes, plus learner keys
    (the imitation loss only where the run had demonstrations, as the learner writes it)."""
    root.mkdir(parents=True)
    keys = RoundMetrics(message_check=message_check).finish()
    with (root / "metrics.jsonl").open("w") as f:
        for step in range(steps):
            row = dict(keys) | {"step": float(step), "train/entropy": 6.0 - 0.1 * step}
            if imitating:
                row["train/imitation_nll"] = 1.0 / (1 + step)
            for t in TaskType:
                row[f"solve/{t.value}/accuracy"] = min(1.0, accuracy_step * step)
            f.write(json.dumps(row) + "\n")
        f.write('{"step": 99, "solve/dedu')  # a run stopped mid-write
    return root


def test_charts_are_drawn_for_the_quantities_the_runs_recorded(tmp_path: Path) -> None:
    runs = [
        _run(tmp_path / "a", 6, 0.1),
        _run(tmp_path / "b", 4, 0.2, message_check=True, imitating=True),
    ]
    assert len(read_metrics(runs[0])) == 6
    paths = draw(runs, tmp_path / "out", window=2)
    names = {p.stem for p in paths}
    assert {"solve_accuracy", "valid_rate", "learnability", "reward", "entropy", "response_length"} <= names
    assert "message_gain" in names, "run b checked its induction messages"
    assert "imitation" in names, "run b imitated demonstrations"
    assert "eval_accuracy" not in names, "no run evaluated, so there is no held-out chart"
    alone = {p.stem for p in draw(runs[:1], tmp_path / "a-only", window=2)}
    assert "message_gain" not in alone, "run a did not check its messages"
    assert "imitation" not in alone, "run a had no demonstrations"
    for path in paths:
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size[0] > 100


def test_several_runs_get_a_colour_each_and_a_line_style_per_task_type(tmp_path: Path) -> None:
    """Five runs on one chart are fifteen lines, more than matplotlib's ten colours: no two may look alike."""
    runs = {f"run{i}": read_metrics(_run(tmp_path / f"run{i}", 3, 0.1)) for i in range(5)}
    (chart,) = [c for c in CHARTS if c.name == "solve_accuracy"]
    lines = _lines(chart, runs, window=1)
    styles = {line.label: _style(line, lines) for line in lines}
    assert len(lines) == 15 and len(set(styles.values())) == 15
    for run in runs:
        assert len({styles[f"{run} {t.value}"][0] for t in TaskType}) == 1, "one colour per run"
    assert len({styles[f"run0 {t.value}"][1] for t in TaskType}) == 3, "one line style per task type"


def test_smooth_is_a_trailing_mean() -> None:
    assert smooth([0.0, 1.0, 2.0, 3.0], 2) == [0.0, 0.5, 1.5, 2.5]


def test_the_cli_writes_into_the_first_run(tmp_path: Path) -> None:
    run = _run(tmp_path / "a", 3, 0.1)
    result = subprocess.run([*AZR, "report", str(run)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert (run / "report" / "solve_accuracy.png").is_file()
    missing = subprocess.run([*AZR, "report", str(tmp_path / "nothing")], capture_output=True, check=False)
    assert missing.returncode == 2
