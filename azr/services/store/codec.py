"""Compact, strict encoding of an ``Experience`` as ONE binary field of a Redis stream entry.

Why one field: the cost of a stream entry, in the client (packing the command) and in Redis (parsing
and storing it), grows with its number of fields; one packed payload per experience is the cheapest.

Layout of the payload (all little-endian), version 3::

    header   _HEADER: version (u8), kind (u8: 0 sampled, 1 demonstration), 2 pad bytes, prompt length P
             and response length R in tokens (u32),
             policy version (i64), reward (f64), byte lengths of id, run, role, type, task, parts (u16)
    arrays   prompt ids int32[P], response ids int32[R], behaviour log-probs float32[R]
    text     id, run id, role, task type, task id (UTF-8), reward parts (UTF-8 JSON object)

The header is 40 bytes, so the arrays start aligned. Version 2 had no kind and zeros in its place, so its
entries (written by an older learner's producers) still read, as sampled experiences.

Decoding is strict: a wrong set of fields, an unknown version or kind, a payload whose length differs from
what its header declares, bad UTF-8 or JSON, a non-finite reward or reward part (a number too large for a
float included), or an experience that breaks its own invariants raises ``MalformedEntryError`` with the
reason, so the consumer can quarantine the entry instead of training on it; ``decode`` raises nothing
else, whatever the bytes. ``encode`` refuses (``ValueError``) what ``decode`` would refuse, so the codec
never writes an entry it cannot read.

Decoded arrays are read-only views of the payload (no copy); the trainer only reads them (it collates
them into fresh tensors). Copy one before writing to it.
"""

from __future__ import annotations

import functools
import json
import math
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from azr.core.experience import Experience, ExperienceKind
from azr.core.task import Role, TaskType

VERSION = 3
READABLE_VERSIONS = frozenset({2, VERSION})
FIELD = b"x"
"""The one stream field that holds the payload."""
_HEADER = struct.Struct("<BB2xIIqd6H")
_KINDS = (ExperienceKind.SAMPLED, ExperienceKind.DEMONSTRATION)
"""The kind byte's values, by index."""
_IDS = np.dtype("<i4")
_LOGPROBS = np.dtype("<f4")
_MAX_TEXT_BYTES = 0xFFFF  # u16 length fields
_MAX_PARTS_BYTES = 4096  # a handful of named reward components; anything bigger is not ours
_TEXT_NAMES = ("id", "run", "role", "type", "task")


class MalformedEntryError(ValueError):
    """A stream entry that is not a valid encoded experience; ``reason`` says what is wrong."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def encode(exp: Experience) -> dict[bytes, bytes]:
    """The stream fields of an experience (one field, ``FIELD``); ``ValueError`` for one that ``decode``
    would refuse."""
    if not exp.id:
        raise ValueError("id: empty")
    if not math.isfinite(exp.reward):
        raise ValueError(f"reward: not finite: {exp.reward}")
    texts = [
        exp.id.encode(),
        exp.run_id.encode(),
        exp.role.encode(),
        exp.task_type.encode(),
        exp.task_id.encode(),
        json.dumps(exp.reward_parts, separators=(",", ":"), allow_nan=False).encode(),
    ]
    for name, text in zip((*_TEXT_NAMES, "parts"), texts, strict=True):
        if len(text) > _MAX_TEXT_BYTES:
            raise ValueError(f"{name}: {len(text)} bytes, more than the codec's {_MAX_TEXT_BYTES}")
    try:
        _parse_parts(texts[-1])
    except MalformedEntryError as exc:
        raise ValueError(f"reward_parts cannot be stored: {exc.reason}") from None
    try:
        header = _HEADER.pack(
            VERSION,
            _KINDS.index(exp.kind),
            len(exp.prompt_ids),
            len(exp.response_ids),
            exp.policy_version,
            float(exp.reward),
            *map(len, texts),
        )
    except struct.error as exc:
        raise ValueError(f"policy_version {exp.policy_version} does not fit the codec's int64") from exc
    arrays = (
        exp.prompt_ids.astype(_IDS, copy=False).tobytes(),
        exp.response_ids.astype(_IDS, copy=False).tobytes(),
        exp.behaviour_logprobs.astype(_LOGPROBS, copy=False).tobytes(),
    )
    return {FIELD: b"".join((header, *arrays, *texts))}


def decode(fields: Mapping[bytes, bytes]) -> Experience:
    """Rebuild an experience from stream fields; raises ``MalformedEntryError`` on anything unexpected,
    and nothing else."""
    try:
        return _decode(fields)
    except MalformedEntryError:
        raise
    except Exception as exc:  # a case the checks below missed is still this entry's fault, not the reader's
        raise MalformedEntryError(f"{type(exc).__name__}: {exc}") from exc


def _decode(fields: Mapping[bytes, bytes]) -> Experience:
    payload = _payload(fields)
    if len(payload) < _HEADER.size:
        raise MalformedEntryError(f"truncated: {len(payload)} bytes, the header alone is {_HEADER.size}")
    version, kind, prompt_len, response_len, policy_version, reward, *text_lens = _HEADER.unpack_from(payload)
    if version not in READABLE_VERSIONS:
        raise MalformedEntryError(f"codec version {version}, expected {VERSION}")
    if kind >= len(_KINDS):
        raise MalformedEntryError(f"kind: {kind} is not one of 0 (sampled), 1 (demonstration)")
    arrays_end = _HEADER.size + 4 * prompt_len + 8 * response_len
    expected = arrays_end + sum(text_lens)
    if len(payload) != expected:
        raise MalformedEntryError(
            f"length mismatch: the header declares {expected} bytes, the payload has {len(payload)}"
        )
    if not math.isfinite(reward):
        raise MalformedEntryError(f"reward: not finite: {reward}")
    texts = []
    start = arrays_end
    for name, length in zip(_TEXT_NAMES, text_lens[:-1], strict=True):
        texts.append(_text(payload[start : start + length], name))
        start += length
    if not texts[0]:
        raise MalformedEntryError("id: empty")
    parts = _parts(payload[start:])
    response_at = _HEADER.size + 4 * prompt_len
    try:
        return Experience(
            id=texts[0],
            run_id=texts[1],
            policy_version=policy_version,
            role=Role(texts[2]),
            task_type=TaskType(texts[3]),
            prompt_ids=_array(payload, _IDS, _HEADER.size, prompt_len),
            response_ids=_array(payload, _IDS, response_at, response_len),
            behaviour_logprobs=_array(payload, _LOGPROBS, response_at + 4 * response_len, response_len),
            reward=reward,
            reward_parts=parts,
            task_id=texts[4],
            kind=_KINDS[kind],
        )
    except ValueError as exc:  # the Experience's own invariants (role, type, lengths, kind)
        raise MalformedEntryError(str(exc)) from exc


def _payload(fields: Mapping[bytes, bytes]) -> bytes:
    if len(fields) != 1 or FIELD not in fields:
        if b"v" in fields:  # the multi-field layout of version 1
            raise MalformedEntryError(f"codec version {_name(fields[b'v'])}, expected {VERSION}")
        names = sorted(_name(k) for k in fields)
        raise MalformedEntryError(f"fields: expected only [{_name(FIELD)!r}], got {names}")
    payload = fields[FIELD]
    if not isinstance(payload, bytes):
        raise MalformedEntryError(f"payload: not bytes but {type(payload).__name__}")
    return payload


def _name(key: object) -> str:
    return key.decode(errors="replace") if isinstance(key, bytes) else repr(key)


def _text(raw: bytes, name: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise MalformedEntryError(f"{name}: not UTF-8") from exc


def _array(payload: bytes, dtype: np.dtype[Any], offset: int, count: int) -> npt.NDArray[Any]:
    # A read-only view of the payload, native-endian on little-endian hosts; elsewhere Experience converts.
    return np.frombuffer(payload, dtype=dtype, count=count, offset=offset)


def _parts(raw: bytes) -> dict[str, float]:
    # Rewards take few distinct values, so most entries repeat a recent encoding: parse and validate
    # each encoding once, and hand every experience its own copy.
    return dict(_parse_parts(raw))


@functools.lru_cache(maxsize=1024)
def _parse_parts(raw: bytes) -> dict[str, float]:
    if len(raw) > _MAX_PARTS_BYTES:
        raise MalformedEntryError(f"parts: {len(raw)} bytes, more than {_MAX_PARTS_BYTES}")
    try:
        parts = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise MalformedEntryError("parts: not JSON") from exc
    if not isinstance(parts, dict):
        raise MalformedEntryError("parts: not a JSON object")
    out = {}
    for name, value in parts.items():
        # type() rather than isinstance: bool is an int subclass and must be refused.
        if type(value) not in (int, float):
            raise MalformedEntryError(f"parts: {name!r} is not a number")
        try:
            number = float(value)  # an int beyond the float range raises OverflowError
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise MalformedEntryError(f"parts: {name!r} is not a finite float")
        out[name] = number
    return out
