"""Fixtures that start real sandbox backends (real processes, real namespaces) and count their processes.

``backend`` is parametrised over ``BACKEND_FACTORIES``; another backend joins every backend test by adding
one entry there.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import psutil
import pytest

from azr.executor.backends.base import Backend, HashSeedSlot, RunOutcome, RunRequest
from azr.executor.backends.local import LocalBackend
from azr.executor.limits import SandboxLimits
from tests.executor.docker_support import docker_backend

CANARY_ENV = "AZR_SANDBOX_TEST_CANARY"
CANARY_SECRET = "canary-7f3b9e-do-not-leak"

BACKEND_FACTORIES: dict[str, Callable[[], Backend]] = {
    "local": lambda: LocalBackend(workers=1),
    "docker": docker_backend,  # skips without a Docker engine, fails instead under AZR_REQUIRE_DOCKER=1
}


@dataclass
class Harness:
    """A started backend driven from synchronous tests through its own event loop."""

    name: str
    backend: Backend
    loop: asyncio.AbstractEventLoop

    def run(
        self,
        program: str,
        args: Sequence[str] = ("1",),
        slot: HashSeedSlot = HashSeedSlot.A,
        limits: SandboxLimits | None = None,
    ) -> RunOutcome:
        request = RunRequest(program, tuple(args), slot, limits or SandboxLimits())
        return self.loop.run_until_complete(self.backend.run(request))

    def launched_pids(self) -> tuple[int, ...] | None:
        """Host PIDs of the backend's sandbox processes, or ``None`` when it has none (containers)."""
        pids: Callable[[], tuple[int, ...]] | None = getattr(self.backend, "process_ids", None)
        return None if pids is None else pids()


def start_harness(factory: Callable[[], Backend], name: str = "local") -> Harness:
    loop = asyncio.new_event_loop()
    backend = factory()
    start: Callable[[], object] | None = getattr(backend, "start", None)
    if start is not None:
        loop.run_until_complete(start())  # type: ignore[arg-type]
    return Harness(name, backend, loop)


def stop_harness(harness: Harness) -> None:
    try:
        harness.loop.run_until_complete(harness.backend.aclose())
    finally:
        harness.loop.close()


@pytest.fixture(scope="module", params=sorted(BACKEND_FACTORIES))
def backend(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """A started backend shared by a test module; the parent's environment holds a secret canary."""
    previous = os.environ.get(CANARY_ENV)
    os.environ[CANARY_ENV] = CANARY_SECRET
    harness = start_harness(BACKEND_FACTORIES[request.param], request.param)
    try:
        yield harness
    finally:
        stop_harness(harness)
        if previous is None:
            os.environ.pop(CANARY_ENV, None)
        else:
            os.environ[CANARY_ENV] = previous


def descendants(pid: int) -> list[psutil.Process]:
    try:
        children: list[psutil.Process] = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return children


def stray_processes(harness: Harness) -> list[psutil.Process]:
    """Processes below the backend's launched processes beyond a supervisor, a zygote and a blank job each.

    Between requests every sandbox holds exactly its supervisor, its zygote and one job process forked in
    advance (waiting for its request); anything more outlived a job. Backends
    without host processes (containers) check their own cleanup in their own tests.
    """
    stray: list[psutil.Process] = []
    for pid in harness.launched_pids() or ():
        below = [p for p in descendants(pid) if _sandboxed(p)]
        stray += below[3:]
    return stray


# A container's shim runs the runtime now and then (state, kill, delete while a container is recycled);
# those are the engine's own short-lived processes, not anything a job started.
_RUNTIME_HELPERS = frozenset({"runc", "containerd-shim", "containerd-shim-runc-v2"})


def _sandboxed(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE and process.name() not in _RUNTIME_HELPERS
    except psutil.NoSuchProcess:
        return False


def executor_processes() -> list[psutil.Process]:
    """Live processes started (directly or not) by this test process that belong to a sandbox."""
    found = []
    for process in descendants(os.getpid()):
        try:
            if (
                "azr.executor.sandbox.supervisor" in " ".join(process.cmdline())
                or process.uids().real == 65534
            ):
                found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture(scope="session", autouse=True)
def no_executor_process_survives() -> Iterator[None]:
    """After the whole session, nothing the executor started may still run."""
    yield
    survivors = executor_processes()
    assert not survivors, f"executor processes survived the suite: {survivors}"
