"""The sandbox supervisor: a warm, single-threaded zygote that forks one job process per request.

Run as ``PYTHONHASHSEED=<n> python -s -P -B -m azr.executor.sandbox.supervisor [--scratch DIR]`` with a
clean environment, inside whatever isolation the backend provides (bubblewrap namespaces for ``local``, a
hardened container for ``docker``). It speaks ``protocol`` on fd 0 (requests) and fd 1 (replies); fd 1
carries nothing else. Not ``-I``/``-E``: those make Python ignore PYTHONHASHSEED, and the two slots of a
determinism check must run under different, known seeds, so the supervisor refuses to start without one.

Threat model
------------
Covered:
- State leaks between jobs: every request (one task, or one answer) runs in a fresh fork
  (``child.run_job``), so changes to builtins or pre-imported modules die with that process. Within a
  request the calls of ``f`` run in order in one process, as in a plain Python run (forking per call
  cost about twice the CPU); after a call that fails, the remaining calls get a fresh fork.
- Runaway jobs: the wall-clock limit of each call is enforced here with a pidfd and ``poll`` (the
  deadline restarts when a call's result arrives); at the deadline the job's process group is killed.
  When the supervisor is PID 1 of its PID namespace it then kills every other process in the namespace
  (``kill(-1, SIGKILL)``) and reaps them all, so nothing outlives a job, and jobs cannot kill the
  supervisor (init ignores SIGKILL from inside its namespace; other signals have no handler).
  Elsewhere it kills the job's process group and reaps orphans as a child subreaper.
- Memory: each job has its own address-space rlimit; where the sandbox has a memory cgroup (the docker
  backend), a job that the kernel's OOM killer ends is told apart from other kills by the cgroup's
  ``oom_kill`` counter, so it gets ``memory_limit``, not ``runtime_error``.
- Result forging through the protocol channel: jobs never hold fd 0/1 of the supervisor; results come on
  a private pipe, read with a size cap and validated; only child-reportable error codes are accepted.
- Tampering with the supervisor from a job: it is made non-dumpable (no ptrace, no /proc/<pid>/mem).
- Leftover files: each job gets an empty scratch directory; before each job the whole scratch root is
  emptied unless it holds nothing but that empty directory.

Not covered (the backend's isolation must supply these): network, filesystem visibility, other users'
processes, kernel attack surface (no seccomp filter is installed here).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import importlib
import json
import os
import select
import shutil
import signal
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

    def __init__(self, scratch_root: Path) -> None:
        self.scratch_root = scratch_root
        self.is_init = os.getpid() == 1
        # As PID 1 only the supervisor itself is alive between jobs, so the namespace's process count
        # (what RLIMIT_NPROC counts inside a user namespace) is exactly one before each fork.
        self.base_processes = 1 if self.is_init else None
        self.oom_counter = _OomCounter.find()

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
        scratch = self.scratch_root / "job"
        # Checked right before the fork, so nothing a previous job left (even a stray process in a
        # backend without a PID namespace) can reach this one.
        if not _only_empty_scratch(self.scratch_root, scratch):
            _empty_dir(self.scratch_root)
            scratch.mkdir(mode=0o700)
        oom_kills_before = None if self.oom_counter is None else self.oom_counter.read()
        read_fd, write_fd = os.pipe()
        nproc = None if self.base_processes is None else self.base_processes + limits.processes
        try:
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                child.run_job(
                    program,
                    args,
                    limits=limits,
                    result_fd=write_fd,
                    scratch_dir=str(scratch),
                    nproc_limit=nproc,
                )
            os.close(write_fd)
            try:
                return self._collect(pid, read_fd, 1 if args is None else len(args), limits, oom_kills_before)
            finally:
                self._cleanup(pid)
        finally:
            os.close(read_fd)

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
            _kill_namespace()
        else:
            _reap_orphans()


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


def _kill_namespace() -> None:
    """As PID 1: kill every other process of the namespace and reap until none is left."""
    while True:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _reap_orphans() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _empty_dir(root: Path) -> None:
    def make_writable(func: Callable[[str], object], path: str, _exc: BaseException) -> None:
        # A job may have removed its own permissions; the supervisor owns the files, so restore and retry.
        Path(path).parent.chmod(0o700)
        if Path(path).is_dir() and not Path(path).is_symlink():
            Path(path).chmod(0o700)
        func(path)

    root.chmod(0o700)
    for entry in root.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, onerror=lambda func, path, exc: make_writable(func, path, exc[1]))
        else:
            entry.unlink()


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
    for _ in range(_WARM_UP_ROUNDS):
        entry = child.load_entry(_WARM_UP_PROGRAM)
        if not callable(entry):
            raise RuntimeError(f"the warm-up program does not load: {entry}")
        for args in _WARM_UP_ARGS:
            message = child.call_entry(entry, args, limits)
            if "output" not in message:
                raise RuntimeError(f"the warm-up call f({args}) failed: {message}")
            child.encode_message(message)
    sys.modules.pop(child.PROGRAM_MODULE, None)
    gc.collect()


def _harden() -> None:
    # With a handler, jobs could interrupt PID 1 by SIGINT; without one, init drops signals from inside.
    # Forked jobs inherit the default disposition (``child`` relies on that).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    if os.getpid() != 1 and libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
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
        protocol.write_frame(out_fd, reply)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="azr.executor.sandbox.supervisor")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp"), help="emptied after every job")
    options = parser.parse_args(argv)
    if sys.flags.ignore_environment or not os.environ.get("PYTHONHASHSEED", "").isdigit():
        _log("ERROR", "PYTHONHASHSEED must be set and honoured (do not run with -I or -E)")
        return 2
    hash_seed = os.environ["PYTHONHASHSEED"]
    os.environ.clear()  # jobs get an empty environment; clearing it once here spares every job the work
    _preimport()
    _warm_up(SandboxLimits())
    _harden()
    gc.freeze()  # keeps the warm heap out of the collector, so forked jobs do not copy it page by page
    options.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    _empty_dir(options.scratch)
    return serve(Supervisor(options.scratch), hash_seed)


if __name__ == "__main__":
    sys.exit(main())
