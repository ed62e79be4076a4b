"""``azr pretrain``: build the zero-human-data warm start of the tiny model (cached).

    azr pretrain --preset tiny                     # builds ~/.cache/azr/models/tiny-warm, or reuses it
    azr pretrain --steps 200 --out /tmp/warm       # a longer warm start somewhere else
    azr selfplay --preset tiny --set model=$HOME/.cache/azr/models/tiny-warm

Exit codes: 0 when the model is built or reused, 2 for bad usage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from azr.services.settings import PRESETS, parse_overrides, resolve
from azr.warmstart.build import build_warm_start
from azr.warmstart.config import WarmStartConfig


def pretrain(
    *,
    preset: Annotated[
        str, typer.Option(help=f"Prompt and executor settings of: {', '.join(PRESETS)}.")
    ] = "tiny",
    steps: Annotated[int | None, typer.Option(min=1, help="Optimizer steps (default 60).")] = None,
    tasks_per_type: Annotated[
        int | None, typer.Option(min=2, help="Tasks drawn per type (default 200).")
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seeds data and training.")] = 0,
    out: Annotated[
        Path | None, typer.Option(help="Model directory (default: <cache_dir>/models/tiny-warm).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even when a matching build exists.")] = False,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a run setting: KEY.PATH=VALUE (repeatable).")
    ] = None,
) -> None:
    """Train the tiny model on executor-labelled tasks of the project's own program families."""
    console = Console()
    try:
        settings = resolve(preset, parse_overrides(set_ or []))
        given: dict[str, Any] = {"steps": steps, "tasks_per_type": tasks_per_type}
        config = WarmStartConfig(
            seed=seed,
            roles=settings.roles,
            prompt_format=settings.selfplay.prompt_format,
            executor_backend=settings.executor.backend,
            executor_workers=settings.executor.workers,
            allow_unisolated=settings.executor.allow_unisolated,
            **{k: v for k, v in given.items() if v is not None},
        )
    except (ValueError, ValidationError) as exc:
        console.print(f"[red]invalid settings:[/red] {exc}")
        raise typer.Exit(2) from exc
    result = build_warm_start(settings.cache_dir, config, directory=out, force=force)
    if result.reused:
        console.print(f"reused the warm start in [bold]{result.directory}[/bold]")
    else:
        first, last = result.losses[0], result.losses[-1]
        console.print(
            f"built the warm start in [bold]{result.directory}[/bold] in {result.seconds:.0f} s: "
            f"{len(result.losses)} steps, loss {first:.3f} -> {last:.3f}"
        )
    if result.report is not None:
        console.print(f"examples: {result.report.examples} {result.report.by_group}")
    console.print(f"start self-play from it: azr selfplay --preset tiny --set model={result.directory}")
