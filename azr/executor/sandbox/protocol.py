"""Framing and messages between the trusted parent and a sandbox supervisor.

The two ends talk over a pair of byte streams (the supervisor's stdin and stdout). A frame is a 4-byte
big-endian length followed by that many bytes of UTF-8 JSON holding one object. Messages:

* supervisor -> parent, once at start: ``{"op": "ready", "pid", "uid", "hash_seed"}``;
* parent -> supervisor: ``{"op": "run", "program", "args": [...], "limits": {...}}``, answered by
  ``{"calls": [{"output": str} | {"error": {...}}], "error": null | {...}, "elapsed_ms": float}``;
* parent -> supervisor: ``{"op": "probe", "tcp_port", "paths"}``, answered by what the supervisor
  observed about its own isolation (see ``supervisor.probe``).

Threat model: the supervisor side is inside the sandbox, so everything it sends is validated here as if
hostile (frame size capped, closed set of error codes, call count checked). What this module does not do:
judge outputs. An output text is only "what the program chose to return"; the parent parses it with the
capped literal parser before comparing anything.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from azr.executor.errors import ErrorCode, ExecError
from azr.executor.limits import SandboxLimits
from azr.executor.sandbox.records import CallOutcome, HashSeedSlot, RunOutcome, RunRequest

if TYPE_CHECKING:
    # Only the parent reads frames with asyncio. Importing it in the supervisor would bring in threading,
    # whose at-fork hook then runs Python code in every forked job (a few hundred copy-on-write faults).
    import asyncio

MAX_FRAME_BYTES = 64 * 1024**2
"""Largest frame either side accepts; a longer announced length is a protocol failure, never a read."""

_HEADER = struct.Struct(">I")

JsonObject = dict[str, Any]


class ProtocolError(Exception):
    """The peer broke the framing or sent a malformed message; the channel cannot be trusted any more."""


def encode_frame(message: JsonObject) -> bytes:
    # surrogatepass: a lone surrogate (in a program, an exception message) crosses as written, never
    # failing the encoder; the reader decodes the same way.
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds MAX_FRAME_BYTES ({MAX_FRAME_BYTES})")
    return _HEADER.pack(len(body)) + body


def decode_body(body: bytes) -> JsonObject:
    try:
        message = json.loads(body.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"frame is not UTF-8 JSON: {type(exc).__name__}") from None
    if not isinstance(message, dict):
        raise ProtocolError("frame must hold a JSON object")
    return message


def _frame_length(header: bytes) -> int:
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"announced frame of {length} bytes exceeds MAX_FRAME_BYTES")
    return int(length)


def _read_exactly(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = os.read(fd, min(remaining, 1024 * 1024))
        if not chunk:
            raise EOFError(f"stream ended with {remaining} of {size} bytes missing")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> JsonObject | None:
    """Blocking read of one frame from a file descriptor; ``None`` on a clean end of stream."""
    header = os.read(fd, _HEADER.size)
    if not header:
        return None
    if len(header) < _HEADER.size:
        header += _read_exactly(fd, _HEADER.size - len(header))
    return decode_body(_read_exactly(fd, _frame_length(header)))


def write_frame(fd: int, message: JsonObject) -> None:
    data = memoryview(encode_frame(message))
    while data:
        written = os.write(fd, data)
        data = data[written:]


async def read_frame_async(reader: asyncio.StreamReader) -> JsonObject:
    """Read one frame; raises ``EOFError`` when the stream ends (the supervisor died)."""
    import asyncio

    try:
        header = await reader.readexactly(_HEADER.size)
        body = await reader.readexactly(_frame_length(header))
    except asyncio.IncompleteReadError as exc:
        raise EOFError("supervisor stream ended mid-frame or before a reply") from exc
    return decode_body(body)


def encode_run(request: RunRequest) -> JsonObject:
    return {
        "op": "run",
        "program": request.program,
        "args": list(request.args),
        "limits": asdict(request.limits),
    }


def decode_run(message: JsonObject) -> tuple[str, tuple[str, ...], SandboxLimits]:
    """Supervisor side: the program, argument texts and limits of a run request."""
    program, args, limits = message.get("program"), message.get("args"), message.get("limits")
    if not isinstance(program, str):
        raise ProtocolError("run request needs a string 'program'")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ProtocolError("run request needs 'args' as a list of strings")
    if not isinstance(limits, dict):
        raise ProtocolError("run request needs a 'limits' object")
    try:
        return program, tuple(args), SandboxLimits(**limits)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"bad limits: {exc}") from None


def decode_error(data: object) -> ExecError:
    if not isinstance(data, dict) or not isinstance(data.get("message", ""), str):
        raise ProtocolError(f"malformed error object: {data!r:.200}")
    code = data.get("code")
    if not isinstance(code, str):
        raise ProtocolError(f"malformed error object: {data!r:.200}")
    try:
        return ExecError(ErrorCode(code), data.get("message", ""))
    except ValueError:
        raise ProtocolError(f"unknown error code {data.get('code')!r:.50}") from None


def decode_call(data: object) -> CallOutcome:
    if not isinstance(data, dict) or len(data) != 1:
        raise ProtocolError("a call must hold exactly one of 'output' and 'error'")
    if "output" in data:
        if not isinstance(data["output"], str):
            raise ProtocolError("call output must be a string")
        return CallOutcome(output=data["output"], error=None)
    if "error" in data:
        return CallOutcome(output=None, error=decode_error(data["error"]))
    raise ProtocolError("a call must hold exactly one of 'output' and 'error'")


def encode_call(call: CallOutcome) -> JsonObject:
    if call.error is not None:
        return {"error": call.error.to_dict()}
    return {"output": call.output}


def encode_outcome(outcome: RunOutcome) -> JsonObject:
    return {
        "calls": [encode_call(call) for call in outcome.calls],
        "error": None if outcome.error is None else outcome.error.to_dict(),
        "elapsed_ms": outcome.elapsed_ms,
    }


def decode_outcome(message: JsonObject, expected_calls: int) -> RunOutcome:
    """Parent side: validate a run reply and turn it into a ``RunOutcome``."""
    calls, error, elapsed_ms = message.get("calls"), message.get("error"), message.get("elapsed_ms")
    if not isinstance(calls, list) or not isinstance(elapsed_ms, int | float):
        raise ProtocolError("run reply needs 'calls' (list) and 'elapsed_ms' (number)")
    outcome = RunOutcome(
        calls=tuple(decode_call(call) for call in calls),
        error=None if error is None else decode_error(error),
        elapsed_ms=float(elapsed_ms),
    )
    if outcome.error is None and len(outcome.calls) != expected_calls:
        raise ProtocolError(f"reply has {len(outcome.calls)} calls for {expected_calls} argument lists")
    return outcome


SLOT_HASH_SEEDS: dict[HashSeedSlot, int] = {
    HashSeedSlot.A: 1,
    HashSeedSlot.B: 2,
    HashSeedSlot.C: 3,
    HashSeedSlot.D: 4,
    HashSeedSlot.E: 5,
    HashSeedSlot.F: 6,
    HashSeedSlot.G: 7,
    HashSeedSlot.H: 8,
    HashSeedSlot.I: 9,
    HashSeedSlot.J: 10,
}
"""PYTHONHASHSEED of the supervisors of each slot. CPython reads the seed once, at interpreter start, so
seeds belong to warm interpreters, not to requests; fixed (not random) so that verdicts are reproducible.
Distinct seeds give independent string hashes, so their numeric values do not matter."""


REPLY_GRACE_S = 10.0
"""Slack on top of a request's call timeouts before a silent supervisor counts as hung."""


def reply_deadline_s(request: RunRequest) -> float:
    """How long the parent waits for the reply to ``request``: each call's wall-clock limit plus a second
    for its fork and result, and a grace for the supervisor itself; past it the sandbox is replaced."""
    return max(1, len(request.args)) * (request.limits.timeout_s + 1.0) + REPLY_GRACE_S


def check_hello(hello: JsonObject, slot: HashSeedSlot, *, require_unprivileged: bool) -> None:
    """Accept a supervisor's first message only when it is ready under the slot's hash seed (and, where
    the backend asks for it, not running as root); anything else is a ``ProtocolError``."""
    if hello.get("op") != "ready" or hello.get("hash_seed") != str(SLOT_HASH_SEEDS[slot]):
        raise ProtocolError(f"unexpected hello from the supervisor: {hello!r:.200}")
    if require_unprivileged and hello.get("uid") in (0, None):
        raise ProtocolError("the supervisor runs as root; the image must set an unprivileged USER")
