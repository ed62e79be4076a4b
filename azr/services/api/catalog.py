"""Reads and removals of single tasks in the run's buffers, for the REST API.

``TaskBuffers`` (the store) serves the self-play loop: add, sample, newest. The API also needs to page
through a buffer, find a task by id and remove one; those are here, over the same keys (``Keys``) and the
same layout (``azr.services.store.buffers``): a sorted set of members by insertion sequence, a hash of
task JSON and a hash of counters. With dedup on (the default) a member is the task id; lookups by id do
not see the ``id#seq`` copies a buffer with dedup off keeps.

Paging is newest first within a type, types in ``TaskType`` order. A cursor names a type and a sequence
number, so a page never moves when tasks are added (they get higher sequence numbers) or evicted.

How self-play used a task is read from ``Counters`` under ``tasks/<id>/...`` (names built here).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import redis

from azr.core.task import Origin, Task, TaskType, TaskUse
from azr.services.store.keys import Keys
from azr.services.store.metrics import task_use

# KEYS: order, tasks, meta. ARGV: member. Removes it and keeps the per-origin counts right; 1 if removed.
_REMOVE = """
local body = redis.call('HGET', KEYS[2], ARGV[1])
if not body then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'origin:' .. cjson.decode(body)['origin'], -1)
redis.call('HINCRBY', KEYS[3], 'removed', 1)
return 1
"""

# KEYS: order, tasks. ARGV: direction ('older' or 'newer'), bound sequence (exclusive; '' for none), count.
# Returns {seq, body, seq, body, ...} in that direction; body is '' for a task evicted meanwhile. One round
# trip per chunk: on a busy host a round trip costs more than decoding the chunk.
_RANGE = """
local members
local n = tonumber(ARGV[3])
if ARGV[1] == 'older' then
  local high = '+inf'
  if ARGV[2] ~= '' then high = '(' .. ARGV[2] end
  members = redis.call('ZREVRANGEBYSCORE', KEYS[1], high, '-inf', 'WITHSCORES', 'LIMIT', 0, n)
else
  members = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[2], '+inf', 'WITHSCORES', 'LIMIT', 0, n)
end
local out = {}
for i = 1, #members, 2 do
  out[#out + 1] = members[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], members[i]) or ''
end
return out
"""
_FIRST_FILTERED_CHUNK = 64
_MAX_CHUNK = 1_024

_CURSOR = re.compile(r"^(deduction|abduction|induction)\.(\d{1,18})$")


class BadCursorError(ValueError):
    """A cursor that this module did not make."""


@dataclass(frozen=True, slots=True)
class TaskFilter:
    type: TaskType | None = None
    origin: Origin | None = None
    step_min: int | None = None
    step_max: int | None = None

    def admits(self, task: Task) -> bool:
        return (
            (self.origin is None or task.origin is self.origin)
            and (self.step_min is None or task.step >= self.step_min)
            and (self.step_max is None or task.step <= self.step_max)
        )


@dataclass(frozen=True, slots=True)
class Page:
    tasks: list[Task]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Use:
    reference: int
    solve: int
    solve_attempts: int
    solved: int


class Catalog:
    """Task lookups over one run's buffers (cheap to construct; all state is in Redis)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self._keys = keys
        self._remove = client.register_script(_REMOVE)
        self._range = client.register_script(_RANGE)

    def get(self, task_id: str) -> Task | None:
        pipe = self._client.pipeline(transaction=False)
        for task_type in TaskType:
            pipe.hget(self._keys.buffer_tasks(task_type), task_id)
        for raw in pipe.execute():
            if raw is not None:
                return Task.from_dict(json.loads(raw))
        return None

    def contains(self, task: Task) -> Task | None:
        """The stored copy of ``task`` (same content hash) in its type's buffer, if there is one."""
        raw = self._client.hget(self._keys.buffer_tasks(task.type), task.id)
        return None if raw is None else Task.from_dict(json.loads(raw))

    def present(self, task_type: TaskType, task_ids: list[str]) -> list[bool]:
        if not task_ids:
            return []
        found = self._client.hmget(self._keys.buffer_tasks(task_type), task_ids)
        return [raw is not None for raw in _listed(found)]

    def remove(self, task_id: str) -> bool:
        for task_type in TaskType:
            keys = [
                self._keys.buffer_order(task_type),
                self._keys.buffer_tasks(task_type),
                self._keys.buffer_meta(task_type),
            ]
            if int(self._remove(keys=keys, args=[task_id])):
                return True
        return False

    def use(self, task_ids: list[str]) -> list[Use]:
        if not task_ids:
            return []
        names = [task_use(task_id, use) for task_id in task_ids for use in TaskUse]
        values = counter_values(self._client, self._keys, names)
        width = len(TaskUse)
        return [Use(*values[i * width : (i + 1) * width]) for i in range(len(task_ids))]

    def page(self, where: TaskFilter, limit: int, cursor: str | None, scan_limit: int) -> Page:
        """Up to ``limit`` tasks admitted by ``where``, newest first, reading at most ``scan_limit``
        entries; ``next_cursor`` is None once every buffer has been read to its oldest task."""
        types = [where.type] if where.type is not None else list(TaskType)
        position = _parse_cursor(cursor, types)
        start = types.index(position[0]) if position else 0
        filtered = where != TaskFilter(type=where.type)
        found: list[Task] = []
        scanned = 0
        for task_type in types[start:]:
            below = position[1] if position and position[0] is task_type else None
            chunk = _FIRST_FILTERED_CHUNK if filtered else limit
            while True:
                want = min(chunk if filtered else limit - len(found), scan_limit - scanned)
                batch = self._read(task_type, "older", below, want)
                for seq, body in batch:
                    below = seq
                    scanned += 1
                    task = _admitted(body, where)
                    if task is not None:
                        found.append(task)
                    if len(found) == limit or scanned >= scan_limit:
                        return Page(found, f"{task_type.value}.{seq}")
                if len(batch) < want:
                    break
                chunk = min(2 * chunk, _MAX_CHUNK)
        return Page(found, None)

    def newer(self, task_type: TaskType, after: int, count: int) -> list[tuple[int, Task | None]]:
        """Up to ``count`` (sequence, task) pairs newer than sequence ``after``, oldest first; the task is
        None when it was evicted between the two reads."""
        return [
            (seq, Task.from_dict(json.loads(body)) if body else None)
            for seq, body in self._read(task_type, "newer", after, count)
        ]

    def _read(
        self, task_type: TaskType, direction: str, bound: int | None, count: int
    ) -> list[tuple[int, bytes]]:
        keys = [self._keys.buffer_order(task_type), self._keys.buffer_tasks(task_type)]
        reply = self._range(keys=keys, args=[direction, "" if bound is None else bound, count])
        if not isinstance(reply, list):
            raise TypeError(f"expected a list reply, got {type(reply).__name__}")
        return [(int(float(reply[i])), bytes(reply[i + 1])) for i in range(0, len(reply), 2)]


def _admitted(body: bytes, where: TaskFilter) -> Task | None:
    """The task if ``where`` admits it; the filter looks at the decoded JSON before building a ``Task``,
    which costs several times more than the JSON itself."""
    if not body:
        return None
    data = json.loads(body)
    if where.origin is not None and data.get("origin") != where.origin.value:
        return None
    step = data.get("step", 0)
    if (where.step_min is not None and step < where.step_min) or (
        where.step_max is not None and step > where.step_max
    ):
        return None
    return Task.from_dict(data)


def counter_values(client: redis.Redis, keys: Keys, names: list[str]) -> list[int]:
    """Values of the named counters (``Counters``' hash), 0 for those never incremented."""
    return [0 if v is None else int(v) for v in _listed(client.hmget(keys.counters(), names))]


def _listed(reply: object) -> list[bytes | None]:
    if not isinstance(reply, list):
        raise TypeError(f"expected an HMGET reply list, got {type(reply).__name__}")
    return reply


def _parse_cursor(cursor: str | None, types: list[TaskType]) -> tuple[TaskType, int] | None:
    if cursor is None:
        return None
    match = _CURSOR.match(cursor)
    if match is None or TaskType(match.group(1)) not in types:
        raise BadCursorError(f"cursor {cursor!r} was not made by this listing (or its type filter changed)")
    return TaskType(match.group(1)), int(match.group(2))
