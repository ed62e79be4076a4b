"""``azr report``: draw the learning curves of one or more runs into PNG files.

    azr report runs/a                       # charts in runs/a/report/
    azr report runs/a runs/b --out charts   # both runs on each chart

Exit codes: 0 when charts were written, 2 when a run directory has no metrics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from azr.report.curves import draw


def report(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories (each with metrics.jsonl).")],
    out: Annotated[Path | None, typer.Option(help="Where the PNGs go (default: <first run>/report).")] = None,
    window: Annotated[int, typer.Option(min=1, help="Steps in the moving average.")] = 5,
) -> None:
    """Plot accuracy per type, valid rate, learnability, reward, entropy and length over steps."""
    console = Console()
    missing = [d for d in run_dirs if not (d / "metrics.jsonl").is_file()]
    if missing:
        console.print(f"[red]no metrics.jsonl in {', '.join(map(str, missing))}[/red]")
        raise typer.Exit(2)
    paths = draw(run_dirs, out or run_dirs[0] / "report", window=window)
    for path in paths:
        console.print(str(path))
