"""The stream codec: exact round trips, the wire layout, and a clear reason for every malformed entry."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from azr.core.experience import ExperienceKind
from azr.services.store import codec
from tests.services.store.factories import make_experience

# The documented layout, written out independently of the codec: version, kind, pad, P, R, policy
# version, reward, then the byte lengths of id, run, role, type, task and parts.
HEADER = struct.Struct("<BB2xIIqd6H")


@pytest.mark.parametrize(("prompt_len", "response_len"), [(0, 1), (7, 5), (300, 700)])
def test_round_trip_is_exact(prompt_len: int, response_len: int) -> None:
    exp = make_experience(5, policy_version=12, prompt_len=prompt_len, response_len=response_len)
    fields = codec.encode(exp)
    assert list(fields) == [codec.FIELD]
    strings = (exp.id, exp.run_id, exp.role, exp.task_type, exp.task_id, json.dumps(exp.reward_parts))
    texts = sum(len(s.replace(" ", "").encode()) for s in strings)
    assert len(fields[codec.FIELD]) == HEADER.size + 4 * prompt_len + 8 * response_len + texts
    back = codec.decode(fields)
    for name in ("prompt_ids", "response_ids", "behaviour_logprobs"):
        original, decoded = getattr(exp, name), getattr(back, name)
        assert decoded.dtype == original.dtype and np.array_equal(decoded, original)
        assert not decoded.flags.writeable  # a view of the payload, as documented
    assert (back.id, back.run_id, back.policy_version, back.role, back.task_type, back.task_id) == (
        exp.id,
        exp.run_id,
        exp.policy_version,
        exp.role,
        exp.task_type,
        exp.task_id,
    )
    assert back.reward == exp.reward and back.reward_parts == exp.reward_parts
    assert back.kind is ExperienceKind.SAMPLED


def test_a_demonstration_keeps_its_kind() -> None:
    exp = replace(make_experience(2), kind=ExperienceKind.DEMONSTRATION, behaviour_logprobs=np.zeros(5))
    fields = codec.encode(exp)
    assert fields[codec.FIELD][1] == 1  # the kind byte
    assert codec.decode(fields).kind is ExperienceKind.DEMONSTRATION


def test_each_decoded_experience_owns_its_reward_parts() -> None:
    fields = codec.encode(make_experience(1))
    first, second = codec.decode(fields), codec.decode(fields)
    first.reward_parts["format"] = 9.0
    assert second.reward_parts["format"] == -0.5 and codec.decode(fields).reward_parts["format"] == -0.5


def test_unencodable_experiences_are_refused_at_the_producer() -> None:
    too_long = make_experience(1)
    too_long.task_id = "t" * 70_000
    with pytest.raises(ValueError, match="task: 70000 bytes"):
        codec.encode(too_long)
    nan_part = make_experience(1)
    nan_part.reward_parts = {"solve": float("nan")}
    with pytest.raises(ValueError, match="Out of range float"):
        codec.encode(nan_part)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"reward_parts": {"solve": 10**400}},
            "reward_parts cannot be stored: parts: 'solve' is not a finite",
        ),
        ({"reward_parts": {"solve": True}}, "'solve' is not a number"),
        ({"reward": float("inf")}, "reward: not finite"),
        ({"id": ""}, "id: empty"),
    ],
)
def test_the_encoder_refuses_what_the_decoder_would(change: dict[str, Any], reason: str) -> None:
    """An int too large for a float once went through json.dumps and then broke every read of its batch."""
    exp = make_experience(1)
    for name, value in change.items():
        setattr(exp, name, value)
    with pytest.raises(ValueError, match=reason):
        codec.encode(exp)


def pack(
    *,
    version: int = codec.VERSION,
    kind: int = 0,
    prompt: bytes = b"\x01\x00\x00\x00" * 2,
    response: bytes = b"\x02\x00\x00\x00" * 3,
    logprobs: bytes | None = None,
    response_len: int | None = None,
    ver: int = 3,
    reward: float = 0.5,
    texts: tuple[bytes, ...] = (b"exp-1", b"run", b"solve", b"deduction", b"task-1"),
    parts: bytes = b'{"format":-0.5}',
    header_lens: tuple[int, ...] | None = None,
    tail: bytes = b"",
) -> dict[bytes, Any]:
    """A hand-made payload, valid unless an argument says otherwise."""
    logprobs = b"\x00\x00\x80\xbf" * 3 if logprobs is None else logprobs
    response_len = len(response) // 4 if response_len is None else response_len
    lens = header_lens or tuple(len(t) for t in (*texts, parts))
    header = HEADER.pack(version, kind, len(prompt) // 4, response_len, ver, reward, *lens)
    return {codec.FIELD: header + prompt + response + logprobs + b"".join(texts) + parts + tail}


def test_a_hand_packed_payload_decodes() -> None:
    exp = codec.decode(pack())
    assert (exp.id, exp.run_id, exp.policy_version, exp.role, exp.task_type, exp.task_id) == (
        "exp-1",
        "run",
        3,
        "solve",
        "deduction",
        "task-1",
    )
    assert exp.prompt_ids.tolist() == [1, 1] and exp.response_ids.tolist() == [2, 2, 2]
    assert exp.behaviour_logprobs.tolist() == [-1.0] * 3
    assert exp.reward == 0.5 and exp.reward_parts == {"format": -0.5}


def test_version_2_entries_still_read_as_sampled() -> None:
    """Version 2 held zeros where the kind byte is: entries an older producer left in the stream train."""
    exp = codec.decode(pack(version=2))
    assert exp.kind is ExperienceKind.SAMPLED and exp.response_ids.tolist() == [2, 2, 2]


def _texts(**changes: bytes) -> tuple[bytes, ...]:
    names = ("id", "run", "role", "type", "task")
    default = dict(zip(names, (b"exp-1", b"run", b"solve", b"deduction", b"task-1"), strict=True))
    return tuple((default | changes)[n] for n in names)


VERSION_1 = {b"v": b"1", b"id": b"exp-1", b"reward": b"0.5"}  # the older, one-field-per-value layout
MALFORMED: list[tuple[str, dict[bytes, Any], str]] = [
    ("no fields", {}, "fields: expected only ['x'], got []"),
    ("extra field", {**pack(), b"extra": b"1"}, "got ['extra', 'x']"),
    ("entry of codec version 1", VERSION_1, "codec version 1, expected 3"),
    ("unknown codec version", pack(version=4), "codec version 4, expected 3"),
    ("unknown kind", pack(kind=2), "kind: 2 is not one of 0 (sampled), 1 (demonstration)"),
    ("demonstration with log-probs", pack(kind=1), "a demonstration's behaviour log-probs are all 0"),
    ("str instead of bytes", {codec.FIELD: "x" * 64}, "payload: not bytes but str"),
    ("truncated header", {codec.FIELD: pack()[codec.FIELD][:39]}, "truncated: 39 bytes"),
    ("truncated payload", {codec.FIELD: pack()[codec.FIELD][:-1]}, "length mismatch"),
    ("trailing bytes", pack(tail=b"\x00"), "length mismatch"),
    ("array lengths disagree", pack(response_len=4), "length mismatch"),
    ("text lengths disagree", pack(header_lens=(5, 3, 5, 9, 6, 99)), "length mismatch"),
    ("empty response", pack(response=b"", logprobs=b""), "at least one response token"),
    ("unknown role", pack(texts=_texts(role=b"judge")), "is not a valid Role"),
    ("unknown task type", pack(texts=_texts(type=b"riddle")), "is not a valid TaskType"),
    ("non-finite reward", pack(reward=float("nan")), "reward: not finite"),
    ("infinite reward", pack(reward=float("-inf")), "reward: not finite"),
    ("reward parts not JSON", pack(parts=b"{format"), "parts: not JSON"),
    ("reward parts nested too deep", pack(parts=b"[" * 4000), "parts: not JSON"),
    ("reward parts too big", pack(parts=b" " * 5000), "parts: 5000 bytes"),
    ("reward parts not an object", pack(parts=b"[1, 2]"), "parts: not a JSON object"),
    ("reward parts not numbers", pack(parts=b'{"format": "x"}'), "parts: 'format' is not a number"),
    ("reward part a bool", pack(parts=b'{"format": true}'), "parts: 'format' is not a number"),
    ("reward part not finite", pack(parts=b'{"format": NaN}'), "parts: 'format' is not a finite float"),
    ("reward part beyond a float", pack(parts=b'{"format": 1' + b"0" * 400 + b"}"), "not a finite float"),
    ("reward part with 5000 digits", pack(parts=b'{"f": 1' + b"0" * 4000 + b"}"), "parts: "),
    ("id not UTF-8", pack(texts=_texts(id=b"\xff\xfe")), "id: not UTF-8"),
    ("task not UTF-8", pack(texts=_texts(task=b"\xc3")), "task: not UTF-8"),
    ("empty id", pack(texts=_texts(id=b"")), "id: empty"),
]


@pytest.mark.parametrize(("fields", "reason"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_entries_are_rejected_with_a_reason(fields: dict[bytes, Any], reason: str) -> None:
    with pytest.raises(codec.MalformedEntryError) as caught:
        codec.decode(fields)
    assert reason in caught.value.reason
