"""The sandbox supervisor: a warm, single-threaded zygote that forks one job process per request.

Run as ``PYTHONHASHSEED=<n> python -s -P -B -m azr.executor.sandbox.supervisor [--scratch DIR]`` with a
clean environment, inside whatever isolation the backend provides (bubblewrap namespaces for ``local``, a
hardened container for ``docker``). It speaks ``protocol`` on fd 0 (requests) and fd 1 (replies); fd 1
carries nothing else. Not ``-I``/``-E``: those make Python ignore PYTHONHASHSEED, and the two slots of a
determinism check must run under different, known seeds, so the supervisor refuses to start without one.

Threat model
------------
Covered:
- State leaks between jobs: every request (one task, or one answer) runs in its own job process, forked
  *in advance* from a zygote that never holds any job's data: the zygote is forked from the supervisor
  before the first request is read, pre-imports and warms up, then only forks blank job processes. A
  job process reads its own request from a private pipe after the fork and reports on another private
  pipe to the supervisor (it is re-parented to the supervisor, which reaps it); so no job can find an
  earlier job's program, inputs or outputs in memory it inherited, live or freed. Changes to builtins or
  pre-imported modules die with the job process. Within a request the calls of ``f`` run in order in one
  process, as in a plain Python run; after a call that fails, the remaining calls get a fresh job.
- System V IPC: as PID 1 the supervisor owns the sandbox's private IPC namespace, and removes every
  message queue, semaphore set and shared memory segment after each job, so none outlives the job that
  made it (no channel between jobs, no memory pinned for the next one).
- Runaway jobs: the wall-clock limit of each call is enforced here with a pidfd and ``poll`` (the
  deadline restarts when a call's result arrives); at the deadline the job's process group is killed.
  When the supervisor is PID 1 of its PID namespace it then kills every other process in the namespace
  (``kill(-1, SIGKILL)``) and reaps them all, so nothing outlives a job, and jobs cannot kill the
  supervisor (init ignores SIGKILL from inside its namespace; other signals have no handler). The
  zygote is spared; a dead zygote ends the supervisor (the backend replaces it).
  Elsewhere it kills the job's process group and reaps orphans as a child subreaper.
- Memory: each job has its own address-space rlimit; where the sandbox has a memory cgroup (the docker
  backend), a job that the kernel's OOM killer ends is told apart from other kills by the cgroup's
  ``oom_kill`` counter, so it gets ``memory_limit``, not ``runtime_error``.
- Result forging through the protocol channel: jobs never hold fd 0/1 of the supervisor; results come on
  a private pipe, read with a size cap and validated; only child-reportable error codes are accepted.
- Tampering with the supervisor from a job: it is made non-dumpable (no ptrace, no /proc/<pid>/mem).
- Leftover files: each job gets an empty scratch directory; right after each job (and again before the
  next) the whole scratch root is emptied unless it holds nothing but that empty directory. A job that
  locks or deepens its directory cannot make the cleanup fail: the walk holds one directory descriptor
  at a time and restores permissions as it goes. Should emptying still fail, it fails while the guilty
  job is being answered (the backend replaces the sandbox), never on the next job's turn.

Not covered (the backend's isolation must supply these): network, filesystem visibility, other users'
processes, kernel attack surface (no seccomp filter is installed here).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import functools
import gc
import importlib
import json
import os
import select
import signal
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from azr.executor.errors import ErrorCode, ExecError
from azr.executor.limits import SandboxLimits
from azr.executor.sandbox import child, protocol
from azr.executor.sandbox.probe import probe
from azr.executor.sandbox.records import CallOutcome, RunOutcome

CHILD_CODES = frozenset(
    {
        ErrorCode.SYNTAX_ERROR,
        ErrorCode.NO_ENTRY_FUNCTION,
        ErrorCode.RUNTIME_ERROR,
        ErrorCode.MEMORY_LIMIT,
        ErrorCode.OUTPUT_LIMIT,
        ErrorCode.UNSUPPORTED_VALUE,
    }
)
"""Error codes a job may report about itself; anything else on the result pipe is tampering."""

LOAD_ERRORS = frozenset({ErrorCode.SYNTAX_ERROR, ErrorCode.NO_ENTRY_FUNCTION})
"""Errors that concern the program rather than one call: they end the request as a whole."""

_REPLY_MARGIN_BYTES = 1024**2
_REPLY_FULL = CallOutcome(
    output=None, error=ExecError(ErrorCode.OUTPUT_LIMIT, "the outputs of this request exceed the reply limit")
)
_OOM_COUNTERS = (
    Path("/sys/fs/cgroup/memory.events"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.oom_control"),  # cgroup v1
)
"""Where a sandbox's memory cgroup counts the processes its OOM killer ended (line ``oom_kill N``)."""
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


class Supervisor:
    """Runs requests one at a time; ``is_init`` selects the namespace-wide cleanup."""

    def __init__(self, scratch_root: Path, zygote: Zygote) -> None:
        self.scratch_root = scratch_root
        self.zygote = zygote
        self.is_init = os.getpid() == 1
        # As PID 1, between jobs only the supervisor, the zygote and one waiting job process are alive,
        # so the namespace's process count (what RLIMIT_NPROC counts inside a user namespace) is known.
        # RLIMIT_NPROC counts per user, so it is exact only in the sandbox's own user namespace.
        self.base_processes = 3 if self.is_init and _own_user_namespace() else None
        self.proc_visible = Path("/proc/self").exists()
        self.oom_counter = _OomCounter.find()
        self.spare: JobProcess | None = None
        self.single_process = False

    def prepare(self) -> None:
        """Have the next job process forked and waiting, so that a request does not wait for the fork."""
        if self.spare is None:
            self.spare = self.zygote.fork_job()

    def run(self, program: str, args: tuple[str, ...], limits: SandboxLimits) -> RunOutcome:
        started = time.monotonic()
        if not args:
            (loaded,) = self.job(program, None, limits)
            error = loaded.error if loaded.error is not None and loaded.error.code in LOAD_ERRORS else None
            return RunOutcome((), error, _elapsed_ms(started))
        calls: list[CallOutcome] = []
        budget = protocol.MAX_FRAME_BYTES - _REPLY_MARGIN_BYTES
        while len(calls) < len(args):
            # One job runs the calls in order; after one that failed, a fresh job takes the rest.
            for call in self.job(program, args[len(calls) :], limits):
                if call.error is not None and call.error.code in LOAD_ERRORS:
                    return RunOutcome((), call.error, _elapsed_ms(started))
                if call.output is not None:
                    budget -= len(
                        json.dumps(call.output, ensure_ascii=False).encode("utf-8", "surrogatepass")
                    )
                calls.append(call if budget >= 0 else _REPLY_FULL)
        return RunOutcome(tuple(calls), None, _elapsed_ms(started))

    def job(self, program: str, args: tuple[str, ...] | None, limits: SandboxLimits) -> list[CallOutcome]:
        """Calls of ``f`` in one fresh job process, in order, up to and including the first that failed.

        Never empty. ``args`` ``None`` only loads the program (one outcome). Always kills and reaps
        everything the job started.
        """
        # Checked right before the job starts, so nothing a previous job left (even a stray process in a
        # backend without a PID namespace) can reach this one.
        scratch = self._fresh_scratch()
        oom_kills_before = None if self.oom_counter is None else self.oom_counter.read()
        process, self.spare = self.spare or self.zygote.fork_job(), None
        nproc = None if self.base_processes is None else self.base_processes + limits.processes - 1
        # As PID 1 with RLIMIT_NPROC at the namespace's count, a single-process job cannot fork at all, so
        # killing its process leaves nothing behind.
        self.single_process = nproc is not None and limits.processes == 1
        try:
            process.start(
                {
                    "program": program,
                    "args": None if args is None else list(args),
                    "limits": dataclasses.asdict(limits),
                    "scratch": str(scratch),
                    "nproc": nproc,
                }
            )
            expected = 1 if args is None else len(args)
            return self._collect(process.pid, process.result_fd, expected, limits, oom_kills_before)
        finally:
            os.close(process.result_fd)
            self._cleanup(process.pid)

    def _collect(
        self, pid: int, read_fd: int, expected: int, limits: SandboxLimits, oom_kills_before: int | None
    ) -> list[CallOutcome]:
        """Read one result line per call, with a fresh wall-clock deadline for each call."""
        reading = _Reading(expected, cap_bytes=6 * limits.output_bytes + 64 * 1024)  # JSON escapes: 6x
        pidfd = os.pidfd_open(pid)
        try:
            poller = select.poll()
            poller.register(read_fd, select.POLLIN)
            poller.register(pidfd, select.POLLIN)
            deadline = time.monotonic() + limits.timeout_s
            while not reading.exited and not reading.overflowed:
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0:
                    break
                for fd, _ in poller.poll(remaining_s * 1000):
                    if fd == pidfd:
                        reading.exited = True
                    elif reading.pipe_open:
                        chunk = os.read(read_fd, 1024 * 1024)
                        if not chunk:
                            reading.pipe_open = False
                            poller.unregister(read_fd)
                        if reading.feed(chunk, limits):
                            deadline = time.monotonic() + limits.timeout_s
        finally:
            os.close(pidfd)
        if reading.overflowed:
            _kill_group(pid)
            return [
                *reading.calls,
                _failed(ErrorCode.OUTPUT_LIMIT, f"result exceeds {limits.output_bytes} bytes"),
            ]
        if not reading.exited:
            _kill_group(pid)
            timeout = _failed(ErrorCode.TIMEOUT, f"wall-clock limit of {limits.timeout_s} s exceeded")
            return [*reading.calls, timeout]
        if reading.pipe_open:
            reading.feed(_drain(read_fd, reading.cap_bytes - len(reading.buffer)), limits)
        _, status, usage = os.wait4(pid, 0)
        # Only a job ended by a signal can have been the OOM killer's, so only then is the count read again.
        oom_killed = (
            os.WIFSIGNALED(status)
            and self.oom_counter is not None
            and self.oom_counter.read() != oom_kills_before
        )
        ended = _judge_exit(status, usage.ru_utime + usage.ru_stime, limits, oom_killed=oom_killed)
        return [*reading.calls, ended or reading.last(limits)]

    def _cleanup(self, pid: int) -> None:
        _kill_group(pid)
        with contextlib.suppress(ChildProcessError):  # already reaped by _collect
            os.waitpid(pid, 0)
        if self.is_init:
            _remove_sysv_ipc()
            if self.proc_visible:
                _kill_all_but(self.zygote.pid)
            elif not self.single_process:
                # The job could fork, and its processes may have left its process group: kill everything
                # but PID 1 (the zygote too, which is then started afresh).
                _kill_namespace()
        else:
            _reap_orphans(self.zygote.pid)
        if not self.zygote.alive():
            self.zygote.restart()
        # Emptied while this job is still the one being answered: whatever it did to its directory is
        # undone (or, should that ever fail, charged to it) before the next job arrives.
        self._fresh_scratch()

    def _fresh_scratch(self) -> Path:
        """The job directory, empty and private; the scratch root is emptied first when it holds more."""
        scratch = self.scratch_root / "job"
        if not _only_empty_scratch(self.scratch_root, scratch):
            _empty_dir(self.scratch_root)
            scratch.mkdir(mode=0o700)
        return scratch


class ZygoteError(RuntimeError):
    """The zygote did not fork a job process; the supervisor cannot run jobs any more."""


@dataclasses.dataclass(frozen=True, slots=True)
class JobProcess:
    """A blank job process waiting for its request on ``request_fd``; it reports on ``result_fd``."""

    pid: int
    request_fd: int
    result_fd: int

    def start(self, request: protocol.JsonObject) -> None:
        """Hand the job its request (the first and only data it gets from the supervisor)."""
        try:
            protocol.write_frame(self.request_fd, request)
        except BrokenPipeError:
            pass  # the job process died waiting; collecting it reports how
        finally:
            os.close(self.request_fd)


class Zygote:
    """The warm process that forks blank job processes; a fresh interpreter, never a fork of a supervisor.

    It is exec'd (so it shares no memory with the supervisor, which has read requests) and receives the
    two pipe ends of each job process over a socket (``SCM_RIGHTS``).
    """

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.argv, self.env = argv, env
        self.pid = 0
        self.channel: socket.socket | None = None
        self.restart()

    def restart(self) -> None:
        self.stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - replaced by exec at once
            try:
                os.dup2(theirs.fileno(), ZYGOTE_FD, inheritable=True)
                os.execve(self.argv[0], self.argv, self.env)
            finally:
                os._exit(127)
        theirs.close()
        self.pid, self.channel = pid, ours
        if ours.recv(16) != b"ready":
            raise ZygoteError("the zygote failed to start")

    def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0

    def alive(self) -> bool:
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return False
        return info is None

    def fork_job(self) -> JobProcess:
        for attempt in range(2):
            try:
                return self._fork_job()
            except (OSError, ZygoteError) as exc:
                if attempt:
                    raise ZygoteError(f"no job process: {exc}") from None
                _log("WARNING", "the zygote failed (%s); starting a new one", exc)
                self.restart()
        raise AssertionError("unreachable")

    def _fork_job(self) -> JobProcess:
        assert self.channel is not None
        request_read, request_write = os.pipe()
        result_read, result_write = os.pipe()
        try:
            socket.send_fds(self.channel, [b"fork"], [request_read, result_write])
        finally:
            os.close(request_read)
            os.close(result_write)
        self.channel.settimeout(_ZYGOTE_REPLY_S)
        try:
            reply = self.channel.recv(32)
        except TimeoutError:
            reply = b""
        if not reply.isdigit():
            os.close(request_write)
            os.close(result_read)
            raise ZygoteError("the zygote did not answer a fork request")
        return JobProcess(int(reply), request_write, result_read)


ZYGOTE_FD = 3
"""Where the zygote finds its socket to the supervisor."""
_ZYGOTE_REPLY_S = 5.0


def zygote_main(channel: socket.socket) -> int:
    """Fork a blank job process for every request on ``channel``; no job data ever reaches this process."""
    channel.send(b"ready")
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(channel, 16, 2)
        except OSError:
            return 2
        if len(fds) != 2:
            return 0 if not fds else 2
        request_fd, result_fd = fds
        job_pid_read, job_pid_write = os.pipe()
        middle = os.fork()
        if middle == 0:
            # A throw-away middle process: the job process it forks is re-parented to the supervisor (PID 1
            # or the subreaper), which waits for it; the zygote only ever waits for this one.
            job = os.fork()
            if job == 0:
                channel.close()
                os.close(job_pid_read)
                os.close(job_pid_write)
                child.serve_job(request_fd, result_fd)
            os.write(job_pid_write, str(job).encode())
            os._exit(0)
        os.close(request_fd)
        os.close(result_fd)
        os.close(job_pid_write)
        job_pid = os.read(job_pid_read, 32)
        os.close(job_pid_read)
        os.waitpid(middle, 0)
        channel.send(job_pid or b"failed")


class _Reading:
    """The result lines of one job as they arrive.

    A successful result before the last expected one is accepted when its line ends (the job has moved
    on to the next call). The last one, and any failure, is held until the job exits: it stands only if
    the job then exits cleanly with nothing more on the pipe, as a lone result always had to.
    """

    def __init__(self, expected: int, cap_bytes: int) -> None:
        self.expected = expected
        self.cap_bytes = cap_bytes
        self.calls: list[CallOutcome] = []
        self.held: CallOutcome | None = None
        self.buffer = bytearray()
        self.exited = False
        self.pipe_open = True

    @property
    def overflowed(self) -> bool:
        return len(self.buffer) > self.cap_bytes

    def feed(self, chunk: bytes, limits: SandboxLimits) -> bool:
        """Take bytes from the pipe; true when a call was accepted (the next call's clock starts)."""
        self.buffer += chunk
        accepted = False
        while self.held is None and (end := self.buffer.find(b"\n")) >= 0:
            call = _judge_result(bytes(self.buffer[:end]), limits)
            del self.buffer[: end + 1]
            if call.error is None and len(self.calls) + 1 < self.expected:
                self.calls.append(call)
                accepted = True
            else:
                self.held = call
        return accepted

    def last(self, limits: SandboxLimits) -> CallOutcome:
        """The outcome of the call in progress when the job exited cleanly."""
        if self.held is None:
            if not self.buffer:
                return _failed(ErrorCode.RUNTIME_ERROR, "the program ended the process before f returned")
            return _judge_result(bytes(self.buffer), limits)  # an unterminated line is judged as sent
        if self.buffer:
            return _failed(
                ErrorCode.RUNTIME_ERROR, "malformed result from the job: data after the last result"
            )
        return self.held


def _judge_exit(status: int, cpu_s: float, limits: SandboxLimits, *, oom_killed: bool) -> CallOutcome | None:
    """The failure a job's exit status shows, or ``None`` for a clean exit; never from its text.

    ``cpu_s`` is the whole job's CPU time; a SIGKILL after the job has used at least one call's budget
    counts as the CPU limit (the hard limit sends exactly that). ``oom_killed``: the sandbox's memory
    cgroup counted an OOM kill during the job.
    """
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum == signal.SIGKILL and oom_killed:
            return _failed(ErrorCode.MEMORY_LIMIT, "the sandbox's memory limit was exceeded (OOM killer)")
        if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_s >= limits.cpu_time_s):
            return _failed(ErrorCode.TIMEOUT, f"CPU limit of {limits.cpu_time_s} s exceeded")
        return _failed(ErrorCode.RUNTIME_ERROR, f"killed by signal {signum} ({signal.strsignal(signum)})")
    exit_status = os.WEXITSTATUS(status)
    if exit_status != child.EXIT_OK:
        return _failed(ErrorCode.RUNTIME_ERROR, f"job exited with status {exit_status} and no result")
    return None


def _judge_result(received: bytes, limits: SandboxLimits) -> CallOutcome:
    """Validate one result line as hostile input: well-formed, a child-reportable code, within limits."""
    try:
        call = protocol.decode_call(protocol.decode_body(received))
    except protocol.ProtocolError as exc:
        return _failed(ErrorCode.RUNTIME_ERROR, f"malformed result from the job: {exc}")
    if call.error is not None and call.error.code not in CHILD_CODES:
        return _failed(ErrorCode.RUNTIME_ERROR, f"the job reported a code it may not use: {call.error.code}")
    if call.output is not None and len(call.output.encode("utf-8", "surrogatepass")) > limits.output_bytes:
        return _failed(ErrorCode.OUTPUT_LIMIT, f"result text exceeds {limits.output_bytes} bytes")
    return call


class _OomCounter:
    """The ``oom_kill`` count of the sandbox's memory cgroup, re-read through one open descriptor.

    Read before every job, so it costs one ``pread`` (no open, no text layer). Jobs never see the
    descriptor: they close every descriptor but their result pipe.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def find(cls) -> _OomCounter | None:
        for path in _OOM_COUNTERS:
            try:
                counter = cls(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                continue
            if counter.read() is not None:
                return counter
            os.close(counter.fd)
        return None

    def read(self) -> int | None:
        try:
            data = os.pread(self.fd, 4096, 0)
        except OSError:
            return None
        for line in data.split(b"\n"):
            name, _, value = line.partition(b" ")
            if name == b"oom_kill" and value.isdigit():
                return int(value)
        return None


def _failed(code: ErrorCode, message: str) -> CallOutcome:
    return CallOutcome(output=None, error=ExecError(code, message))


def _elapsed_ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _drain(fd: int, limit_bytes: int) -> bytes:
    """What is already in the pipe; grandchildren may still hold its write end, so never block."""
    os.set_blocking(fd, False)
    data = bytearray()
    while len(data) <= limit_bytes:
        try:
            chunk = os.read(fd, 1024 * 1024)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return bytes(data)


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _own_user_namespace() -> bool:
    """Whether this process is in a user namespace of its own (bubblewrap), not the host's (Docker).

    Without /proc (bubblewrap mounts none) the answer is yes: the local backend always unshares the user."""
    try:
        mapping = Path("/proc/self/uid_map").read_text().split()
    except OSError:
        return True
    return mapping != ["0", "0", "4294967295"]


def _kill_all_but(zygote: int) -> None:
    """As PID 1 with /proc: kill every process of the namespace but the zygote, and reap them."""
    me = os.getpid()
    while True:
        pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
        strays = [pid for pid in pids if pid not in (me, zygote)]
        for pid in strays:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        reaped = _reap_orphans(zygote)
        if not strays:
            return
        if not reaped:
            time.sleep(0.001)  # killed but not yet dead, or not yet re-parented to PID 1


def _kill_namespace() -> None:
    """As PID 1: kill every other process of the namespace (the zygote too) and reap until none is left."""
    while True:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _reap_orphans(spare: int) -> bool:
    """Reap every exited child but ``spare``, without blocking; whether any was reaped."""
    reaped = False
    while True:
        try:
            # waitid with WNOWAIT first: a dead zygote must stay visible to ``Zygote.alive``.
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped
        if info is None or info.si_pid == spare:
            return reaped
        os.waitpid(info.si_pid, 0)
        reaped = True


_IPC_RMID = 0
_SYSV_IPC = (("shmctl", 14, 15), ("msgctl", 12, 13), ("semctl", 19, 20))
"""Per kind: the call, its ``*_INFO`` command (highest index in use) and ``*_STAT_ANY`` (index to id,
whatever the object's mode: a job may have made its own objects unreadable)."""


def _remove_sysv_ipc() -> None:
    """Remove every System V IPC object of the sandbox's private IPC namespace (no /proc needed)."""
    libc = _libc()
    buffer = ctypes.create_string_buffer(1024)  # larger than any of the kernel's *_ds and *info structs
    for name, info, stat_any in _SYSV_IPC:
        control = functools.partial(_ipc_control, getattr(libc, name), semaphores=name == "semctl")
        highest = control(0, info, buffer)
        for index in range(highest + 1):
            ident = control(index, stat_any, buffer)
            if ident >= 0 and control(ident, _IPC_RMID, None) != 0:
                _log(
                    "WARNING", "could not remove System V IPC object %d: errno %d", ident, ctypes.get_errno()
                )


def _ipc_control(call: Callable[..., int], ident: int, command: int, arg: object, *, semaphores: bool) -> int:
    # semctl(id, semnum, cmd, arg) has a semaphore number before the command; the others do not.
    return int(call(ident, 0, command, arg) if semaphores else call(ident, command, arg))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _empty_dir(root: Path) -> None:
    """Remove everything under ``root``, however deep, long-named or locked its tree is.

    A job may leave a tree thousands of levels deep (deeper than ``PATH_MAX`` and than Python's recursion
    limit, which ``shutil.rmtree`` both needs) and may take every permission off its directories. So the
    walk is a loop that holds one directory descriptor at a time, addresses entries relative to it, and
    restores the owner's permissions on each directory before it enters; the job's processes are gone by
    then, so nothing changes the tree under the walk.
    """
    root.chmod(0o700)
    fd = os.open(root, _DIR_FLAGS)
    trail: list[str] = []  # names from root down to the directory ``fd`` stands for
    try:
        while True:
            entry = _first_entry(fd)
            if entry is None:
                if not trail:
                    return
                parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = parent
                os.rmdir(trail.pop(), dir_fd=fd)
            elif entry.is_dir(follow_symlinks=False):
                os.chmod(entry.name, 0o700, dir_fd=fd)
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                trail.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    finally:
        os.close(fd)


def _first_entry(dir_fd: int) -> os.DirEntry[str] | None:
    """Any one entry of the directory open as ``dir_fd`` (``scandir`` rewinds a descriptor it is given)."""
    with os.scandir(dir_fd) as entries:
        return next(entries, None)


def _only_empty_scratch(root: Path, scratch: Path) -> bool:
    """Whether ``root`` holds nothing but an empty, private ``scratch`` directory that a job can reuse.

    Two directory reads and two stats instead of a tree removal and a mkdir for the common job that
    writes no file; anything unexpected (an entry, a changed mode, a permission error) means no.
    """
    try:
        if stat.S_IMODE(os.lstat(root).st_mode) != 0o700:
            return False
        with os.scandir(root) as entries:
            if [entry.name for entry in entries] != [scratch.name]:
                return False
        with os.scandir(scratch) as entries:
            if next(entries, None) is not None:
                return False
        info = os.lstat(scratch)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700


def _log(level: str, message: str, *args: object) -> None:
    """Log to stderr, importing ``logging`` only when something must be said.

    The warm zygote must not import ``logging``: it imports ``threading``, whose at-fork hook then runs
    Python code in every forked job (about 130 copy-on-write page faults, 0.3 ms of CPU per job).
    """
    import logging

    if not logging.root.handlers:
        logging.basicConfig(stream=sys.stderr, format="supervisor %(levelname)s %(message)s")
    logging.getLogger("azr.executor.sandbox.supervisor").log(logging.getLevelName(level), message, *args)


def _preimport() -> None:
    """Import what jobs may use once, here, so that a fork starts warm."""
    from azr.executor import gate

    for name in sorted(gate.DEFAULT_POLICY.allowed_imports):
        try:
            importlib.import_module(name)
        except ImportError:
            _log("WARNING", "allowed module %s is not importable here", name)


_WARM_UP_PROGRAM = """
def f(xs, key=1, label='a', extra=None):
    table = {label: sorted(xs)[::-1], 'shape': (len(xs), 2.5, None, True), 'extra': extra}
    return table, {key, -key}, [x * 2 for x in xs if x], label.upper()
"""
_WARM_UP_ARGS = (
    "[3, 1, 2]",
    "[5, 4], 2, 'b'",
    "[1.5, -1.0], -7, ''",
    "[0], 3, 'c', {1: (2, 'x'), 'k': [set()]}",
)
_WARM_UP_ROUNDS = 64
"""Enough runs for the interpreter to specialise the job path's bytecode (it adapts after a few runs)."""


def _warm_up(limits: SandboxLimits) -> None:
    """Run the job path (load, parse, call, canonicalise, encode) here, on a program of our own.

    A forked job pays a copy-on-write fault for every page it writes. Bytecode that the interpreter still
    has to specialise, and objects created on first use, are such writes; done once here, before
    ``gc.freeze``, they are shared by every job instead (about 15% fewer faults and less CPU per job).
    """
    main_module = sys.modules["__main__"]
    for _ in range(_WARM_UP_ROUNDS):
        loaded = child.load_entry(_WARM_UP_PROGRAM, _WARM_UP_ARGS)
        if isinstance(loaded, dict):
            raise RuntimeError(f"the warm-up program does not load: {loaded}")
        entry, inputs = loaded
        for args in inputs:
            message = child.call_entry(entry, args, limits)
            if "output" not in message:
                raise RuntimeError(f"the warm-up call f{args} failed: {message}")
            child.encode_message(message)
    sys.modules["__main__"] = main_module
    gc.collect()


def _harden(*, subreaper: bool) -> None:
    # With a handler, jobs could interrupt PID 1 by SIGINT; without one, init drops signals from inside.
    # Forked jobs inherit the default disposition (``child`` relies on that).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    if subreaper and os.getpid() != 1 and libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER, 1) failed")


def serve(supervisor: Supervisor, hash_seed: str, in_fd: int = 0, out_fd: int = 1) -> int:
    """Answer requests until the parent closes the stream; a broken stream ends the supervisor."""
    protocol.write_frame(
        out_fd,
        {"op": "ready", "pid": os.getpid(), "uid": os.getuid(), "hash_seed": hash_seed},
    )
    while True:
        try:
            message = protocol.read_frame(in_fd)
        except (protocol.ProtocolError, EOFError) as exc:
            _log("ERROR", "protocol failure, exiting: %s", exc)
            return 2
        if message is None:
            return 0
        op = message.get("op")
        if op == "run":
            try:
                program, args, limits = protocol.decode_run(message)
            except protocol.ProtocolError as exc:
                _log("ERROR", "bad run request, exiting: %s", exc)
                return 2
            reply = protocol.encode_outcome(supervisor.run(program, args, limits))
        elif op == "probe":
            reply = probe(message, supervisor.scratch_root)
        else:
            _log("ERROR", "unknown op %r, exiting", op)
            return 2
        # The next job process is forked before the reply goes out, so that between requests the sandbox
        # always holds exactly its supervisor, its zygote and one blank job process.
        supervisor.prepare()
        protocol.write_frame(out_fd, reply)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="azr.executor.sandbox.supervisor")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp"), help="emptied after every job")
    parser.add_argument("--zygote", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if sys.flags.ignore_environment or not os.environ.get("PYTHONHASHSEED", "").isdigit():
        _log("ERROR", "PYTHONHASHSEED must be set and honoured (do not run with -I or -E)")
        return 2
    hash_seed = os.environ["PYTHONHASHSEED"]
    zygote_env = dict(os.environ)
    os.environ.clear()  # jobs get an empty environment; clearing it once here spares every job the work
    if options.zygote:
        child.REFERENCE_DEPTH = child.measure_reference_depth()
        _preimport()
        _warm_up(SandboxLimits())
        _harden(subreaper=False)
        gc.freeze()  # keeps the warm heap out of the collector, so forked jobs do not copy it page by page
        return zygote_main(socket.socket(fileno=ZYGOTE_FD))
    _harden(subreaper=True)
    options.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    _empty_dir(options.scratch)
    zygote_argv = [sys.executable, *_interpreter_flags(), "-m", __spec__.name if __spec__ else "", "--zygote"]
    supervisor = Supervisor(options.scratch, Zygote(zygote_argv, zygote_env))
    supervisor.prepare()
    return serve(supervisor, hash_seed)


def _interpreter_flags() -> list[str]:
    """The flags this interpreter runs under (``-s -P -B``), for the zygote to run under the same."""
    flags = []
    if sys.flags.no_user_site:
        flags.append("-s")
    if sys.flags.safe_path:
        flags.append("-P")
    if sys.flags.dont_write_bytecode:
        flags.append("-B")
    return flags


if __name__ == "__main__":
    sys.exit(main())
