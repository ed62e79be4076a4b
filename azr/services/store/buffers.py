"""Per-type task buffers in Redis: dedup by content hash, evict the oldest at capacity, sample.

Layout of one buffer (see ``keys.py``): a sorted set ``order`` (member -> insertion sequence number, so
rank 0 is the oldest), a hash ``tasks`` (member -> task JSON) and a hash ``meta`` (sequence counter,
per-origin counts of the tasks present, lifetime counters, the zero-seed marker). With dedup on, the
member is the task id; with dedup off it is ``id#seq`` so copies coexist.

Every operation is one Lua script, so it is atomic: concurrent producers can neither overshoot the
capacity nor insert the same task twice, and a sampler never sees a half-written task. At the cap the
oldest task leaves and the new one always gets in (the reference implementation refused new tasks
instead). A task that was evicted may be admitted again later: dedup is over the tasks present.

Randomness comes from the client (a seeded ``random.Random``) as uniform numbers passed to the script,
which turns them into ranks against the buffer as it is at that instant; so sampling is reproducible
for a given seed and buffer content, and never reads a rank that no longer exists.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import redis

from azr.core.task import Origin, Task, TaskType, zero_seed
from azr.services.config import BufferConfig
from azr.services.store.keys import Keys

log = logging.getLogger(__name__)

# KEYS: order, tasks, meta. ARGV: capacity, dedup (0/1), seed_once (0/1), then (id, origin, json) triples.
# Returns {evicted, status...} with status 1 = added, 0 = duplicate; an empty table when seed_once is set
# and the buffer was seeded before.
_ADD = """
local order, tasks, meta = KEYS[1], KEYS[2], KEYS[3]
local cap, dedup = tonumber(ARGV[1]), ARGV[2] == '1'
if ARGV[3] == '1' then
  if redis.call('HSETNX', meta, 'seeded', 1) == 0 then return {} end
end
local out = {0}
for i = 4, #ARGV, 3 do
  local id, origin, body = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if dedup and redis.call('HEXISTS', tasks, id) == 1 then
    redis.call('HINCRBY', meta, 'duplicates', 1)
    out[#out + 1] = 0
  else
    local seq = redis.call('HINCRBY', meta, 'seq', 1)
    local member = id
    if not dedup then member = id .. '#' .. seq end
    redis.call('ZADD', order, seq, member)
    redis.call('HSET', tasks, member, body)
    redis.call('HINCRBY', meta, 'origin:' .. origin, 1)
    redis.call('HINCRBY', meta, 'added', 1)
    out[#out + 1] = 1
  end
end
local excess = redis.call('ZCARD', order) - cap
if excess > 0 then
  local popped = redis.call('ZPOPMIN', order, excess)
  for j = 1, #popped, 2 do
    local body = redis.call('HGET', tasks, popped[j])
    redis.call('HDEL', tasks, popped[j])
    redis.call('HINCRBY', meta, 'origin:' .. cjson.decode(body)['origin'], -1)
  end
  redis.call('HINCRBY', meta, 'evicted', excess)
  out[1] = excess
end
return out
"""

# Partial Fisher-Yates over ranks [0, pool) driven by client uniforms; shared by both samplers.
_PICK = """
local function pick(order, tasks, pool, uniforms, first, count, out)
  local swapped = {}
  for j = 0, count - 1 do
    local r = j + math.floor(tonumber(uniforms[first + j]) * (pool - j))
    if r > pool - 1 then r = pool - 1 end
    local vr, vj = swapped[r] or r, swapped[j] or j
    swapped[r], swapped[j] = vj, vr
    local member = redis.call('ZRANGE', order, vr, vr)[1]
    out[#out + 1] = redis.call('HGET', tasks, member)
  end
end
"""

# KEYS: order, tasks. ARGV: uniforms (k of them). Returns min(k, size) distinct task JSONs.
_SAMPLE = (
    _PICK
    + """
local n = redis.call('ZCARD', KEYS[1])
local out = {}
pick(KEYS[1], KEYS[2], n, ARGV, 1, math.min(#ARGV, n), out)
return out
"""
)

# KEYS: order, tasks. ARGV: b, cursor, then b uniforms.
# Returns {cursor', json...}: tasks newer than cursor (newest first, at most b), topped up with distinct
# older tasks uniformly, then (buffer smaller than b) uniformly with replacement. cursor' = newest seq.
_SOLVER_BATCH = (
    _PICK
    + """
local order, tasks = KEYS[1], KEYS[2]
local b = tonumber(ARGV[1])
local out = {}
local fresh = redis.call('ZREVRANGEBYSCORE', order, '+inf', '(' .. ARGV[2], 'LIMIT', 0, b)
for _, member in ipairs(fresh) do out[#out + 1] = redis.call('HGET', tasks, member) end
local n = redis.call('ZCARD', order)
local need = b - #fresh
if need > 0 and n > 0 then
  local older = math.min(need, n - #fresh)
  pick(order, tasks, n - #fresh, ARGV, 3, older, out)
  for j = older, need - 1 do
    local r = math.min(math.floor(tonumber(ARGV[3 + j]) * n), n - 1)
    out[#out + 1] = redis.call('HGET', tasks, redis.call('ZRANGE', order, r, r)[1])
  end
end
local newest = redis.call('ZRANGE', order, -1, -1, 'WITHSCORES')
local cursor = ARGV[2]
if #newest > 0 then cursor = newest[2] end
table.insert(out, 1, cursor)
return out
"""
)

# KEYS: order, tasks. ARGV: b. Returns the b newest task JSONs, newest first.
_NEWEST = """
local out = {}
for _, member in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  out[#out + 1] = redis.call('HGET', KEYS[2], member)
end
return out
"""


class CorruptTaskError(RuntimeError):
    """A task stored in a buffer cannot be decoded (written by something other than this module)."""


@dataclass(frozen=True, slots=True)
class AddResult:
    added: int
    """Tasks admitted."""
    duplicates: int
    """Tasks already present (dedup on), not admitted."""
    evicted: int
    """Oldest tasks evicted to stay within capacity."""
    too_large: int = 0
    """Tasks refused for being larger than ``BufferConfig.max_task_bytes``."""


@dataclass(frozen=True, slots=True)
class BufferCounts:
    size: int
    """Tasks present."""
    by_origin: dict[Origin, int]
    """Tasks present per origin (zero seed, user, proposed)."""
    added: int
    """Tasks ever admitted."""
    evicted: int
    """Tasks ever evicted at the cap."""
    duplicates: int
    """Adds ever refused as duplicates."""


@dataclass(frozen=True, slots=True)
class SolverBatch:
    tasks: list[Task]
    """B tasks: the newest since the cursor first, topped up uniformly."""
    cursor: int
    """Pass back as ``since`` next time so that only tasks added after this call count as fresh."""


def zero_seed_for(task_type: TaskType) -> Task | None:
    """The zero seed as a task of this type (induction: the identity on ten inputs, ``azr.core.task``)."""
    return zero_seed(task_type)


class TaskBuffer:
    """The buffer of one task type. Cheap to construct: all state is in Redis, so it survives restarts."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        task_type: TaskType,
        config: BufferConfig | None = None,
        seed: int | None = None,
    ) -> None:
        self._client = client
        self._type = task_type
        self._config = config or BufferConfig()
        self._rng = random.Random(seed)
        self._keys = [keys.buffer_order(task_type), keys.buffer_tasks(task_type)]
        self._meta = keys.buffer_meta(task_type)
        self._add = client.register_script(_ADD)
        self._sample = client.register_script(_SAMPLE)
        self._solver_batch = client.register_script(_SOLVER_BATCH)
        self._newest = client.register_script(_NEWEST)

    @property
    def task_type(self) -> TaskType:
        return self._type

    def add(self, task: Task) -> bool:
        """Admit one task; False if it is a duplicate. Evicts the oldest task at capacity."""
        return self.add_many([task]).added == 1

    def add_many(self, tasks: Iterable[Task]) -> AddResult:
        """Admit tasks atomically, in order; at capacity the oldest tasks (possibly earlier ones of this
        very call) are evicted. Tasks larger than ``max_task_bytes`` are refused and counted."""
        args: list[str] = []
        too_large = 0
        for task in tasks:
            self._check_type(task)
            body = json.dumps(task.to_dict(), ensure_ascii=False)
            if len(body.encode()) > self._config.max_task_bytes:
                log.warning(
                    "refused %s task %s: %d bytes, more than buffer.max_task_bytes (%d)",
                    self._type.value,
                    task.id,
                    len(body.encode()),
                    self._config.max_task_bytes,
                )
                too_large += 1
                continue
            args += [task.id, task.origin.value, body]
        if not args:
            return AddResult(added=0, duplicates=0, evicted=0, too_large=too_large)
        return replace(self._run_add(args, seed_once=False), too_large=too_large)

    def ensure_zero_seed(self) -> bool:
        """Write the zero seed the first time this buffer is started (once per prefix, even if it is
        evicted later). Returns True when it was written now."""
        seed = zero_seed_for(self._type)
        if seed is None:
            return False
        args = [seed.id, seed.origin.value, json.dumps(seed.to_dict(), ensure_ascii=False)]
        return self._run_add(args, seed_once=True).added == 1

    def size(self) -> int:
        return int(self._client.zcard(self._keys[0]))

    def counts(self) -> BufferCounts:
        pipe = self._client.pipeline(transaction=True)
        pipe.zcard(self._keys[0])
        pipe.hgetall(self._meta)
        size, meta = pipe.execute()
        fields = {k.decode(): int(v) for k, v in meta.items()}
        return BufferCounts(
            size=int(size),
            by_origin={origin: fields.get(f"origin:{origin.value}", 0) for origin in Origin},
            added=fields.get("added", 0),
            evicted=fields.get("evicted", 0),
            duplicates=fields.get("duplicates", 0),
        )

    def sample_uniform(self, k: int) -> list[Task]:
        """k distinct tasks drawn uniformly (fewer if the buffer holds fewer)."""
        _check_positive("k", k)
        raw = self._sample(keys=self._keys, args=self._uniforms(k))
        return [self._decode(item) for item in raw]

    def newest(self, b: int) -> list[Task]:
        """The b most recently admitted tasks, newest first."""
        _check_positive("b", b)
        return [self._decode(item) for item in self._newest(keys=self._keys, args=[b])]

    def solver_batch(self, b: int, since: int = 0) -> SolverBatch:
        """B tasks for the solver: tasks admitted after ``since`` newest first, topped up with older tasks
        drawn uniformly without replacement, then (if the buffer holds fewer than b) with replacement.
        Empty only if the buffer is empty."""
        _check_positive("b", b)
        if since < 0:
            raise ValueError(f"since must be a cursor returned by solver_batch (>= 0), got {since}")
        raw = self._solver_batch(keys=self._keys, args=[b, since, *self._uniforms(b)])
        return SolverBatch(tasks=[self._decode(item) for item in raw[1:]], cursor=int(float(raw[0])))

    def clear(self) -> None:
        """Remove every task and counter of this buffer (the zero-seed marker too)."""
        self._client.delete(*self._keys, self._meta)

    def _run_add(self, args: Sequence[str], *, seed_once: bool) -> AddResult:
        head = [self._config.capacity, int(self._config.dedup), int(seed_once)]
        out = self._add(keys=[*self._keys, self._meta], args=[*head, *args])
        if not out:
            return AddResult(added=0, duplicates=0, evicted=0)
        added = sum(out[1:])
        return AddResult(added=added, duplicates=len(out) - 1 - added, evicted=int(out[0]))

    def _uniforms(self, k: int) -> list[str]:
        # repr round-trips a double exactly; Lua's tonumber parses it back.
        return [repr(self._rng.random()) for _ in range(k)]

    def _check_type(self, task: Task) -> None:
        if task.type is not self._type:
            raise ValueError(f"a {task.type.value} task cannot go into the {self._type.value} buffer")

    def _decode(self, raw: bytes | None) -> Task:
        if raw is None:
            raise CorruptTaskError(f"{self._type.value} buffer: an ordered member has no stored task")
        try:
            return Task.from_dict(json.loads(raw))
        except (ValueError, TypeError, KeyError) as exc:
            raise CorruptTaskError(f"{self._type.value} buffer holds an undecodable task: {exc}") from exc


class TaskBuffers:
    """The three buffers of a run, one per task type."""

    def __init__(
        self, client: redis.Redis, keys: Keys, config: BufferConfig | None = None, seed: int | None = None
    ) -> None:
        self.by_type = {
            task_type: TaskBuffer(client, keys, task_type, config, None if seed is None else seed + i)
            for i, task_type in enumerate(TaskType)
        }

    def __getitem__(self, task_type: TaskType) -> TaskBuffer:
        return self.by_type[task_type]

    def add(self, task: Task) -> bool:
        """Admit a task into the buffer of its type."""
        return self.by_type[task.type].add(task)

    def ensure_zero_seed(self) -> dict[TaskType, bool]:
        """Seed every buffer that has a zero seed, once; says which were written now."""
        return {task_type: buffer.ensure_zero_seed() for task_type, buffer in self.by_type.items()}

    def sizes(self) -> dict[TaskType, int]:
        return {task_type: buffer.size() for task_type, buffer in self.by_type.items()}


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
