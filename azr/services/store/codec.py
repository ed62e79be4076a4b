"""Compact, strict encoding of an ``Experience`` as the fields of one Redis stream entry.

Token ids and log-probs travel as packed little-endian arrays (int32 / float32, raw bytes fields: a
1,000-token experience is ~6.8 kB, not a JSON list three times that size); scalars are plain fields;
``reward_parts`` is a small JSON object. Decoding is strict: a missing, unknown or malformed field raises
``MalformedEntryError`` with the reason, so the consumer can quarantine the entry instead of training on it.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping

import numpy as np

from azr.trainer.experience import Experience

VERSION = b"1"
_IDS = np.dtype("<i4")
_LOGPROBS = np.dtype("<f4")
_MAX_PARTS_BYTES = 4096  # a handful of named reward components; anything bigger is not ours
_FIELDS = frozenset(
    {
        b"v",
        b"id",
        b"run",
        b"ver",
        b"role",
        b"type",
        b"task",
        b"reward",
        b"parts",
        b"prompt",
        b"response",
        b"logprobs",
    }
)


class MalformedEntryError(ValueError):
    """A stream entry that is not a valid encoded experience; ``reason`` says what is wrong."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def encode(exp: Experience) -> dict[bytes, bytes]:
    """The stream fields of an experience."""
    return {
        b"v": VERSION,
        b"id": exp.id.encode(),
        b"run": exp.run_id.encode(),
        b"ver": str(exp.policy_version).encode(),
        b"role": exp.role.encode(),
        b"type": exp.task_type.encode(),
        b"task": exp.task_id.encode(),
        b"reward": repr(float(exp.reward)).encode(),
        b"parts": json.dumps(exp.reward_parts, separators=(",", ":"), allow_nan=False).encode(),
        b"prompt": exp.prompt_ids.astype(_IDS, copy=False).tobytes(),
        b"response": exp.response_ids.astype(_IDS, copy=False).tobytes(),
        b"logprobs": exp.behaviour_logprobs.astype(_LOGPROBS, copy=False).tobytes(),
    }


def decode(fields: Mapping[bytes, bytes]) -> Experience:
    """Rebuild an experience from stream fields; raises ``MalformedEntryError`` on anything unexpected."""
    keys = set(fields)
    if keys != _FIELDS:
        missing = sorted(_name(k) for k in _FIELDS - keys)
        unknown = sorted(_name(k) for k in keys - _FIELDS)
        raise MalformedEntryError(f"fields: missing {missing}, unknown {unknown}")
    if fields[b"v"] != VERSION:
        raise MalformedEntryError(f"codec version {fields[b'v']!r}, expected {VERSION!r}")
    reward = _float(fields[b"reward"], "reward")
    try:
        return Experience(
            id=_text(fields[b"id"], "id", nonempty=True),
            run_id=_text(fields[b"run"], "run"),
            policy_version=_int(fields[b"ver"], "ver"),
            role=_text(fields[b"role"], "role"),
            task_type=_text(fields[b"type"], "type"),
            prompt_ids=_array(fields[b"prompt"], _IDS, "prompt"),
            response_ids=_array(fields[b"response"], _IDS, "response"),
            behaviour_logprobs=_array(fields[b"logprobs"], _LOGPROBS, "logprobs"),
            reward=reward,
            reward_parts=_parts(fields[b"parts"]),
            task_id=_text(fields[b"task"], "task"),
        )
    except MalformedEntryError:
        raise
    except ValueError as exc:  # the Experience's own invariants (role, type, lengths)
        raise MalformedEntryError(str(exc)) from exc


def _name(key: object) -> str:
    return key.decode(errors="replace") if isinstance(key, bytes) else repr(key)


def _text(raw: bytes, name: str, *, nonempty: bool = False) -> str:
    if not isinstance(raw, bytes):
        raise MalformedEntryError(f"{name}: not bytes but {type(raw).__name__}")
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise MalformedEntryError(f"{name}: not UTF-8") from exc
    if nonempty and not text:
        raise MalformedEntryError(f"{name}: empty")
    return text


def _int(raw: bytes, name: str) -> int:
    text = _text(raw, name)
    if not text.isascii() or not text.lstrip("-").isdigit():
        raise MalformedEntryError(f"{name}: not an integer: {text[:40]!r}")
    return int(text)


def _float(raw: bytes, name: str) -> float:
    text = _text(raw, name)
    try:
        value = float(text)
    except ValueError as exc:
        raise MalformedEntryError(f"{name}: not a number: {text[:40]!r}") from exc
    if not math.isfinite(value):
        raise MalformedEntryError(f"{name}: not finite: {text[:40]!r}")
    return value


def _array(raw: bytes, dtype: np.dtype[np.int32] | np.dtype[np.float32], name: str) -> np.ndarray:
    if not isinstance(raw, bytes):
        raise MalformedEntryError(f"{name}: not bytes but {type(raw).__name__}")
    if len(raw) % dtype.itemsize:
        raise MalformedEntryError(
            f"{name}: {len(raw)} bytes is not a whole number of {dtype.itemsize}-byte items"
        )
    # frombuffer views the immutable bytes; the copy makes the array writable and native-endian.
    return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))


def _parts(raw: bytes) -> dict[str, float]:
    # Rewards take few distinct values, so most entries repeat a recent encoding: parse and validate
    # each encoding once, and hand every experience its own copy.
    return dict(_parse_parts(raw))


@functools.lru_cache(maxsize=1024)
def _parse_parts(raw: bytes) -> dict[str, float]:
    if not isinstance(raw, bytes):
        raise MalformedEntryError(f"parts: not bytes but {type(raw).__name__}")
    if len(raw) > _MAX_PARTS_BYTES:
        raise MalformedEntryError(f"parts: {len(raw)} bytes, more than {_MAX_PARTS_BYTES}")
    try:
        parts = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise MalformedEntryError("parts: not JSON") from exc
    # type() rather than isinstance: bool is an int subclass and must be refused.
    if not isinstance(parts, dict) or not all(
        type(v) in (int, float) and math.isfinite(v) and isinstance(k, str) for k, v in parts.items()
    ):
        raise MalformedEntryError("parts: not an object of finite numbers")
    return {k: float(v) for k, v in parts.items()}
