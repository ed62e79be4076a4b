"""The job process: forked blank from the zygote, it reads one request, runs it, then ``os._exit``.

A job is one request (one task, or one answer to check): the program is compiled and executed once and
``f`` is called on each input in order, so its calls share the program's own module state exactly as a
plain Python run would, identically in both hash-seed slots. Nothing is shared between requests.

What ``f`` sees is what a fresh ``python3 -c '<program>\nprint(f(<input>))'`` shows it: the program runs
as ``__main__``; its inputs are built from their literal text in the same compilation unit as the program
(so dict keys keep the order they were written in, and equal constants are one object, as the compiler
merges them); the recursion limit is set so that ``f`` can recurse exactly as deep as from a fresh run's
top level (the reference depth is measured once per zygote, in a fresh interpreter).

Threat model
------------
Everything after ``_confine`` runs untrusted code in this process, so nothing here is trusted by the
supervisor: it reads the result pipe as hostile input and decides timeouts, crashes and kills from the
exit status and the limits it enforces itself (never from stderr).

Covered here (per process, before any untrusted code runs):
- its own session and process group (the supervisor kills the group on timeout);
- rlimits: address space, CPU seconds (``cpu_time_s`` per call as the soft limit, SIGXCPU; the hard
  limit, SIGKILL, is the request's total plus one second), file size, open files, core dumps off, and
  processes when the supervisor knows the namespace's process count;
- a fresh, empty scratch working directory; an empty environment;
- stdin/stdout/stderr on ``/dev/null`` and every other descriptor closed except the result pipe (fd 3),
  so printed text never reaches the protocol channel and the program cannot touch the supervisor's pipes;
- a fresh module for the program; its changes to other modules or builtins die with this process.

Not covered here: the program can write its own "result" on fd 3, tamper with ``values`` (it shares
this process) or raise its soft CPU limit up to the hard one. That only lets it choose its outputs, which
returning values does too, or spend the request's CPU budget in one call, which the supervisor's per-call
wall-clock limit still bounds; the supervisor accepts only well-formed results with child-reportable
codes, and the parent re-parses every output.
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import math
import os
import resource
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar, cast

from azr.executor import values
from azr.executor.errors import ErrorCode, ExecError
from azr.executor.limits import SandboxLimits

RESULT_FD = 3
ENTRY_NAME = "f"
PROGRAM_MODULE = "__main__"
ARGS_NAME = "__azr_inputs__"
"""Where the program's module holds its argument tuples, built by code compiled with the program."""
REFERENCE_DEPTH: int | None = None
"""How deep a function called from the top level of a fresh ``python3 -c`` run recurses; set by the
zygote (``measure_reference_depth``) before it forks any job."""
DEPTH_PROBE = (
    "c = [0]\n"
    "def p(c):\n    c[0] += 1\n    p(c)\n"
    "try:\n    p(c)\nexcept RecursionError:\n    pass\n"
    "print(c[0])\n"
)
_MESSAGE_CHARS = 300
"""Longest error message sent back; messages are for people, codes decide behaviour."""

Message = dict[str, object]
T = TypeVar("T")

EXIT_OK = 0
"""Exit status after a result was written; anything else (or a signal) means no trustworthy result."""


def _confine(
    result_fd: int, scratch_dir: str, limits: SandboxLimits, nproc_limit: int | None, calls: int
) -> None:
    # SIGINT is already at its default: the supervisor resets it before it forks any job (not here:
    # ``signal.signal`` runs enum code whose first run in a fresh fork copies ~70 pages of the warm heap).
    os.setsid()
    # Descriptors: the result pipe becomes fd 3, the standard streams /dev/null, everything else closed.
    if result_fd != RESULT_FD:
        os.dup2(result_fd, RESULT_FD)
        os.close(result_fd)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(RESULT_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    os.chdir(scratch_dir)
    if os.environ:  # the supervisor empties its own environment at start; this is the backstop
        os.environ.clear()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    # The soft CPU limit is one call's budget (raised before each later call, see ``_next_cpu_budget``);
    # the hard limit, which the job cannot raise, is the whole request's budget plus one second: SIGXCPU
    # first, SIGKILL if it is caught or ignored.
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_time_s, limits.cpu_time_s * calls + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    if nproc_limit is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc_limit, nproc_limit))


def _next_cpu_budget(limits: SandboxLimits) -> None:
    """Give the next call ``cpu_time_s`` seconds of CPU on top of what the process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(usage.ru_utime + usage.ru_stime) + limits.cpu_time_s
    resource.setrlimit(resource.RLIMIT_CPU, (min(soft, hard), hard))


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = ""
    name = type(exc).__name__
    return (f"{name}: {text}" if text else name)[:_MESSAGE_CHARS]


Entry = tuple[Callable[..., object], tuple[tuple[object, ...], ...]]


def load_entry(program: str, args: tuple[str, ...] = ()) -> Entry | Message:
    """Compile the program with its inputs as one unit, run it as ``__main__``; ``f`` and its argument
    tuples, or the error message that ends the request."""
    try:
        tree = ast.parse(program, "<string>")
        inputs = [ast.parse("f(" + text + "\n)", "<input>", mode="eval").body for text in args]
        tuples: list[ast.expr] = [
            ast.Tuple([*call.args], ast.Load()) for call in inputs if isinstance(call, ast.Call)
        ]
        tree.body.append(
            ast.Assign([ast.Name(ARGS_NAME, ast.Store())], ast.Tuple(tuples, ast.Load()), lineno=0)
        )
        code = compile(ast.fix_missing_locations(tree), "<string>", "exec")
    except (SyntaxError, ValueError, RecursionError) as exc:
        return _error(ErrorCode.SYNTAX_ERROR, _describe(exc))
    # A real module registered in sys.modules as "__main__", as in a plain run: dataclasses, enum and
    # typing look their class's module up there, and reprs name it.
    module = types.ModuleType(PROGRAM_MODULE)
    module.__dict__["__builtins__"] = builtins
    sys.modules[PROGRAM_MODULE] = module
    exec(code, module.__dict__)
    entry = module.__dict__.get(ENTRY_NAME)
    if not callable(entry):
        return _error(ErrorCode.NO_ENTRY_FUNCTION, f"the program defines no function {ENTRY_NAME!r}")
    built = module.__dict__.pop(ARGS_NAME, ())
    return cast(Callable[..., object], entry), cast(tuple[tuple[object, ...], ...], built)


def call_entry(entry: Callable[..., object], args: tuple[object, ...], limits: SandboxLimits) -> Message:
    result = entry(*args)
    text = values.canonical(result, values.ValueLimits(max_text_chars=limits.output_bytes))
    if len(text.encode("utf-8", "surrogatepass")) > limits.output_bytes:
        return _error(ErrorCode.OUTPUT_LIMIT, f"result text exceeds {limits.output_bytes} bytes")
    return {"output": text}


def _depth_probe(counter: list[int]) -> None:
    counter[0] += 1
    _depth_probe(counter)


def _match_recursion_limit(probed_depth: int) -> None:
    """Let ``f`` recurse exactly as deep as in a fresh run: the job's own frames below ``f`` are not
    the program's business. ``probed_depth`` is how deep ``_depth_probe`` got from where ``f`` is called."""
    if REFERENCE_DEPTH is not None:
        sys.setrecursionlimit(max(50, sys.getrecursionlimit() + REFERENCE_DEPTH - probed_depth))


def measure_reference_depth() -> int | None:
    """Run ``DEPTH_PROBE`` in a fresh interpreter (``posix_spawn``: ``subprocess`` would bring threading)."""
    read_fd, write_fd = os.pipe()
    try:
        pid = os.posix_spawn(
            sys.executable,
            [sys.executable, "-S", "-c", DEPTH_PROBE],
            {},
            file_actions=[(os.POSIX_SPAWN_DUP2, write_fd, 1)],
        )
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as out:
        text = out.read(64)
    _, status = os.waitpid(pid, 0)
    return int(text) if status == 0 and text.strip().isdigit() else None


def _error(code: ErrorCode, message: str) -> Message:
    return {"error": ExecError(code, message).to_dict()}


def _guarded(step: Callable[[], T], limits: SandboxLimits) -> T | Message:
    try:
        return step()
    except values.ValueRejectedError as exc:
        return {"error": exc.error.to_dict()}
    except MemoryError:
        return _error(ErrorCode.MEMORY_LIMIT, f"memory limit of {limits.memory_bytes} bytes exceeded")
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: f does not get to end the job
        return _error(ErrorCode.RUNTIME_ERROR, _describe(exc))


def _messages(program: str, args: tuple[str, ...] | None, limits: SandboxLimits) -> Iterator[Message]:
    """One message per call, in input order, stopping after the first error.

    After an error the process may be in any state (a half-run module, memory pressure), so the
    supervisor runs the remaining calls in a fresh fork; that keeps the outcome of every call the same
    as if each call had its own process, except for state the program's own successful calls left.
    """
    loaded = _guarded(lambda: load_entry(program, args or ()), limits)
    if isinstance(loaded, dict):
        yield loaded
        return
    entry, inputs = loaded
    if args is None:
        yield {"output": ""}
        return
    if REFERENCE_DEPTH is not None:
        # Probed from this frame, through ``call_entry`` itself, so that its first frame sits exactly where
        # ``f``'s will (one helper frame more and ``f`` could recurse one level deeper than in CPython).
        counter = [0]
        _guarded(functools.partial(call_entry, _depth_probe, (counter,), limits), limits)
        _match_recursion_limit(counter[0])
    for index, call_args in enumerate(inputs):
        if index:
            _next_cpu_budget(limits)
        message = _guarded(functools.partial(call_entry, entry, call_args, limits), limits)
        yield message
        if "error" in message:
            return


def encode_message(message: Message) -> bytes:
    """One result line: ASCII JSON holds no raw newline, so the newline ends exactly one message."""
    return json.dumps(message).encode("ascii") + b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def serve_job(request_fd: int, result_fd: int) -> NoReturn:
    """Entry point of a blank job process: wait for its request, then run it (``run_job``).

    The request is the first job data this process holds; it comes from the supervisor, after the fork.
    """
    status = 72
    try:
        request = _read_request(request_fd)
        os.close(request_fd)
        limits = SandboxLimits(**request["limits"])
        args = request["args"]
        run_job(
            request["program"],
            None if args is None else tuple(args),
            limits=limits,
            result_fd=result_fd,
            scratch_dir=request["scratch"],
            nproc_limit=request["nproc"],
        )
    finally:
        os._exit(status)


def _read_request(fd: int) -> dict[str, Any]:
    chunks = []
    while chunk := os.read(fd, 1024 * 1024):
        chunks.append(chunk)
    data = b"".join(chunks)
    message = json.loads(data[4:].decode("utf-8", "surrogatepass"))
    assert isinstance(message, dict)
    return message


def run_job(
    program: str,
    args: tuple[str, ...] | None,
    *,
    limits: SandboxLimits,
    result_fd: int,
    scratch_dir: str,
    nproc_limit: int | None,
) -> NoReturn:
    """Entry point of the forked job process; never returns.

    Writes one line of JSON per call on the result pipe. ``args`` ``None`` only loads the program and
    checks that ``f`` exists (one line).
    """
    status = 70
    try:
        _confine(result_fd, scratch_dir, limits, nproc_limit, calls=1 if args is None else len(args))
        for message in _messages(program, args, limits):
            _write_all(RESULT_FD, encode_message(message))
        status = EXIT_OK
    except MemoryError:
        status = 71
    finally:
        os._exit(status)
