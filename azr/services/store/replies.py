"""Typed views of raw redis-py replies (the client is built with bytes replies, see ``connect``).

redis-py types its replies as unions over every reply shape; these helpers check the shape once, at the
boundary, and raise ``TypeError`` on anything else, so the rest of the store works on plain types.
"""

from __future__ import annotations

Entry = tuple[bytes, dict[bytes, bytes]]


def as_bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"expected a bulk string reply, got {type(value).__name__}")


def as_text(value: object) -> str:
    return as_bytes(value).decode()


def as_fields(value: object) -> dict[bytes, bytes]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a field map, got {type(value).__name__}")
    return {as_bytes(k): as_bytes(v) for k, v in value.items()}


def as_entries(value: object) -> list[Entry]:
    """Entries of a stream range reply (XRANGE, XREVRANGE, one stream of XREAD, XAUTOCLAIM's claimed);
    entries that no longer exist (reported as ``None``) are left out.

    Field names and values are not checked one by one (this is the hot path of the trainer's reads): a
    client made by ``connect`` replies with bytes, and the codec rejects anything else it finds.
    """
    if not isinstance(value, list):
        raise TypeError(f"expected a list of stream entries, got {type(value).__name__}")
    out: list[Entry] = []
    for entry_id, fields in value:
        if entry_id is None or fields is None:
            continue
        if not isinstance(fields, dict):
            raise TypeError(f"expected a field map, got {type(fields).__name__}")
        out.append((as_bytes(entry_id), fields))
    return out


def first_stream_entries(reply: object) -> list[Entry]:
    """Entries of the first (only) stream of an XREAD/XREADGROUP reply; empty on a timeout."""
    if not reply:
        return []
    if not isinstance(reply, list):
        raise TypeError(f"expected an XREAD reply list, got {type(reply).__name__}")
    return as_entries(reply[0][1])
