"""``azr pretrain``: build the zero-human-data warm start of the tiny model (cached).

    azr pretrain --preset tiny                     # builds ~/.cache/azr/models/tiny-warm, or reuses it
    azr pretrain --steps 2000 --out /tmp/warm      # a longer warm start somewhere else
    azr selfplay --preset tiny --set model=/tmp/warm
    azr pretrain --set warm_start.tiny.hidden_size=384 --set warm_start.tiny.intermediate_size=1152 \
        --set warm_start.tiny.num_attention_heads=6 --out /tmp/wide    # a wider tiny model
    azr pretrain --set warm_start.family_weights.int_arith=4 --out /tmp/arith   # more `x + k` tasks

The tiny preset's model is "tiny-warm": `azr selfplay --preset tiny` builds the same warm start on first
use, so this command only does it ahead of time (or with other settings, elsewhere). Without --out, a
recipe other than the preset's (another seed, other steps or prompts) is cached beside the preset's, in
<cache_dir>/models/tiny-warm-<hash>, where a run with the same settings finds it.

Exit codes: 0 when the model is built or reused, 2 for bad usage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from azr.services.actors.executor_actor import make_executor
from azr.services.settings import PRESETS, TINY_WARM_MODEL, merge, parse_overrides, resolve
from azr.warmstart.build import build_warm_start


def pretrain(
    *,
    preset: Annotated[
        str, typer.Option(help=f"Prompt and executor settings of: {', '.join(PRESETS)}.")
    ] = "tiny",
    steps: Annotated[int | None, typer.Option(min=1, help="Optimizer steps (default: the preset's).")] = None,
    tasks_per_type: Annotated[
        int | None, typer.Option(min=2, help="Tasks drawn per type (default: the preset's).")
    ] = None,
    seed: Annotated[int | None, typer.Option(min=0, help="Seeds data and training (default 0).")] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Model directory (default: <cache_dir>/models/tiny-warm, or a sibling for another recipe)."
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even when a matching build exists.")] = False,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a run setting: KEY.PATH=VALUE (repeatable).")
    ] = None,
) -> None:
    """Train the tiny model on executor-labelled tasks of the project's own program families."""
    console = Console()
    try:
        given = {"seed": seed, "steps": steps, "tasks_per_type": tasks_per_type}
        overrides = merge(
            parse_overrides(set_ or []), {"warm_start": {k: v for k, v in given.items() if v is not None}}
        )
        settings = resolve(preset, overrides)
        config = settings.warm_start_config()
    except (ValueError, ValidationError) as exc:
        console.print(f"[red]invalid settings:[/red] {exc}")
        raise typer.Exit(2) from exc
    executor = make_executor(settings.executor)
    directory = out or settings.warm_start_dir()
    result = build_warm_start(settings.cache_dir, config, directory=directory, force=force, executor=executor)
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
        console.print(f"tasks by program family: {result.report.by_family}")
    as_preset = resolve(preset, {})
    if as_preset.model == TINY_WARM_MODEL and directory == as_preset.warm_start_dir():
        console.print(f"azr selfplay --preset {preset} starts from it")
    else:
        console.print(
            f"start self-play from it: azr selfplay --preset {preset} --set model={result.directory}"
        )
