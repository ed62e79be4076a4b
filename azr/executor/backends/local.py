"""The ``local`` backend: warm sandbox supervisors on this host, each inside its own bubblewrap namespaces.

Threat model
------------
Covered: everything ``sandbox.launch`` (namespaces, filesystem view, unprivileged user) and
``sandbox.supervisor`` (fork per call, rlimits, wall-clock kill, namespace-wide cleanup) provide. Here:
the achieved isolation is probed from inside a supervisor at start, never assumed, and the backend refuses
to start without full isolation unless ``allow_unisolated`` is given. Everything a supervisor sends is
validated; a supervisor that dies, hangs or breaks the protocol is killed and replaced, and the request it
held is answered ``infra_error`` (never a verdict about the program).

Not covered: see ``sandbox.launch`` (kernel attack surface, CPU/memory shares between sandboxes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from azr.executor.backends.base import IsolationReport
from azr.executor.errors import ErrorCode, ExecError
from azr.executor.limits import SandboxLimits
from azr.executor.sandbox import launch, protocol
from azr.executor.sandbox.probe import describe_kernel_guards
from azr.executor.sandbox.records import PRIMARY_SLOTS, HashSeedSlot, RunOutcome, RunRequest

logger = logging.getLogger(__name__)

_MIN_SCRATCH_BYTES = 16 * 1024**2
_GRACEFUL_EXIT_S = 5.0
_RESPAWN_ATTEMPTS = 5


class IsolationUnavailableError(RuntimeError):
    """Full isolation could not be achieved and ``allow_unisolated`` was not given."""


@dataclass(eq=False)
class _Supervisor:
    slot: HashSeedSlot
    process: asyncio.subprocess.Process
    stderr_task: asyncio.Task[None]
    sandbox_pid: int | None = None
    """Host PID of the sandbox's PID 1 (the supervisor) when it runs in its own PID namespace."""

    @property
    def pid(self) -> int:
        return self.process.pid

    async def request(self, frame: bytes, timeout_s: float) -> protocol.JsonObject:
        return await asyncio.wait_for(self._exchange(frame), timeout_s)

    async def _exchange(self, frame: bytes) -> protocol.JsonObject:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(frame)
        await self.process.stdin.drain()  # a hung supervisor stops reading: the caller's timeout covers it
        return await protocol.read_frame_async(self.process.stdout)

    async def stop(self, graceful: bool) -> None:
        """Stop and wait until the supervisor and everything in its sandbox are gone."""
        if graceful and self.process.stdin is not None and self.process.returncode is None:
            self.process.stdin.close()  # an idle supervisor exits on end of input
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), _GRACEFUL_EXIT_S)
        if self.process.returncode is None and self.sandbox_pid is not None:
            # Killing PID 1 of the namespace kills all of it; bubblewrap exits once the namespace is empty.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.sandbox_pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), _GRACEFUL_EXIT_S)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()
        self.stderr_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.stderr_task


class LocalBackend:
    """``workers`` supervisors per hash-seed slot; each runs one request at a time. The primary slots
    start with the backend, the others on their first request.

    Use ``async with LocalBackend(...) as backend`` (or ``await LocalBackend.create(...)`` and
    ``aclose``). ``limits`` sizes the sandbox scratch space; each request carries its own limits.
    """

    def __init__(
        self,
        workers: int = 1,
        limits: SandboxLimits | None = None,
        allow_unisolated: bool = False,
        startup_timeout_s: float = 30.0,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1 (supervisors per hash-seed slot)")
        self.workers = workers
        self.limits = limits or SandboxLimits()
        self.allow_unisolated = allow_unisolated
        self.startup_timeout_s = startup_timeout_s
        # None in a queue means "this slot has no supervisor left": waiters pass it on and fail fast.
        self._idle: dict[HashSeedSlot, asyncio.Queue[_Supervisor | None]] = {
            s: asyncio.Queue() for s in HashSeedSlot
        }
        self._all: set[_Supervisor] = set()
        self._replacing: set[asyncio.Task[None]] = set()
        self._lost = dict.fromkeys(HashSeedSlot, 0)
        self._started_slots: set[HashSeedSlot] = set()
        self._slot_lock = asyncio.Lock()
        self._isolation: IsolationReport | None = None
        self._isolated = True
        self._tmp_dir: Path | None = None
        self._details: tuple[str, ...] = ()
        self._closed = False

    @classmethod
    async def create(
        cls, workers: int = 1, limits: SandboxLimits | None = None, allow_unisolated: bool = False
    ) -> LocalBackend:
        backend = cls(workers, limits, allow_unisolated)
        await backend.start()
        return backend

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def isolation(self) -> IsolationReport:
        if self._isolation is None:
            raise RuntimeError("LocalBackend.start() has not completed")
        return self._isolation

    def process_ids(self) -> tuple[int, ...]:
        """Host PIDs of the launched supervisor processes (for operators and tests)."""
        return tuple(sorted(s.pid for s in self._all))

    @property
    def _tmp(self) -> Path:
        """Private host directory of this backend: launch stage, probe canary, unisolated scratch."""
        if self._tmp_dir is None:
            self._tmp_dir = Path(tempfile.mkdtemp(prefix="azr-local-backend-"))
            self._tmp_dir.chmod(0o755)  # as root the sandbox is launched as nobody and must reach its stage
        return self._tmp_dir

    async def start(self) -> None:
        try:
            first = await self._first_supervisor()
            self._isolation = await self._probe(first)
            if not self._isolation.full and not self.allow_unisolated:
                raise IsolationUnavailableError(f"isolation incomplete: {self._isolation}")
            if not self._isolation.full:
                logger.warning(
                    "!!! LOCAL BACKEND RUNS UNTRUSTED CODE WITHOUT FULL ISOLATION: %s", self._isolation
                )
            self._idle[first.slot].put_nowait(first)
            slots = [s for s in PRIMARY_SLOTS for _ in range(self.workers)]
            slots.remove(first.slot)
            for supervisor in await asyncio.gather(*(self._spawn(slot) for slot in slots)):
                self._idle[supervisor.slot].put_nowait(supervisor)
            self._started_slots.update(PRIMARY_SLOTS)
        except BaseException:
            await self.aclose()
            raise

    async def _first_supervisor(self) -> _Supervisor:
        try:
            return await self._spawn(HashSeedSlot.A)
        except (OSError, EOFError, protocol.ProtocolError, TimeoutError) as exc:
            if not self._isolated or not self.allow_unisolated:
                raise IsolationUnavailableError(f"cannot start a sandboxed supervisor: {exc}") from exc
            logger.warning("bubblewrap sandbox failed (%s); falling back to unisolated supervisors", exc)
            self._isolated = False
            return await self._spawn(HashSeedSlot.A)

    def _plan(self, slot: HashSeedSlot, info_fd: int) -> launch.LaunchPlan:
        seed = protocol.SLOT_HASH_SEEDS[slot]
        if self._isolated:
            scratch_bytes = max(_MIN_SCRATCH_BYTES, 4 * self.limits.file_size_bytes)
            plan = launch.bwrap_plan(seed, scratch_bytes, self._tmp / "stage", info_fd)
            if plan is not None:
                return plan
            if not self.allow_unisolated:
                raise IsolationUnavailableError("bwrap not found: install bubblewrap (scripts/host-setup.sh)")
            self._isolated = False
        scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=self._tmp))
        return launch.plain_plan(seed, scratch)

    async def _spawn(self, slot: HashSeedSlot) -> _Supervisor:
        info_read, info_write = os.pipe()
        try:
            plan = self._plan(slot, info_write)
            self._details = plan.details
            process = await asyncio.create_subprocess_exec(
                *plan.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=plan.env,
                start_new_session=True,
                pass_fds=(info_write,) if plan.isolated else (),
            )
        finally:
            os.close(info_write)
        supervisor = _Supervisor(slot, process, asyncio.create_task(_log_stderr(process, slot)))
        self._all.add(supervisor)
        try:
            assert process.stdout is not None
            hello = await asyncio.wait_for(protocol.read_frame_async(process.stdout), self.startup_timeout_s)
            # Not refused for root here: the start-up probe reports the uid and capabilities the
            # supervisor sees from inside, and the isolation report (user) is judged from those.
            protocol.check_hello(hello, slot, require_unprivileged=False)
            if plan.isolated:
                supervisor.sandbox_pid = _child_pid(info_read)
        except BaseException:
            await supervisor.stop(graceful=False)
            self._all.discard(supervisor)
            raise
        finally:
            os.close(info_read)
        return supervisor

    async def _probe(self, supervisor: _Supervisor) -> IsolationReport:
        canary = self._tmp / "canary"
        canary.write_text("host secret\n")
        canary.chmod(0o644)
        read_paths = [str(canary), str(launch.source_root() / "pyproject.toml"), "/etc", *_home_samples()]
        write_dirs = ["/", "/usr", str(launch.source_root()), str(self._tmp)]
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            message = {"op": "probe", "tcp_port": listener.getsockname()[1]}
            message |= {"read_paths": read_paths, "write_dirs": write_dirs}
            seen = _checked_probe(
                await supervisor.request(protocol.encode_frame(message), self.startup_timeout_s)
            )
        memory = await self._run_on(supervisor, _MEMORY_PROBE)
        rlimits = (
            memory.error is None
            and len(memory.calls) == 1
            and memory.calls[0].error is not None
            and memory.calls[0].error.code is ErrorCode.MEMORY_LIMIT
        )
        return IsolationReport(
            backend="local",
            network=not seen["tcp_connected"] and set(seen["interfaces"]) <= {"lo"},
            filesystem=not seen["readable"] and not seen["writable"] and bool(seen["scratch_writable"]),
            pid=seen["pid"] == 1,
            user=seen["uid"] != 0 and seen["cap_eff"] == 0,
            rlimits=rlimits,
            details=(
                *self._details,
                f"readable host paths: {seen['readable']}",
                f"writable host dirs: {seen['writable']}",
                f"interfaces: {seen['interfaces']}",
                describe_kernel_guards(seen),
                "hash seeds: "
                + ", ".join(f"{seed} ({slot})" for slot, seed in protocol.SLOT_HASH_SEEDS.items()),
            ),
        )

    async def run(self, request: RunRequest) -> RunOutcome:
        frame = protocol.encode_frame(protocol.encode_run(request))  # too large a request raises here
        if self._closed:
            raise RuntimeError("LocalBackend is closed")
        if request.slot not in self._started_slots:
            await self._start_slot(request.slot)
        supervisor = await self._idle[request.slot].get()
        if supervisor is None:
            self._idle[request.slot].put_nowait(None)
            return _infra_outcome(f"no sandbox supervisor of slot {request.slot} could be started")
        return await self._run_on(supervisor, request, frame, release=True)

    async def _start_slot(self, slot: HashSeedSlot) -> None:
        """Start the supervisors of a slot beyond the primary ones, once, on the first request for it."""
        async with self._slot_lock:
            if slot in self._started_slots:
                return
            self._started_slots.add(slot)
            spawned = await asyncio.gather(
                *(self._spawn(slot) for _ in range(self.workers)), return_exceptions=True
            )
            for supervisor in spawned:
                if isinstance(supervisor, _Supervisor):
                    self._idle[slot].put_nowait(supervisor)
                elif isinstance(supervisor, Exception):
                    logger.error("cannot start a supervisor of slot %s: %r", slot, supervisor)
                else:
                    raise supervisor
            self._lost[slot] = self.workers - sum(isinstance(s, _Supervisor) for s in spawned)
            if self._lost[slot] == self.workers:
                self._idle[slot].put_nowait(None)

    async def _run_on(
        self, supervisor: _Supervisor, request: RunRequest, frame: bytes | None = None, release: bool = False
    ) -> RunOutcome:
        frame = frame or protocol.encode_frame(protocol.encode_run(request))
        timeout_s = protocol.reply_deadline_s(request)
        try:
            reply = await supervisor.request(frame, timeout_s)
            outcome = protocol.decode_outcome(reply, len(request.args))
        except (EOFError, OSError, TimeoutError, protocol.ProtocolError) as exc:
            logger.error(
                "supervisor %d (slot %s) failed: %r; replacing it", supervisor.pid, supervisor.slot, exc
            )
            self._replace(supervisor)
            return _infra_outcome(f"sandbox supervisor failed: {exc!r}")
        except BaseException:
            self._replace(supervisor)  # cancelled mid-request: its reply would reach the next caller
            raise
        if release:
            self._idle[supervisor.slot].put_nowait(supervisor)
        return outcome

    def _replace(self, supervisor: _Supervisor) -> None:
        task = asyncio.create_task(self._respawn(supervisor))
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def _respawn(self, supervisor: _Supervisor) -> None:
        self._all.discard(supervisor)
        await supervisor.stop(graceful=False)
        for attempt in range(1, _RESPAWN_ATTEMPTS + 1):
            if self._closed:
                return
            try:
                fresh = await self._spawn(supervisor.slot)
            except (OSError, EOFError, protocol.ProtocolError, TimeoutError) as exc:
                logger.error(
                    "cannot replace supervisor of slot %s (attempt %d): %r", supervisor.slot, attempt, exc
                )
                await asyncio.sleep(attempt)
                continue
            self._idle[supervisor.slot].put_nowait(fresh)
            return
        self._lost[supervisor.slot] += 1
        if self._lost[supervisor.slot] == self.workers:
            logger.critical("every supervisor of slot %s is gone; requests to it now fail", supervisor.slot)
            self._idle[supervisor.slot].put_nowait(None)

    async def aclose(self) -> None:
        self._closed = True
        for task in list(self._replacing):
            task.cancel()
        await asyncio.gather(*self._replacing, return_exceptions=True)
        await asyncio.gather(*(s.stop(graceful=True) for s in list(self._all)), return_exceptions=True)
        self._all.clear()
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)


def _infra_outcome(message: str) -> RunOutcome:
    return RunOutcome((), ExecError(ErrorCode.INFRA_ERROR, message), 0.0)


_MEMORY_PROBE = RunRequest(
    program="def f(n):\n    return len(bytearray(n))",
    args=(str(256 * 1024**2),),
    limits=SandboxLimits(memory_bytes=128 * 1024**2),
)
"""A run that must end in ``memory_limit``: proves RLIMIT_AS is applied to jobs."""


_PROBE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "pid": int,
    "uid": int,
    "cap_eff": (int, type(None)),
    "seccomp": (int, type(None)),
    "no_new_privs": (int, type(None)),
    "interfaces": list,
    "tcp_connected": bool,
    "readable": list,
    "writable": list,
    "scratch_writable": bool,
}


def _checked_probe(reply: protocol.JsonObject) -> protocol.JsonObject:
    for name, kind in _PROBE_FIELDS.items():
        if not isinstance(reply.get(name), kind):
            raise protocol.ProtocolError(f"probe reply lacks a valid {name!r}: {reply!r:.300}")
    return reply


def _child_pid(info_fd: int) -> int:
    """bubblewrap's ``{"child-pid": N}``, written before the supervisor could answer its hello."""
    os.set_blocking(info_fd, False)
    info = json.loads(os.read(info_fd, 64 * 1024))
    pid = info.get("child-pid")
    if not isinstance(pid, int) or pid <= 1:
        raise protocol.ProtocolError(f"bubblewrap reported no child pid: {info!r:.200}")
    return pid


def _home_samples(count: int = 8) -> list[str]:
    """Entries of the host home directory, minus those on the way to the Python installation.

    The sandbox may show the directories leading to a Python installed under the home (pyenv does that),
    but nothing else of the home may be visible.
    """
    python_root = launch.python_executable().parent.parent
    try:
        entries = sorted(Path.home().iterdir())
    except OSError:
        return []
    return [str(e) for e in entries if not python_root.is_relative_to(e)][:count]


async def _log_stderr(process: asyncio.subprocess.Process, slot: HashSeedSlot) -> None:
    assert process.stderr is not None
    async for line in process.stderr:
        logger.warning(
            "supervisor %d (slot %s): %s", process.pid, slot, line.decode(errors="replace")[:500].rstrip()
        )
