"""The job process: one call of ``f`` in a fresh fork of the supervisor, then ``os._exit``.

Threat model
------------
Everything after ``_confine`` runs untrusted code in this process, so nothing here is trusted by the
supervisor: it reads the result pipe as hostile input and decides timeouts, crashes and kills from the
exit status and the limits it enforces itself (never from stderr).

Covered here (per process, before any untrusted code runs):
- its own session and process group (the supervisor kills the group on timeout);
- rlimits: address space, CPU seconds (SIGXCPU, then SIGKILL one second later), file size, open files,
  core dumps off, and processes when the supervisor knows the namespace's process count;
- a fresh, empty scratch working directory; an empty environment;
- stdin/stdout/stderr on ``/dev/null`` and every other descriptor closed except the result pipe (fd 3),
  so printed text never reaches the protocol channel and the program cannot touch the supervisor's pipes;
- a fresh module for the program; its changes to other modules or builtins die with this process.

Not covered here: the program can write its own "result" on fd 3 or tamper with ``values`` (it shares
this process). That only lets it choose its output, which returning a value does too; the supervisor
accepts only well-formed results with child-reportable codes, and the parent re-parses every output.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import types
from typing import NoReturn

from azr.executor import values
from azr.executor.errors import ErrorCode, ExecError
from azr.executor.limits import SandboxLimits

RESULT_FD = 3
ENTRY_NAME = "f"
PROGRAM_MODULE = "__program__"
_MESSAGE_CHARS = 300
"""Longest error message sent back; messages are for people, codes decide behaviour."""

EXIT_OK = 0
"""Exit status after a result was written; anything else (or a signal) means no trustworthy result."""


def _confine(result_fd: int, scratch_dir: str, limits: SandboxLimits, nproc_limit: int | None) -> None:
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # Descriptors: the result pipe becomes fd 3, the standard streams /dev/null, everything else closed.
    if result_fd != RESULT_FD:
        os.dup2(result_fd, RESULT_FD)
        os.close(result_fd)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(RESULT_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    os.chdir(scratch_dir)
    os.environ.clear()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    # The hard CPU limit one second above the soft one: SIGXCPU first, SIGKILL if it is caught or ignored.
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_time_s, limits.cpu_time_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    if nproc_limit is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc_limit, nproc_limit))


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = ""
    name = type(exc).__name__
    return (f"{name}: {text}" if text else name)[:_MESSAGE_CHARS]


def _call(program: str, args_text: str | None, limits: SandboxLimits) -> dict[str, object]:
    """Run the untrusted program and ``f``; the returned message is what the supervisor will see."""
    try:
        code = compile(program, "<program>", "exec")
    except (SyntaxError, ValueError) as exc:
        return _error(ErrorCode.SYNTAX_ERROR, _describe(exc))
    # A real module registered in sys.modules: dataclasses, enum and typing look their class's module up
    # there. Not "__main__", so that a program's `if __name__ == "__main__":` demo code does not run.
    module = types.ModuleType(PROGRAM_MODULE)
    sys.modules[PROGRAM_MODULE] = module
    exec(code, module.__dict__)
    entry = module.__dict__.get(ENTRY_NAME)
    if not callable(entry):
        return _error(ErrorCode.NO_ENTRY_FUNCTION, f"the program defines no function {ENTRY_NAME!r}")
    if args_text is None:
        return {"output": ""}
    args = values.parse_args(args_text)
    result = entry(*args)
    text = values.canonical(result, values.ValueLimits(max_text_chars=limits.output_bytes))
    if len(text.encode("utf-8")) > limits.output_bytes:
        return _error(ErrorCode.OUTPUT_LIMIT, f"result text exceeds {limits.output_bytes} bytes")
    return {"output": text}


def _error(code: ErrorCode, message: str) -> dict[str, object]:
    return {"error": ExecError(code, message).to_dict()}


def _outcome(program: str, args_text: str | None, limits: SandboxLimits) -> dict[str, object]:
    try:
        return _call(program, args_text, limits)
    except values.ValueRejectedError as exc:
        return {"error": exc.error.to_dict()}
    except MemoryError:
        return _error(ErrorCode.MEMORY_LIMIT, f"memory limit of {limits.memory_bytes} bytes exceeded")
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: f does not get to end the job
        return _error(ErrorCode.RUNTIME_ERROR, _describe(exc))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def run_job(
    program: str,
    args_text: str | None,
    *,
    limits: SandboxLimits,
    result_fd: int,
    scratch_dir: str,
    nproc_limit: int | None,
) -> NoReturn:
    """Entry point of the forked job process; never returns.

    ``args_text`` ``None`` only loads the program and checks that ``f`` exists.
    """
    status = 70
    try:
        _confine(result_fd, scratch_dir, limits, nproc_limit)
        message = _outcome(program, args_text, limits)
        _write_all(RESULT_FD, json.dumps(message).encode("ascii"))
        status = EXIT_OK
    except MemoryError:
        status = 71
    finally:
        os._exit(status)
