"""``azr executor``: run batches of executor jobs, show a short demonstration, or serve the executor.

Exit codes of ``azr executor run``: 0 when the run itself worked (whatever the verdicts, invalid tasks
included), 1 when it could not run (the backend failed to start, a file could not be read or written),
2 for bad command-line usage, 130 when interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal

import typer
from rich.console import Console
from rich.table import Table

from azr.core.task import TaskType
from azr.executor.backends.base import IsolationReport
from azr.executor.batch import BatchSummary, run_batch
from azr.executor.errors import ExecutorError
from azr.executor.jobs import Job, JobOp, JobResult, MalformedJobError, decode_job
from azr.executor.pool import ExecutorPool, PoolConfig

app = typer.Typer(help="Sandboxed execution: validate tasks and check answers.", no_args_is_help=True)

EXIT_CANNOT_RUN = 1
EXIT_INTERRUPTED = 130
DEFAULT_WORKERS = os.cpu_count() or 1
_DEMO_JOBS = Path("examples") / "jobs.jsonl"


class BackendChoice(StrEnum):
    LOCAL = "local"
    DOCKER = "docker"


class Switch(StrEnum):
    ON = "on"
    OFF = "off"


BackendOption = Annotated[BackendChoice, typer.Option("--backend", help="Where programs run.")]
WorkersOption = Annotated[
    int, typer.Option("--workers", min=1, help="Sandbox workers (default: one per core).")
]
UnisolatedOption = Annotated[
    bool,
    typer.Option(
        "--allow-unisolated", help="Run even if the local backend cannot isolate fully (development only)."
    ),
]


DockerImageOption = Annotated[
    str | None,
    typer.Option("--docker-image", help="Docker backend: sandbox image (default: built from this checkout)."),
]
DockerRuntimeOption = Annotated[
    str | None,
    typer.Option("--docker-runtime", help="Docker backend: OCI runtime, e.g. runsc for gVisor."),
]
DockerSeccompOption = Annotated[
    Path | None,
    typer.Option(
        "--docker-seccomp-profile",
        exists=True,
        dir_okay=False,
        help="Docker backend: seccomp profile (JSON) instead of the engine's default.",
    ),
]


class CannotRunError(Exception):
    """The run could not start or could not read/write its files (exit code 1)."""


@app.command("run")
def run(
    *,
    in_path: Annotated[str, typer.Option("--in", help="Jobs, one JSON object per line ('-' for stdin).")],
    out_path: Annotated[
        str, typer.Option("--out", help="Results, one JSON object per line ('-' for stdout).")
    ],
    backend: BackendOption = BackendChoice.LOCAL,
    workers: WorkersOption = DEFAULT_WORKERS,
    gate: Annotated[Switch, typer.Option("--gate", help="Screen programs with the static gate.")] = Switch.ON,
    allow_unisolated: UnisolatedOption = False,
    docker_image: DockerImageOption = None,
    docker_runtime: DockerRuntimeOption = None,
    docker_seccomp_profile: DockerSeccompOption = None,
) -> None:
    """Judge a JSON-lines batch of jobs; each result is written as soon as its job finishes."""
    err = Console(stderr=True, soft_wrap=True)
    config = _pool_config(
        backend=backend.value,
        workers=workers,
        gate=gate is Switch.ON,
        allow_unisolated=allow_unisolated,
        docker_image=docker_image,
        docker_runtime=docker_runtime,
        docker_seccomp_profile=docker_seccomp_profile,
    )
    try:
        with _open(in_path, "rb") as source, _open(out_path, "wb") as sink:
            summary = asyncio.run(_run(config, source, sink, err))
    except CannotRunError as exc:
        err.print(f"[red]executor run failed:[/red] {exc}")
        raise typer.Exit(EXIT_CANNOT_RUN) from None
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    codes = ", ".join(f"{code} {count}" for code, count in sorted(summary.codes.items())) or "none"
    err.print(
        f"{summary.results} results in {summary.elapsed_s:.2f}s: {summary.ok} ok ({summary.correct} checks "
        f"correct), {summary.not_ok} not ok ({summary.malformed} malformed, {summary.infra_errors} infra "
        f"errors); error classes: {codes}"
    )


def _pool_config(**fields: Any) -> PoolConfig:
    """The pool the options ask for; options that contradict each other are a usage error (exit 2)."""
    try:
        return PoolConfig(**fields)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


async def _run(config: PoolConfig, source: BinaryIO, sink: BinaryIO, err: Console) -> BatchSummary:
    async with _started(config) as pool:
        err.print(_isolation_line(pool.isolation))
        try:
            return await run_batch(pool, source, sink)
        except OSError as exc:
            raise CannotRunError(f"reading jobs or writing results failed: {exc}") from exc


@contextlib.asynccontextmanager
async def _started(config: PoolConfig) -> AsyncIterator[ExecutorPool]:
    """A started pool; every way a backend can fail to start becomes ``CannotRunError`` with its reason."""
    try:
        pool = await ExecutorPool.from_config(config).__aenter__()
    except (ExecutorError, ImportError, OSError, RuntimeError) as exc:
        hint = "" if config.allow_unisolated else " (on a development machine, --allow-unisolated may help)"
        raise CannotRunError(f"the {config.backend} backend did not start: {exc}{hint}") from exc
    try:
        yield pool
    finally:
        await pool.aclose()


@contextlib.contextmanager
def _open(path: str, mode: Literal["rb", "wb"]) -> Iterator[BinaryIO]:
    """``path`` opened in ``mode``; ``-`` is stdin or stdout, which stay open after the run."""
    if path == "-":
        yield sys.stdin.buffer if mode == "rb" else sys.stdout.buffer
        return
    try:
        stream = Path(path).open(mode)  # noqa: SIM115 - closed below, after the run
    except OSError as exc:
        verb = "read" if mode == "rb" else "write"
        raise CannotRunError(f"cannot {verb} {path}: {exc.strerror or exc}") from exc
    with stream:
        yield stream


@app.command("demo")
def demo(
    *,
    jobs_path: Annotated[
        Path | None, typer.Option("--jobs", help="Jobs file (default: examples/jobs.jsonl).")
    ] = None,
    backend: BackendOption = BackendChoice.LOCAL,
    workers: WorkersOption = DEFAULT_WORKERS,
    allow_unisolated: UnisolatedOption = False,
    docker_image: DockerImageOption = None,
    docker_runtime: DockerRuntimeOption = None,
    docker_seccomp_profile: DockerSeccompOption = None,
) -> None:
    """Validate and check the example jobs and show the verdicts as a table."""
    console = Console()
    path = jobs_path or _demo_jobs()
    config = _pool_config(
        backend=backend.value,
        workers=workers,
        allow_unisolated=allow_unisolated,
        docker_image=docker_image,
        docker_runtime=docker_runtime,
        docker_seccomp_profile=docker_seccomp_profile,
    )
    try:
        entries = _read_jobs(path)
        isolation, results = asyncio.run(_demo(config, entries))
    except CannotRunError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]executor demo failed:[/red] {exc}")
        raise typer.Exit(EXIT_CANNOT_RUN) from None
    table = Table(title=f"Executor verdicts ({path})")
    for column in ("job", "op", "type", "verdict", "detail", "ms"):
        table.add_column(column, justify="right" if column == "ms" else "left", overflow="fold")
    for entry, result in zip(entries, results, strict=True):
        job = entry if isinstance(entry, Job) else None
        table.add_row(
            result.id,
            job.op.value if job else "?",
            job.task.type.value if job else "?",
            _verdict(result, job),
            _detail(result, job),
            f"{result.elapsed_ms:.1f}",
        )
    console.print(table)
    console.print(_isolation_line(isolation))


async def _demo(
    config: PoolConfig, entries: list[Job | JobResult]
) -> tuple[IsolationReport, list[JobResult]]:
    """Judge the jobs concurrently; results come back in file order (malformed lines keep theirs)."""

    async def judged(entry: Job | JobResult, pool: ExecutorPool) -> JobResult:
        return await pool.submit(entry) if isinstance(entry, Job) else entry

    async with _started(config) as pool:
        return pool.isolation, list(await asyncio.gather(*(judged(entry, pool) for entry in entries)))


def _demo_jobs() -> Path:
    """``examples/jobs.jsonl`` of the working directory, else of the source tree this module is in."""
    if _DEMO_JOBS.is_file():
        return _DEMO_JOBS
    return Path(__file__).resolve().parents[3] / _DEMO_JOBS


def _read_jobs(path: Path) -> list[Job | JobResult]:
    """The jobs of ``path`` in order; a malformed line is already its (failed) result."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise CannotRunError(f"cannot read {path}: {exc.strerror or exc}") from exc
    entries: list[Job | JobResult] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entries.append(decode_job(line, number))
        except MalformedJobError as exc:
            entries.append(exc.result())
    return entries


def _verdict(result: JobResult, job: Job | None) -> str:
    if not result.ok:
        return "[red]invalid[/red]" if job and job.op is JobOp.VALIDATE else "[red]not judged[/red]"
    if result.correct is None:
        return "[green]valid[/green]"
    return "[green]correct[/green]" if result.correct else "[yellow]wrong[/yellow]"


def _detail(result: JobResult, job: Job | None) -> str:
    if result.error is not None:
        return f"{result.error.code.value}: {result.error.message}"
    if result.outputs is not None:
        return ", ".join(result.outputs)
    if job is None or job.answer is None or not job.task.outputs:
        return ""
    if job.task.type is TaskType.DEDUCTION:
        return f"predicted {job.answer}, gold {job.task.outputs[0]}"
    if job.task.type is TaskType.ABDUCTION:
        return f"input {job.answer} for output {job.task.outputs[0]}"
    held_out = len(job.task.induction_split()[1])
    return f"program judged on {held_out} held-out input{'s' * (held_out != 1)}"


def _isolation_line(report: IsolationReport) -> str:
    achieved = [name for name in ("network", "filesystem", "pid", "user", "rlimits") if getattr(report, name)]
    level = "full" if report.full else "PARTIAL"
    return f"backend {report.backend}: isolation {level} ({', '.join(achieved) or 'none'})"


@app.command("serve")
def serve(
    *,
    backend: BackendOption = BackendChoice.LOCAL,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; beyond loopback a token is required.")
    ] = ("127.0.0.1"),
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port to listen on.")] = 8090,
    workers: WorkersOption = DEFAULT_WORKERS,
    allow_unisolated: UnisolatedOption = False,
    docker_image: DockerImageOption = None,
    docker_runtime: DockerRuntimeOption = None,
    docker_seccomp_profile: DockerSeccompOption = None,
) -> None:
    """Serve the executor over HTTP. The bearer token comes from AZR_EXECUTOR_TOKEN (never the command
    line, where other users could read it); other settings from AZR_EXECUTOR_* variables, which the
    options given here override."""
    from pydantic import ValidationError

    from azr.services.executor_service.serve import InsecureBindError, serve_executor
    from azr.services.executor_service.settings import ExecutorServiceSettings

    docker: dict[str, Any] = {
        "docker_image": docker_image,
        "docker_runtime": docker_runtime,
        "docker_seccomp_profile": docker_seccomp_profile,
    }
    try:
        settings = ExecutorServiceSettings(
            backend=backend.value,
            workers=workers,
            allow_unisolated=allow_unisolated,
            **{name: value for name, value in docker.items() if value is not None},
        )
    except ValidationError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        serve_executor(settings, host=host, port=port)
    except InsecureBindError as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
