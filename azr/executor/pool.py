"""The executor's Python API: a pool of sandboxed workers behind the trusted judge.

Services use this module, never a backend directly::

    async with ExecutorPool.create(backend="local", workers=2) as pool:
        validation = await pool.validate(task)           # gold outputs, or why the task is invalid
        judgement = await pool.check(task, "4")          # ok / correct / error
        async for result in pool.map(jobs):              # JobResults as they finish
            ...

Scripts without an event loop use the synchronous facade::

    with SyncExecutorPool(backend="local", workers=2) as pool:
        print(pool.validate(task).outputs)

Entering the pool runs one probe program in each primary hash-seed slot, so a backend that cannot run programs
fails here, at start-up, rather than turning every later job into an ``infra_error``. Concurrency is
bounded by ``max_in_flight`` across all callers; ``map`` keeps at most that many jobs running and yields
each result as soon as it is ready, so one slow job never holds back the others.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, Self, TypeVar, runtime_checkable

from azr.core.task import Task
from azr.executor.backends.base import Backend, IsolationReport
from azr.executor.errors import ErrorCode, ExecError, ExecutorError
from azr.executor.jobs import Job, JobOp, JobResult, Judgement, Validation
from azr.executor.limits import SandboxLimits
from azr.executor.ops import Judge
from azr.executor.sandbox.records import PRIMARY_SLOTS, RunRequest

log = logging.getLogger(__name__)

BackendName = Literal["local", "docker"]
R = TypeVar("R", Validation, Judgement)

_PROBE = RunRequest(program="def f(x):\n    return x", args=("0",))


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """How to build an executor pool: the one configuration the CLI, the executor service and the
    self-play loop all pass (nothing is read from the environment behind it)."""

    backend: BackendName = "local"
    """Where programs run: ``local`` (namespaced processes on this host) or ``docker`` (containers)."""
    workers: int = 2
    """Sandbox workers the backend keeps warm; about one per core is right."""
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    """Resource limits of every sandboxed run."""
    gate: bool = True
    """Screen task programs and induction answers with the static gate before running them."""
    allow_unisolated: bool = False
    """Let the local backend run with weaker isolation than it asks for (development machines only)."""
    max_in_flight: int | None = None
    """Jobs judged at once across all callers; ``None`` means two per worker."""
    docker_image: str | None = None
    """Docker backend: the sandbox image; ``None`` is the one built from this checkout
    (docker/build-sandbox-image.sh)."""
    docker_runtime: str | None = None
    """Docker backend: the OCI runtime, e.g. ``runsc`` for gVisor; ``None`` is the engine's default."""
    docker_seccomp_profile: Path | None = None
    """Docker backend: a seccomp profile (JSON) to apply instead of the engine's default profile."""

    def __post_init__(self) -> None:
        if self.backend not in ("local", "docker"):
            raise ValueError(f"backend must be 'local' or 'docker', got {self.backend!r}")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.max_in_flight is not None and self.max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1 (or None for two per worker)")
        docker_only: dict[str, object] = {
            "docker_image": self.docker_image,
            "docker_runtime": self.docker_runtime,
            "docker_seccomp_profile": self.docker_seccomp_profile,
        }
        given = sorted(name for name, value in docker_only.items() if value is not None)
        if self.backend != "docker" and given:
            raise ValueError(f"{', '.join(given)} only apply to the docker backend; drop them or use it")

    @property
    def in_flight(self) -> int:
        return self.max_in_flight or 2 * self.workers


@runtime_checkable
class Startable(Protocol):
    """A backend that starts its workers in an explicit step (raising when it cannot start)."""

    async def start(self) -> None: ...


def make_backend(config: PoolConfig) -> Backend:
    """Build the backend named by ``config``; heavy backends are imported only when chosen."""
    if config.backend == "docker":
        from azr.executor.backends.docker import DockerBackend, DockerConfig

        docker = DockerConfig(
            image=config.docker_image,
            runtime=config.docker_runtime,
            seccomp_profile=config.docker_seccomp_profile,
        )
        backend: Backend = DockerBackend(config.workers, config.limits, config=docker)
        return backend
    from azr.executor.backends.local import LocalBackend

    return LocalBackend(config.workers, config.limits, allow_unisolated=config.allow_unisolated)


class ExecutorPool:
    """Judge jobs on a backend with bounded concurrency; an async context manager that owns its backend."""

    def __init__(
        self,
        backend: Backend,
        *,
        limits: SandboxLimits | None = None,
        gate: bool = True,
        max_in_flight: int = 4,
        owns_backend: bool = False,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._backend = backend
        self._judge = Judge(backend, limits=limits, gate=gate)
        self._slots = asyncio.Semaphore(max_in_flight)
        self._max_in_flight = max_in_flight
        self._owns_backend = owns_backend

    @classmethod
    def create(
        cls,
        backend: BackendName = "local",
        *,
        workers: int = 2,
        limits: SandboxLimits | None = None,
        gate: bool = True,
        allow_unisolated: bool = False,
        max_in_flight: int | None = None,
    ) -> ExecutorPool:
        """A pool with a new backend, started when the pool is entered and stopped when it is left."""
        config = PoolConfig(
            backend=backend,
            workers=workers,
            limits=limits or SandboxLimits(),
            gate=gate,
            allow_unisolated=allow_unisolated,
            max_in_flight=max_in_flight,
        )
        return cls.from_config(config)

    @classmethod
    def from_config(cls, config: PoolConfig) -> ExecutorPool:
        return cls(
            make_backend(config),
            limits=config.limits,
            gate=config.gate,
            max_in_flight=config.in_flight,
            owns_backend=True,
        )

    @property
    def isolation(self) -> IsolationReport:
        return self._backend.isolation

    async def __aenter__(self) -> Self:
        try:
            if isinstance(self._backend, Startable):
                await self._backend.start()
            await self._probe()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_backend:
            await self._backend.aclose()

    async def validate(self, task: Task) -> Validation:
        """Gold outputs of ``task``, or the error that makes it invalid."""
        return (await self._validate(task))[0]

    async def check(self, task: Task, answer: str) -> Judgement:
        """Whether ``answer`` to ``task`` is right (see ``azr.executor.jobs`` for ok/correct/error)."""
        return (await self._check(task, answer))[0]

    async def submit(self, job: Job) -> JobResult:
        """Judge one job; always returns a result (an unexpected fault becomes ``infra_error``)."""
        if job.op is JobOp.VALIDATE:
            validation, elapsed_ms = await self._validate(job.task)
            return JobResult.of(job.id, validation, elapsed_ms)
        judgement, elapsed_ms = await self._check(job.task, job.answer or "")
        return JobResult.of(job.id, judgement, elapsed_ms)

    async def _validate(self, task: Task) -> tuple[Validation, float]:
        outcome, elapsed_ms = await self._guarded(self._judge.validate(task))
        return (outcome if isinstance(outcome, Validation) else Validation(None, outcome)), elapsed_ms

    async def _check(self, task: Task, answer: str) -> tuple[Judgement, float]:
        outcome, elapsed_ms = await self._guarded(self._judge.check(task, answer))
        return (outcome if isinstance(outcome, Judgement) else Judgement.invalid(outcome)), elapsed_ms

    async def _guarded(self, judging: Coroutine[Any, Any, R]) -> tuple[R | ExecError, float]:
        """Run ``judging`` under the concurrency bound and time it (waiting for a slot excluded).

        A fault of the executor itself (a bug, a backend that raises) becomes ``infra_error``.
        """
        async with self._slots:
            started = time.perf_counter()
            try:
                outcome: R | ExecError = await judging
            except Exception as exc:
                log.exception("executor fault while judging")
                outcome = ExecError(ErrorCode.INFRA_ERROR, f"executor fault: {exc!r}")
            return outcome, (time.perf_counter() - started) * 1000

    async def map(self, jobs: Iterable[Job] | AsyncIterable[Job]) -> AsyncIterator[JobResult]:
        """Yield a result for every job, in the order they finish, with at most ``max_in_flight`` running.

        The next job is fetched while others run, so a slow source (a pipe) does not delay results either.
        """
        source = _aiter(jobs)
        running: set[asyncio.Task[JobResult]] = set()
        fetch: asyncio.Task[Job | None] | None = None
        exhausted = False
        try:
            while True:
                if fetch is None and not exhausted and len(running) < self._max_in_flight:
                    fetch = asyncio.create_task(_next(source))
                waiting: set[asyncio.Future[Any]] = {*running, *([fetch] if fetch else [])}
                if not waiting:
                    return
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if fetch is not None and fetch.done():
                    job = fetch.result()
                    fetch = None
                    if job is None:
                        exhausted = True
                    else:
                        running.add(asyncio.create_task(self.submit(job)))
                finished = running & done
                running -= finished
                for task in finished:
                    yield task.result()
        finally:
            leftovers: list[asyncio.Future[Any]] = [*running, *([fetch] if fetch else [])]
            for future in leftovers:
                future.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)
            if isinstance(source, AsyncGenerator):
                await source.aclose()

    async def _probe(self) -> None:
        """Run the identity program in the primary slots; anything but ``'0'`` back means a broken backend."""
        for slot in PRIMARY_SLOTS:
            request = RunRequest(_PROBE.program, _PROBE.args, slot=slot, limits=self._judge.limits)
            outcome = await self._backend.run(request)
            calls = outcome.calls
            if outcome.error is not None or len(calls) != 1 or calls[0].output != "0":
                detail = outcome.error or (calls[0].error if calls else None)
                raise ExecutorError(
                    ErrorCode.INFRA_ERROR,
                    f"the {slot.value} slot of the backend failed its start-up probe: {detail or calls}",
                )


class SyncExecutorPool:
    """A blocking facade over ``ExecutorPool`` for scripts and notebooks without an event loop.

    >>> with SyncExecutorPool(backend="local", workers=1) as pool:  # doctest: +SKIP
    ...     pool.check(task, "4").correct
    True
    """

    def __init__(
        self,
        backend: BackendName = "local",
        *,
        workers: int = 2,
        limits: SandboxLimits | None = None,
        gate: bool = True,
        allow_unisolated: bool = False,
        max_in_flight: int | None = None,
    ) -> None:
        self._config = PoolConfig(
            backend=backend,
            workers=workers,
            limits=limits or SandboxLimits(),
            gate=gate,
            allow_unisolated=allow_unisolated,
            max_in_flight=max_in_flight,
        )
        self._runner: asyncio.Runner | None = None
        self._pool: ExecutorPool | None = None

    def __enter__(self) -> Self:
        runner = asyncio.Runner()
        try:
            pool = runner.run(self._start())
        except BaseException:
            runner.close()
            raise
        self._runner, self._pool = runner, pool
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        runner, pool = self._running()
        try:
            runner.run(pool.aclose())
        finally:
            runner.close()
            self._runner = self._pool = None

    @property
    def isolation(self) -> IsolationReport:
        return self._running()[1].isolation

    def validate(self, task: Task) -> Validation:
        runner, pool = self._running()
        return runner.run(pool.validate(task))

    def check(self, task: Task, answer: str) -> Judgement:
        runner, pool = self._running()
        return runner.run(pool.check(task, answer))

    def run(self, jobs: Iterable[Job]) -> list[JobResult]:
        """Judge every job concurrently; results come back in the order of ``jobs``."""
        runner, pool = self._running()

        async def gather() -> list[JobResult]:
            return list(await asyncio.gather(*(pool.submit(job) for job in jobs)))

        return runner.run(gather())

    async def _start(self) -> ExecutorPool:
        # The backend is built inside the runner's loop so that its processes and pipes belong to it.
        return await ExecutorPool.from_config(self._config).__aenter__()

    def _running(self) -> tuple[asyncio.Runner, ExecutorPool]:
        if self._runner is None or self._pool is None:
            raise RuntimeError("use SyncExecutorPool in a 'with' block")
        return self._runner, self._pool


def _aiter(jobs: Iterable[Job] | AsyncIterable[Job]) -> AsyncIterator[Job]:
    if isinstance(jobs, AsyncIterable):
        return aiter(jobs)

    async def from_sync() -> AsyncIterator[Job]:
        for job in jobs:
            yield job

    return from_sync()


async def _next(source: AsyncIterator[Job]) -> Job | None:
    """The next job, or ``None`` at the end (a task must not raise ``StopAsyncIteration``)."""
    try:
        return await anext(source)
    except StopAsyncIteration:
        return None
