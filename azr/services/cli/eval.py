"""``azr eval``: score a checkpoint's solver, or its proposer, on a task suite; prints a table and writes
JSON.

    azr eval --checkpoint ~/.cache/azr/models/tiny-warm --suite heldout
    azr eval --checkpoint runs/tiny-20261203-1500 --suite heldout --samples 4 --temperature 1.0
    azr eval --checkpoint runs/a/checkpoints/step-00000020 --tasks my_suite.jsonl --out scores.json
    azr eval --checkpoint runs/a --suite heldout --without-messages   # induction from the pairs alone
    azr eval --checkpoint runs/a --suite heldout --answers answers.jsonl  # what it answered, task by task
    azr eval --checkpoint runs/a --suite heldout --role propose --samples 2  # valid-task rate per type

``--checkpoint`` takes a model directory, a training checkpoint or a run directory (its newest
checkpoint). ``--tasks`` lines are executor jobs (as ``azr executor run`` takes them) or bare tasks; their
gold answers are computed by the executor. ``--answers`` writes one line per scored task: the task with
its gold outputs (``"task"``, so the file is itself a ``--tasks`` file), how many responses were correct,
and each response's text and verdict.

``--role propose`` scores the proposer instead (``azr.eval.proposals``): the same requests for every
checkpoint, built from the suite's tasks, each answered ``--samples`` times at temperature 1 unless
``--temperature`` says otherwise (self-play samples its proposals); the report gives the valid-task rate per
type and what the invalid proposals fail on, and ``--answers`` writes every request with its proposals.
Exit codes: 0 when scored, 2 for bad usage.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from azr.core.task import Role
from azr.eval.proposals import ProposerReport
from azr.eval.runner import Sampling, evaluate_checkpoint, evaluate_proposer_checkpoint, model_directory
from azr.eval.scoring import EvalReport
from azr.eval.suites import BUILT_IN, load_suite, load_tasks_file, without_messages
from azr.executor.pool import PoolConfig
from azr.services.settings import PRESETS, parse_overrides, resolve


def eval_command(
    *,
    checkpoint: Annotated[Path, typer.Option(help="Model directory, checkpoint or run directory.")],
    suite: Annotated[str | None, typer.Option(help=f"Built-in suite: {', '.join(BUILT_IN)}.")] = None,
    tasks: Annotated[Path | None, typer.Option(help="A JSONL file of tasks or executor jobs.")] = None,
    role: Annotated[Role, typer.Option(help="solve: score the solver; propose: the proposer.")] = Role.SOLVE,
    samples: Annotated[int, typer.Option(min=1, help="Responses per task (pass@k with k = samples).")] = 1,
    temperature: Annotated[
        float | None,
        typer.Option(min=0.0, help="0: greedy (the solver's default with one sample); else sampled."),
    ] = None,
    max_new_tokens: Annotated[int | None, typer.Option(min=1, help="Default: the preset's rollout.")] = None,
    preset: Annotated[str, typer.Option(help=f"Prompt settings of: {', '.join(PRESETS)}.")] = "tiny",
    seed: Annotated[int, typer.Option(min=0, help="Seeds sampling.")] = 0,
    without_messages_: Annotated[
        bool,
        typer.Option(
            "--without-messages", help="Drop induction messages: score inferring f from the pairs alone."
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="JSON report path (default: eval-<suite>.json, eval-<suite>-propose.json)."),
    ] = None,
    answers: Annotated[
        Path | None, typer.Option(help="JSONL of every scored task with its responses and their verdicts.")
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a run setting: KEY.PATH=VALUE (repeatable).")
    ] = None,
) -> None:
    """Score a checkpoint's solver (pass@1, pass@k, format errors, lengths per task type) or its proposer
    (valid-task rate and failure causes per task type)."""
    console = Console()
    if (suite is None) == (tasks is None):
        console.print("[red]give exactly one of --suite and --tasks[/red]")
        raise typer.Exit(2)
    greedy = samples == 1 and role is Role.SOLVE
    t = temperature if temperature is not None else (0.0 if greedy else 1.0)
    try:
        settings = resolve(preset, parse_overrides(set_ or []))
        name = suite if suite is not None else Path(str(tasks)).stem
        task_list = load_suite(suite) if suite is not None else load_tasks_file(Path(str(tasks)))
        if without_messages_:
            task_list, name = without_messages(task_list), f"{name}-without-messages"
        model_directory(checkpoint)
        if t == 0 and samples > 1:
            raise ValueError("greedy decoding gives one response per task: pass --temperature above 0")
    except (ValueError, ValidationError, FileNotFoundError) as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    sampling = Sampling(
        samples=samples,
        temperature=t,
        max_new_tokens=max_new_tokens or settings.rollout.max_new_tokens,
        seed=seed,
        prompt_format=settings.selfplay.prompt_format,
    )
    pool = PoolConfig(
        backend=settings.executor.backend,
        workers=settings.executor.workers,
        allow_unisolated=settings.executor.allow_unisolated,
    )
    rows: list[dict[str, object]]
    report: EvalReport | ProposerReport
    if role is Role.SOLVE:
        report = asyncio.run(
            evaluate_checkpoint(
                checkpoint, task_list, suite=name, roles=settings.roles, sampling=sampling, executor=pool
            )
        )
        print_report(console, report)
        rows = [a.to_dict() for a in report.answers]
    else:
        report = asyncio.run(
            evaluate_proposer_checkpoint(
                checkpoint, task_list, suite=name, roles=settings.roles, sampling=sampling, executor=pool
            )
        )
        print_proposer_report(console, report)
        rows = [r.to_dict() for r in report.requests]
    suffix = "" if role is Role.SOLVE else "-propose"
    path = out or Path(f"eval-{name}{suffix}.json")
    path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    console.print(f"report: {path}")
    if answers is not None:
        answers.write_text("".join(json.dumps(row) + "\n" for row in rows))
        console.print(f"answers: {answers}")


def print_report(console: Console, report: EvalReport) -> None:
    table = Table(
        title=f"{report.suite}: {report.checkpoint} (samples {report.samples}, T {report.temperature:g})"
    )
    # With one sample per task pass@k is pass@1: the column would repeat it.
    pass_at_k = [f"pass@{report.samples}"] if report.samples > 1 else []
    for column in ("type", "tasks", "invalid", "pass@1", *pass_at_k, "format errors", "tokens"):
        table.add_column(column, justify="left" if column == "type" else "right")
    for name, score in [*report.by_type.items(), ("overall", report.overall)]:
        table.add_row(
            name,
            str(score.tasks),
            str(score.invalid),
            f"{score.pass_at_1:.3f}",
            *([f"{score.pass_at_k:.3f}"] if pass_at_k else []),
            f"{score.format_error_rate:.3f}",
            f"{score.mean_response_tokens:.1f}",
        )
    console.print(table)


def print_proposer_report(console: Console, report: ProposerReport) -> None:
    table = Table(
        title=f"{report.suite} (proposer): {report.checkpoint} "
        f"(samples {report.samples}, T {report.temperature:g})"
    )
    for column in ("type", "prompts", "proposals", "valid", "valid rate", "tokens"):
        table.add_column(column, justify="left" if column == "type" else "right")
    scores = [*report.by_type.items(), ("overall", report.overall)]
    for name, score in scores:
        table.add_row(
            name,
            str(score.prompts),
            str(score.proposals),
            str(score.valid),
            f"{score.valid_rate:.3f}",
            f"{score.mean_response_tokens:.1f}",
        )
    console.print(table)
    for name, score in scores[:-1]:
        if score.invalid:
            causes = ", ".join(f"{cause} {count}" for cause, count in score.invalid.items())
            console.print(f"{name} invalid: {causes}")
