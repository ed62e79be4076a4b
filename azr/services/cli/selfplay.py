"""``azr selfplay``: run the self-play loop (the main job).

    azr selfplay --preset tiny                       # CPU, minutes, embedded Redis and Ray
    azr selfplay --preset tiny --steps 50 --sync     # synchronous schedule, for comparison
    azr selfplay --out runs/a --resume               # continue a stopped run from its checkpoint
    azr selfplay --preset tiny --set selfplay.batch_size=8 --set trainer.lr=1e-5
    azr selfplay --seed-tasks mine.jsonl --set selfplay.propose=false   # the solver alone on your tasks

Exit codes: 0 when the run finished or was stopped cleanly, 1 when it could not run, 2 for bad usage.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from azr.selfplay.seeding import SeedTasksError
from azr.services.actors.driver import RunSummary, run_selfplay
from azr.services.config import RedisConfig
from azr.services.run_dir import RunDirectory
from azr.services.settings import PRESETS, RunSettings, merge, parse_overrides, resolve

SUMMARY_KEYS = (
    "policy_version",
    "propose/deduction/valid_rate",
    "propose/abduction/valid_rate",
    "propose/induction/valid_rate",
    "propose/deduction/learnability_mean",
    "solve/deduction/accuracy",
    "solve/abduction/accuracy",
    "solve/induction/accuracy",
    "buffer/deduction/size",
    "buffer/abduction/size",
    "buffer/induction/size",
    "train/pg_loss",
    "train/grad_norm",
    "perf/step_s",
    "perf/tokens_per_s",
)


def selfplay(
    *,
    preset: Annotated[str, typer.Option(help=f"Starting settings: {', '.join(PRESETS)}.")] = "tiny",
    steps: Annotated[int | None, typer.Option(min=1, help="Training steps (overrides the preset).")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default: runs/<preset>-<time>).")] = None,
    redis_url: Annotated[
        str | None, typer.Option(help="Redis to use (default: a private redis-server in the run directory).")
    ] = None,
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster to join (default: start one).")] = None,
    executor_url: Annotated[
        str | None, typer.Option(help="Executor service to use (default: a sandbox pool in the cluster).")
    ] = None,
    executor_token: Annotated[
        str | None,
        typer.Option(
            envvar="AZR_EXECUTOR_TOKEN",
            show_default=False,
            help="Bearer token of the executor service (best given as AZR_EXECUTOR_TOKEN; never saved).",
        ),
    ] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in --out from its last checkpoint.")] = False,
    sync: Annotated[bool, typer.Option(help="Synchronous schedule (max_staleness 0).")] = False,
    seed_tasks: Annotated[
        Path | None,
        typer.Option(
            help="JSONL of seed tasks for the buffers, validated by the executor (selfplay.seed_tasks)."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a setting: KEY.PATH=VALUE (repeatable).")
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Run self-play: propose, validate, solve, check, train, publish; step after step."""
    console = Console()
    if resume and out is None:
        raise typer.BadParameter("--resume needs --out: the run directory to continue")
    run_dir = RunDirectory(out or Path("runs") / f"{preset}-{datetime.now(UTC):%Y%m%d-%H%M%S}")
    try:
        flags = {
            "selfplay": {
                "steps": steps,
                "max_staleness": 0 if sync else None,
                "seed_tasks": None if seed_tasks is None else str(seed_tasks),
            },
            "ray": {"address": ray_address},
            "executor": {"url": executor_url, "token": executor_token},
            "redis": None if redis_url is None else RedisConfig(url=redis_url).model_dump(mode="json"),
        }
        overrides = merge(parse_overrides(set_ or []), _given(flags))
        settings = _settings(run_dir, preset, resume=resume, overrides=overrides)
    except (ValueError, ValidationError, FileNotFoundError) as exc:
        console.print(f"[red]invalid settings:[/red] {exc}")
        raise typer.Exit(2) from exc
    console.print(f"run directory: [bold]{run_dir.root}[/bold]")
    try:
        summary = run_selfplay(settings, run_dir, resume=resume, progress=progress)
    except SeedTasksError as exc:
        console.print(f"[red]seed tasks refused:[/red] {exc}")
        raise typer.Exit(2) from exc
    _print_summary(console, summary)


def _given(flags: dict[str, Any]) -> dict[str, Any]:
    """The command-line flags that were given (None means not given), as nested overrides."""
    out: dict[str, Any] = {}
    for key, value in flags.items():
        if isinstance(value, dict):
            inner = {k: v for k, v in value.items() if v is not None}
            if inner:
                out[key] = inner
        elif value is not None:
            out[key] = value
    return out


def _settings(run_dir: RunDirectory, preset: str, *, resume: bool, overrides: dict[str, Any]) -> RunSettings:
    if resume:
        return RunSettings.model_validate(merge(run_dir.read_config(), overrides))
    return resolve(preset, overrides)


def _print_summary(console: Console, summary: RunSummary) -> None:
    table = Table(title="self-play run" + (" (stopped)" if summary.interrupted else ""))
    table.add_column("metric (last step)")
    table.add_column("value", justify="right")
    evaluated = sorted(k for k in summary.last if k.startswith("eval/") and k.endswith("/accuracy"))
    for key in [*SUMMARY_KEYS, *evaluated]:
        if key in summary.last:
            table.add_row(key, f"{summary.last[key]:.4g}")
    console.print(table)
    root = summary.run_dir
    console.print(
        f"{summary.steps_done} steps, policy version {summary.policy_version}\n"
        f"metrics:     {root / 'metrics.jsonl'}\n"
        f"samples:     {root / 'samples.jsonl'}\n"
        f"checkpoints: {root / 'checkpoints'}\n"
        f"tensorboard: tensorboard --logdir {root / 'tensorboard'}"
    )
