"""The ``docker`` backend: a warm pool of hardened sandbox containers, each running the supervisor.

A job costs one fork inside an already running container (a few milliseconds), not a ``docker run``
(about a second) or a ``docker exec`` (about a hundred milliseconds). Each hash-seed slot has its own
containers (``PYTHONHASHSEED`` from ``protocol.SLOT_HASH_SEEDS``), each serving one request at a time.

Threat model
------------
Covered, per container (see ``docker_container.container_options``): no network (``network_mode=none``),
read-only root file system with a small ``noexec`` tmpfs as the only writable place, every capability
dropped, ``no-new-privileges``, the engine's seccomp profile (or a given one), pids/memory/CPU limits with
no swap, an unprivileged user, no volumes and never the Docker socket, no core dumps; the supervisor is
the container's PID 1, so a job cannot kill it and nothing a job starts outlives the job. A container is
recycled after ``jobs_per_container`` jobs and at once after a timeout, an out-of-memory kill, a crash or
a protocol error, so a job that managed to damage its container affects at most itself.

Not covered: the shared kernel (a kernel exploit escapes runc; set ``runtime="runsc"`` where gVisor is
installed), CPU side channels, and a compromised Docker engine. Containers started by a process that
died are removed by the next backend's orphan sweep (they stop by themselves when their stdin closes).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azr.executor.backends.base import IsolationReport
from azr.executor.backends.docker_container import ContainerError, ContainerSpec, SandboxContainer
from azr.executor.backends.docker_engine import (
    LABEL,
    OWNER_LABEL,
    POOL_LABEL,
    DockerUnavailableError,
    connect,
    image_missing,
    measure_isolation,
    owner_id,
    remove_by_label,
    remove_orphans,
)
from azr.executor.backends.docker_image import image_ref
from azr.executor.errors import ErrorCode, ExecError
from azr.executor.limits import SandboxLimits
from azr.executor.sandbox.records import PRIMARY_SLOTS, HashSeedSlot, RunOutcome, RunRequest

log = logging.getLogger(__name__)


_RECYCLE_CODES = frozenset({ErrorCode.TIMEOUT, ErrorCode.MEMORY_LIMIT, ErrorCode.INFRA_ERROR})
"""Outcomes after which a container is replaced at once, whatever its job count."""
_MEMORY_HEADROOM_BYTES = 128 * 1024**2
"""Container memory on top of a job's RLIMIT_AS: the supervisor and the kernel's page cache."""


@dataclass(frozen=True, slots=True)
class DockerConfig:
    image: str | None = None
    """Sandbox image; ``None`` means the one built from this checkout (docker/build-sandbox-image.sh)."""
    jobs_per_container: int = 500
    """Requests a container serves before it is replaced by a fresh one."""
    memory_bytes: int | None = None
    """Memory (and memory+swap) limit of a container; ``None``: the job's memory limit + 128 MiB. Keep it
    above the jobs' ``memory_bytes``: a job killed by the container's limit rather than its own RLIMIT_AS
    is reported as ``runtime_error`` (killed by SIGKILL), not ``memory_limit``."""
    cpus: float = 1.0
    """CPU share of one container, in cores."""
    pids_limit: int = 32
    """Processes a container may hold at once (supervisor, job, and anything the job starts)."""
    tmpfs_bytes: int = 32 * 1024**2
    """Size of the container's only writable file system, /tmp (counted against its memory)."""
    runtime: str | None = None
    """OCI runtime, e.g. ``runsc`` for gVisor; ``None`` uses the engine's default (runc)."""
    seccomp_profile: Path | None = None
    """A seccomp profile (JSON) to apply instead of the engine's default profile."""
    start_timeout_s: float = 30.0
    """How long a new container may take to report ready."""
    acquire_timeout_s: float = 60.0
    """How long a request waits for a free container while none of its slot's containers is busy, comes
    free or starts (a stuck pool), before it fails with ``infra_error``; waiting behind busy ones (each
    bounded by its request's deadline) has no limit of its own."""
    health_interval_s: float = 5.0
    """How often idle containers are checked with the engine (dead ones are replaced)."""
    base_url: str | None = None
    """Docker engine address; ``None`` reads DOCKER_HOST, else the local socket."""

    def __post_init__(self) -> None:
        if self.jobs_per_container < 1:
            raise ValueError("jobs_per_container must be at least 1")
        if self.memory_bytes is not None and self.memory_bytes < 64 * 1024**2:
            raise ValueError("memory_bytes below 64 MiB cannot run the supervisor; raise it or use None")
        if self.cpus <= 0 or self.pids_limit < 4 or self.tmpfs_bytes < 1024**2:
            raise ValueError("cpus must be positive, pids_limit at least 4 and tmpfs_bytes at least 1 MiB")
        if min(self.start_timeout_s, self.acquire_timeout_s, self.health_interval_s) <= 0:
            raise ValueError("start_timeout_s, acquire_timeout_s and health_interval_s must be positive")


@dataclass
class _Slot:
    """The containers of one hash-seed slot: idle ones wait in ``idle``; ``size`` counts all of them."""

    idle: collections.deque[SandboxContainer] = field(default_factory=collections.deque)
    size: int = 0
    ready: asyncio.Condition = field(default_factory=asyncio.Condition)
    progress: int = 0
    """Containers released or newly started so far: a waiter that sees it move keeps waiting."""
    busy: int = 0
    """Containers running a request now: each will come free (or be replaced) within its deadline."""


class DockerBackend:
    """Runs requests in a warm pool of ``workers`` containers per hash-seed slot (the primary slots from
    the start, the others from their first request).

    The pool starts on the first request (or ``await start()``) and ``aclose()`` removes every container
    it made. Use one backend per event loop.
    """

    def __init__(
        self, workers: int = 2, limits: SandboxLimits | None = None, *, config: DockerConfig | None = None
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._workers = workers
        self._config = config or DockerConfig()
        limits = limits or SandboxLimits()
        self._image = self._config.image or image_ref()
        self._spec = ContainerSpec(
            image=self._image,
            memory_bytes=self._config.memory_bytes or limits.memory_bytes + _MEMORY_HEADROOM_BYTES,
            nano_cpus=int(self._config.cpus * 1e9),
            pids_limit=self._config.pids_limit,
            tmpfs_bytes=self._config.tmpfs_bytes,
            runtime=self._config.runtime,
            seccomp_profile=self._config.seccomp_profile.read_text()
            if self._config.seccomp_profile
            else None,
            labels=(
                (LABEL, "1"),
                (OWNER_LABEL, owner_id(os.getpid()) or "unknown"),
                (POOL_LABEL, secrets.token_hex(8)),
            ),
        )
        self._pool_id = dict(self._spec.labels)[POOL_LABEL]
        self._client: Any = None
        self._slots = {slot: _Slot() for slot in HashSeedSlot}
        self._opened: set[HashSeedSlot] = set()
        self._live: set[SandboxContainer] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._health: asyncio.Task[None] | None = None
        self._start_lock = asyncio.Lock()
        self._started = False
        self._closing = False
        self._isolation = IsolationReport("docker", False, False, False, False, False, ("not started yet",))
        self._counts = collections.Counter[str]()

    @property
    def isolation(self) -> IsolationReport:
        return self._isolation

    @property
    def image(self) -> str:
        return self._image

    @property
    def pool_id(self) -> str:
        """Value of ``POOL_LABEL`` on this backend's containers."""
        return self._pool_id

    def pool_stats(self) -> dict[str, int]:
        """Counters for health checks and metrics."""
        return {
            "containers": sum(slot.size for slot in self._slots.values()),
            "idle": sum(len(slot.idle) for slot in self._slots.values()),
            "target": self._workers * len(self._opened),
            "started_total": self._counts["started"],
            "recycled_total": self._counts["recycled"],
            "start_failures_total": self._counts["start_failures"],
        }

    def process_ids(self) -> tuple[int, ...]:
        """Host pids of the processes that hold each live container's supervisor (its runtime shim), for
        tests that look for processes outliving a job; containers whose processes the host cannot see
        are left out."""
        pids = []
        for container in self._live:
            if container.host_pid:
                with contextlib.suppress(OSError, IndexError, ValueError):
                    stat = Path(f"/proc/{container.host_pid}/stat").read_text()
                    pids.append(int(stat.rpartition(")")[2].split()[1]))  # field 4 of proc(5): the parent
        return tuple(pids)

    async def start(self) -> None:
        """Connect, sweep orphans, start the pool and measure its isolation.

        Raises ``DockerUnavailableError`` when the engine or the image is missing.
        """
        async with self._start_lock:
            if self._started:
                return
            if self._closing:
                raise DockerUnavailableError("the docker backend is closed")
            self._client = await asyncio.to_thread(connect, self._config.base_url, self._image)
            await asyncio.to_thread(remove_orphans, self._client)
            # One container first: if sandboxes cannot start, this fails now, with the engine's reason.
            try:
                first = await self._start_container(HashSeedSlot.A)
            except ContainerError as fault:
                raise DockerUnavailableError(f"the first sandbox container did not start: {fault}") from None
            try:
                self._isolation = await measure_isolation(
                    first, custom_seccomp=self._spec.seccomp_profile is not None
                )
            except ContainerError as fault:
                await self._destroy(first)
                raise DockerUnavailableError(
                    f"the first sandbox container failed its probe: {fault}"
                ) from None
            self._slots[HashSeedSlot.A].size += 1
            await self._release(first)
            for slot in PRIMARY_SLOTS:
                self._open_slot(slot)
            self._health = asyncio.create_task(self._health_loop())
            self._started = True
            await self._wait_until_full()

    async def _wait_until_full(self) -> None:
        """Give the initial containers up to ``start_timeout_s`` to come up (the rest keep starting)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._config.start_timeout_s):
                for state in (self._slots[slot] for slot in PRIMARY_SLOTS):
                    async with state.ready:
                        await state.ready.wait_for(lambda: len(state.idle) >= self._workers)  # noqa: B023

    async def run(self, request: RunRequest) -> RunOutcome:
        await self.start()
        started = time.perf_counter()
        self._open_slot(request.slot)
        try:
            container = await self._acquire(request.slot)
        except TimeoutError:
            message = f"no sandbox container came free or started for {self._config.acquire_timeout_s} s"
            return _failed(ExecError(ErrorCode.INFRA_ERROR, message), started)
        try:
            outcome = await container.run(request)
        except ContainerError as fault:
            self._recycle(container, str(fault))
            return _failed(fault.error, started)
        except BaseException:
            self._recycle(container, "request cancelled mid-flight")  # the channel is in an unknown state
            raise
        finally:
            self._slots[request.slot].busy -= 1
        codes = {call.error.code for call in outcome.calls if call.error is not None}
        if outcome.error is not None:
            codes.add(outcome.error.code)
        if codes & _RECYCLE_CODES:
            self._recycle(container, f"job ended with {', '.join(sorted(codes & _RECYCLE_CODES))}")
        elif container.jobs_done >= self._config.jobs_per_container:
            self._recycle(container, f"served {container.jobs_done} jobs")
        else:
            await self._release(container)
        return outcome

    async def aclose(self) -> None:
        self._closing = True
        async with self._start_lock:
            # Replacements and removals in flight are waited for, not cancelled: a cancelled await leaves
            # its engine call running in a worker thread, which could create a container after the sweep
            # below (left in Created) or race it to a removal (the engine's 409). They see ``_closing``
            # and stop, destroying what they started; only what overruns the bound is cancelled.
            if self._health is not None:
                self._health.cancel()
            tasks = list(self._background)
            _, overrun = (
                await asyncio.wait(tasks, timeout=self._config.start_timeout_s) if tasks else ((), ())
            )
            for task in overrun:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.gather(
                *(container.destroy() for container in list(self._live)), return_exceptions=True
            )
            self._live.clear()
            if self._client is not None:
                await asyncio.to_thread(remove_by_label, self._client, f"{POOL_LABEL}={self._pool_id}")
            for slot in self._slots.values():
                slot.idle.clear()
                slot.size = 0
            if self._client is not None:
                await asyncio.to_thread(self._client.close)
                self._client = None

    async def __aenter__(self) -> DockerBackend:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- pool mechanics ------------------------------------------------------------------------------

    async def _acquire(self, slot: HashSeedSlot) -> SandboxContainer:
        """A free container of ``slot``, waiting as long as the slot's containers make progress.

        ``TimeoutError`` only when a whole ``acquire_timeout_s`` passed with no container of the slot
        busy, coming free or starting: behind one slow legal job a request waits, it does not fail.
        """
        state = self._slots[slot]
        async with state.ready:
            while True:
                progress = state.progress
                try:
                    async with asyncio.timeout(self._config.acquire_timeout_s):
                        await state.ready.wait_for(lambda: bool(state.idle) or self._closing)
                except TimeoutError:
                    if state.progress == progress and not state.busy:
                        raise
                    continue
                if self._closing:
                    raise TimeoutError
                container = state.idle.popleft()
                if container.alive:
                    state.busy += 1
                    return container
                self._recycle(container, "its supervisor exited while idle")

    async def _release(self, container: SandboxContainer) -> None:
        state = self._slots[container.slot]
        async with state.ready:
            state.idle.append(container)
            state.progress += 1
            state.ready.notify_all()

    def _recycle(self, container: SandboxContainer, reason: str) -> None:
        """Destroy ``container`` in the background and start its replacement."""
        log.info("recycling sandbox container %s: %s", container.id[:12], reason)
        self._counts["recycled"] += 1
        self._slots[container.slot].size -= 1
        self._spawn(self._destroy(container))
        if not self._closing:
            self._replenish(container.slot)

    def _open_slot(self, slot: HashSeedSlot) -> None:
        """Start a slot's containers, once: the primary slots at start, the others on first use."""
        if slot in self._opened or self._closing:
            return
        self._opened.add(slot)
        for _ in range(self._workers - self._slots[slot].size):
            self._replenish(slot)

    def _replenish(self, slot: HashSeedSlot) -> None:
        self._slots[slot].size += 1  # counted from now on, so concurrent recycles do not overshoot
        self._spawn(self._fill(slot))

    async def _fill(self, slot: HashSeedSlot) -> None:
        delay_s = 0.5
        while not self._closing:
            try:
                container = await self._start_container(slot)
            except (ContainerError, DockerUnavailableError) as exc:
                self._counts["start_failures"] += 1
                log.warning("could not start a sandbox container (retrying in %.1f s): %s", delay_s, exc)
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, 10.0)
                continue
            if self._closing:  # the pool closed while this one started: it must not outlive the pool
                await self._destroy(container)
                break
            await self._release(container)
            return
        self._slots[slot].size -= 1

    async def _start_container(self, slot: HashSeedSlot) -> SandboxContainer:
        import docker.errors

        try:
            container = await SandboxContainer.start(
                self._client, self._spec, slot, self._config.start_timeout_s
            )
        except docker.errors.ImageNotFound:
            raise DockerUnavailableError(image_missing(self._image)) from None
        except docker.errors.APIError as exc:
            raise DockerUnavailableError(
                f"the Docker engine refused to start a sandbox container: {exc}"
            ) from None
        self._counts["started"] += 1
        self._live.add(container)
        return container

    async def _destroy(self, container: SandboxContainer) -> None:
        try:
            await container.destroy()
        finally:
            self._live.discard(container)

    async def _health_loop(self) -> None:
        """Replace idle containers whose supervisor exited or that the engine no longer runs."""
        import docker.errors

        while not self._closing:
            await asyncio.sleep(self._config.health_interval_s)
            for state in self._slots.values():
                for container in list(state.idle):
                    try:
                        running = (await asyncio.to_thread(container.inspect))["State"]["Running"]
                    except docker.errors.APIError:
                        running = False
                    if (not running or not container.alive) and container in state.idle:
                        state.idle.remove(container)
                        self._recycle(container, "health check failed")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _failed(error: ExecError, started: float) -> RunOutcome:
    return RunOutcome(calls=(), error=error, elapsed_ms=(time.perf_counter() - started) * 1000)
