"""The sandbox supervisor: a warm, single-threaded zygote that forks one job process per call of ``f``.

Run as ``PYTHONHASHSEED=<n> python -s -P -B -m azr.executor.sandbox.supervisor [--scratch DIR]`` with a
clean environment, inside whatever isolation the backend provides (bubblewrap namespaces for ``local``, a
hardened container for ``docker``). It speaks ``protocol`` on fd 0 (requests) and fd 1 (replies); fd 1
carries nothing else. Not ``-I``/``-E``: those make Python ignore PYTHONHASHSEED, and the two slots of a
determinism check must run under different, known seeds, so the supervisor refuses to start without one.

Threat model
------------
Covered:
- State leaks between jobs: every call runs in a fresh fork (``child.run_job``), so changes to builtins or
  pre-imported modules die with that process.
- Runaway jobs: the wall-clock limit is enforced here with a pidfd and ``poll``; at the deadline the job's
  process group is killed. When the supervisor is PID 1 of its PID namespace it then kills every other
  process in the namespace (``kill(-1, SIGKILL)``) and reaps them all, so nothing outlives a job, and
  jobs cannot kill the supervisor (init ignores SIGKILL from inside its namespace; other signals have no
  handler). Elsewhere it kills the job's process group and reaps orphans as a child subreaper.
- Result forging through the protocol channel: jobs never hold fd 0/1 of the supervisor; results come on
  a private pipe, read with a size cap and validated; only child-reportable error codes are accepted.
- Tampering with the supervisor from a job: it is made non-dumpable (no ptrace, no /proc/<pid>/mem).
- Leftover files: each job gets an empty scratch directory and the whole scratch root is emptied after it.

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
import logging
import os
import select
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from azr.executor.backends.base import CallOutcome, RunOutcome
from azr.executor.errors import ErrorCode, ExecError
from azr.executor.limits import SandboxLimits
from azr.executor.sandbox import child, protocol
from azr.executor.sandbox.probe import probe

logger = logging.getLogger("azr.executor.sandbox.supervisor")

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

    def run(self, program: str, args: tuple[str, ...], limits: SandboxLimits) -> RunOutcome:
        started = time.monotonic()
        if not args:
            loaded = self.call(program, None, limits)
            error = loaded.error if loaded.error is not None and loaded.error.code in LOAD_ERRORS else None
            return RunOutcome((), error, _elapsed_ms(started))
        calls: list[CallOutcome] = []
        budget = protocol.MAX_FRAME_BYTES - _REPLY_MARGIN_BYTES
        for args_text in args:
            call = self.call(program, args_text, limits)
            if call.error is not None and call.error.code in LOAD_ERRORS:
                return RunOutcome((), call.error, _elapsed_ms(started))
            if call.output is not None:
                budget -= len(json.dumps(call.output, ensure_ascii=False).encode("utf-8"))
                if budget < 0:
                    call = _failed(
                        ErrorCode.OUTPUT_LIMIT, "the outputs of this request exceed the reply limit"
                    )
            calls.append(call)
        return RunOutcome(tuple(calls), None, _elapsed_ms(started))

    def call(self, program: str, args_text: str | None, limits: SandboxLimits) -> CallOutcome:
        """One call of ``f`` in a fresh job process; always kills and reaps everything it started."""
        scratch = self.scratch_root / "job"
        scratch.mkdir(mode=0o700)
        read_fd, write_fd = os.pipe()
        nproc = None if self.base_processes is None else self.base_processes + limits.processes
        try:
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                child.run_job(
                    program,
                    args_text,
                    limits=limits,
                    result_fd=write_fd,
                    scratch_dir=str(scratch),
                    nproc_limit=nproc,
                )
            os.close(write_fd)
            try:
                return self._collect(pid, read_fd, limits)
            finally:
                self._cleanup(pid)
        finally:
            os.close(read_fd)
            _empty_dir(self.scratch_root)

    def _collect(self, pid: int, read_fd: int, limits: SandboxLimits) -> CallOutcome:
        cap_bytes = 6 * limits.output_bytes + 64 * 1024  # JSON escapes can grow a text six-fold
        received = bytearray()
        pidfd = os.pidfd_open(pid)
        try:
            poller = select.poll()
            poller.register(read_fd, select.POLLIN)
            poller.register(pidfd, select.POLLIN)
            deadline = time.monotonic() + limits.timeout_s
            exited, pipe_open = False, True
            while not exited and len(received) <= cap_bytes:
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0:
                    break
                for fd, _ in poller.poll(remaining_s * 1000):
                    if fd == pidfd:
                        exited = True
                    elif pipe_open:
                        chunk = os.read(read_fd, 1024 * 1024)
                        received += chunk
                        if not chunk:
                            pipe_open = False
                            poller.unregister(read_fd)
        finally:
            os.close(pidfd)
        if len(received) > cap_bytes:
            _kill_group(pid)
            return _failed(ErrorCode.OUTPUT_LIMIT, f"result exceeds {limits.output_bytes} bytes")
        if not exited:
            _kill_group(pid)
            return _failed(ErrorCode.TIMEOUT, f"wall-clock limit of {limits.timeout_s} s exceeded")
        if pipe_open:
            received += _drain(read_fd, cap_bytes - len(received))
        _, status, usage = os.wait4(pid, 0)
        return _judge(status, usage.ru_utime + usage.ru_stime, bytes(received), limits)

    def _cleanup(self, pid: int) -> None:
        _kill_group(pid)
        with contextlib.suppress(ChildProcessError):  # already reaped by _collect
            os.waitpid(pid, 0)
        if self.is_init:
            _kill_namespace()
        else:
            _reap_orphans()


def _judge(  # noqa: PLR0911 (one return per outcome class reads best)
    status: int, cpu_s: float, received: bytes, limits: SandboxLimits
) -> CallOutcome:
    """Classify a finished job from its exit status and the limits that fired, never from its text."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_s >= limits.cpu_time_s):
            return _failed(ErrorCode.TIMEOUT, f"CPU limit of {limits.cpu_time_s} s exceeded")
        return _failed(ErrorCode.RUNTIME_ERROR, f"killed by signal {signum} ({signal.strsignal(signum)})")
    exit_status = os.WEXITSTATUS(status)
    if exit_status != child.EXIT_OK:
        return _failed(ErrorCode.RUNTIME_ERROR, f"job exited with status {exit_status} and no result")
    if not received:
        return _failed(ErrorCode.RUNTIME_ERROR, "the program ended the process before f returned")
    try:
        call = protocol.decode_call(protocol.decode_body(received))
    except protocol.ProtocolError as exc:
        return _failed(ErrorCode.RUNTIME_ERROR, f"malformed result from the job: {exc}")
    if call.error is not None and call.error.code not in CHILD_CODES:
        return _failed(ErrorCode.RUNTIME_ERROR, f"the job reported a code it may not use: {call.error.code}")
    if call.output is not None and len(call.output.encode("utf-8")) > limits.output_bytes:
        return _failed(ErrorCode.OUTPUT_LIMIT, f"result text exceeds {limits.output_bytes} bytes")
    return call


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


def _preimport() -> None:
    """Import what jobs may use once, here, so that a fork starts warm."""
    from azr.executor import gate

    for name in sorted(gate.DEFAULT_POLICY.allowed_imports):
        try:
            importlib.import_module(name)
        except ImportError:
            logger.warning("allowed module %s is not importable here", name)


def _harden() -> None:
    # With a handler, jobs could interrupt PID 1 by SIGINT; without one, init drops signals from inside.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    if os.getpid() != 1 and libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER, 1) failed")


def serve(supervisor: Supervisor, in_fd: int = 0, out_fd: int = 1) -> int:
    """Answer requests until the parent closes the stream; a broken stream ends the supervisor."""
    protocol.write_frame(
        out_fd,
        {"op": "ready", "pid": os.getpid(), "uid": os.getuid(), "hash_seed": os.environ["PYTHONHASHSEED"]},
    )
    while True:
        try:
            message = protocol.read_frame(in_fd)
        except (protocol.ProtocolError, EOFError) as exc:
            logger.error("protocol failure, exiting: %s", exc)
            return 2
        if message is None:
            return 0
        op = message.get("op")
        if op == "run":
            try:
                program, args, limits = protocol.decode_run(message)
            except protocol.ProtocolError as exc:
                logger.error("bad run request, exiting: %s", exc)
                return 2
            reply = protocol.encode_outcome(supervisor.run(program, args, limits))
        elif op == "probe":
            reply = probe(message, supervisor.scratch_root)
        else:
            logger.error("unknown op %r, exiting", op)
            return 2
        protocol.write_frame(out_fd, reply)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="azr.executor.sandbox.supervisor")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp"), help="emptied after every job")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="supervisor %(levelname)s %(message)s")
    if sys.flags.ignore_environment or not os.environ.get("PYTHONHASHSEED", "").isdigit():
        logger.error("PYTHONHASHSEED must be set and honoured (do not run with -I or -E)")
        return 2
    _preimport()
    _harden()
    gc.freeze()  # keeps the warm heap out of the collector, so forked jobs do not copy it page by page
    options.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    _empty_dir(options.scratch)
    return serve(Supervisor(options.scratch))


if __name__ == "__main__":
    sys.exit(main())
