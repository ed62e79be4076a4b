"""The Lua scripts of the experience stream. Each runs atomically in Redis, and each is safe to run again
after a lost reply (the client retries): that is what every comment on a script's effect is about.

Lua's ``unpack()`` is bounded by the C stack, hence the slices of at most 1,000 arguments.
"""

from __future__ import annotations

from azr.services.store.metrics import (
    STREAM_DUPLICATES,
    STREAM_LEASES_LOST,
    STREAM_RECLAIMED,
    STREAM_TRAINED,
)

_NOW_MS = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
"""

# Forget ledger ids older than the retention or beyond the count cap (oldest first).
_TRIM = """
local function trim(ledger, now, retention_ms, max_ids)
  redis.call('ZREMRANGEBYSCORE', ledger, '-inf', now - retention_ms)
  local excess = redis.call('ZCARD', ledger) - max_ids
  if excess > 0 then redis.call('ZREMRANGEBYRANK', ledger, 0, excess - 1) end
end
"""

# Variadic commands over lists of any length, in slices (see above). ``mget`` gathers one reply per
# argument (ZMSCORE, HMGET); ``mput`` sums the integer replies (ZADD, HSET, HDEL, XACK, XDEL); ``opt`` is
# an argument that goes right after the key (a group, NX).
_SLICES = """
local function mget(cmd, key, list)
  local out = {}
  for i = 1, #list, 1000 do
    local part = redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
    for j = 1, #part do out[#out + 1] = part[j] end
  end
  return out
end
local function mput(cmd, key, list, opt)
  local sum = 0
  for i = 1, #list, 1000 do
    local last = math.min(i + 999, #list)
    if opt then sum = sum + redis.call(cmd, key, opt, unpack(list, i, last))
    else sum = sum + redis.call(cmd, key, unpack(list, i, last)) end
  end
  return sum
end
"""

# The set of the given entry ids that are pending and owned by a consumer: one XPENDING over the range
# they span, filtered by consumer (ids compare as numbers, ms then sequence).
_OWNED = """
local function id_key(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function owned(stream, group, consumer, ids)
  local lo, hi = ids[1], ids[1]
  local lo_ms, lo_seq = id_key(lo)
  local hi_ms, hi_seq = lo_ms, lo_seq
  for i = 2, #ids do
    local ms, seq = id_key(ids[i])
    if ms < lo_ms or (ms == lo_ms and seq < lo_seq) then lo, lo_ms, lo_seq = ids[i], ms, seq end
    if ms > hi_ms or (ms == hi_ms and seq > hi_seq) then hi, hi_ms, hi_seq = ids[i], ms, seq end
  end
  local set = {}
  for _, row in ipairs(redis.call('XPENDING', stream, group, lo, hi, 1000000, consumer)) do
    set[row[1]] = true
  end
  return set
end
"""

# KEYS: stream, admitted. ARGV: max_pending, max_pending_bytes, chunk_bytes, retention_ms, max_ids, then
# experience ids. The first step of an add: returns {-1, waiting, bytes} when the chunk does not fit, else
# a flag per id, 1 when it was never admitted (write it), 0 when it was (a retry: skip it). Writes nothing
# but the ledger's trimming. The payloads then go in one MULTI with their ids (see ExperienceStream.add):
# copying them through Lua would double Redis's cost per experience.
ADMIT = (
    _NOW_MS
    + _TRIM
    + _SLICES
    + """
local waiting = redis.call('XLEN', KEYS[1])
if waiting > 0 then
  local bytes = redis.call('MEMORY', 'USAGE', KEYS[1]) or 0
  if waiting + #ARGV - 5 > tonumber(ARGV[1]) or bytes + tonumber(ARGV[3]) > tonumber(ARGV[2]) then
    return {-1, waiting, bytes}
  end
end
trim(KEYS[2], now, tonumber(ARGV[4]), tonumber(ARGV[5]))
local ids = {}
for i = 6, #ARGV do ids[#ids + 1] = ARGV[i] end
local flags = {}
for j, score in ipairs(mget('ZMSCORE', KEYS[2], ids)) do
  if score then flags[j] = 0 else flags[j] = 1 end
end
return flags
"""
)

# KEYS: stream, trained, inflight. ARGV: (entry id, experience id) pairs, the candidates of one read.
# Marks each as in flight and returns a flag per pair: 1 keep, 0 drop (already trained, or another copy of
# the experience is in flight). Running it again gives the same answer.
HOLD = (
    _SLICES
    + """
local entries, exps = {}, {}
for i = 1, #ARGV, 2 do
  entries[#entries + 1] = ARGV[i]
  exps[#exps + 1] = ARGV[i + 1]
end
local trained, holders = mget('ZMSCORE', KEYS[2], exps), mget('HMGET', KEYS[3], exps)
local flags, marks = {}, {}
for j, entry in ipairs(entries) do
  local other = holders[j]
  local keep = not trained[j]
  if keep and other and other ~= entry and #redis.call('XRANGE', KEYS[1], other, other) > 0 then
    keep = false
  end
  if keep then
    marks[#marks + 1] = exps[j]
    marks[#marks + 1] = entry
    flags[#flags + 1] = 1
  else
    flags[#flags + 1] = 0
  end
end
if #marks > 0 then mput('HSET', KEYS[3], marks) end
return flags
"""
)

# KEYS: stream, held, strikes, counters. ARGV: group, consumer, min idle ms, n. Takes over up to n entries
# whose lease lapsed, all from one other consumer. A failed batch comes back in halves, so that a failure
# is finally blamed on a single entry: at most half the size of the batch the entries failed in (what
# their consumer held, or, for entries that failed before, the size recorded in ``held`` when they were
# last reclaimed). An entry that failed in a batch of one gets a strike. Returns {id, {fields}, strikes,
# deliveries, ...}.
CLAIM = f"""
local rows = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', tonumber(ARGV[3]), '-', '+',
  4 * tonumber(ARGV[4]))
local victim, limit, ids, info = nil, tonumber(ARGV[4]), {{}}, {{}}
for _, row in ipairs(rows) do
  if row[2] ~= ARGV[2] and (victim == nil or row[2] == victim) then
    if victim == nil then
      -- what the failed consumer held is the batch its entries failed in (unless recorded before)
      victim = row[2]
      local all = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1000000, victim)
      for _, held in ipairs(all) do redis.call('HSETNX', KEYS[2], held[1], #all) end
    end
    local size = tonumber(redis.call('HGET', KEYS[2], row[1]))
    if #ids == 0 then limit = math.min(limit, math.max(1, math.ceil(size / 2))) end
    if #ids >= limit then break end
    local strikes = tonumber(redis.call('HGET', KEYS[3], row[1]) or '0')
    if size == 1 then strikes = redis.call('HINCRBY', KEYS[3], row[1], 1) end
    ids[#ids + 1] = row[1]
    info[row[1]] = {{strikes, row[4] + 1}}
  end
end
if #ids == 0 then return {{}} end
local out = {{}}
for _, entry in ipairs(redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), unpack(ids))) do
  if entry and entry[2] then
    out[#out + 1] = entry[1]
    out[#out + 1] = entry[2]
    out[#out + 1] = info[entry[1]][1]
    out[#out + 1] = info[entry[1]][2]
  end
end
local taken = #out / 4
for i = 1, #out, 4 do redis.call('HSET', KEYS[2], out[i], taken) end
if taken > 0 then redis.call('HINCRBY', KEYS[4], '{STREAM_RECLAIMED}', taken) end
return out
"""

# KEYS: stream. ARGV: group, consumer, entry ids. Renews the lease (resets the idle time, without counting
# a delivery) of the entries this consumer still owns; returns the ids it no longer owns.
RENEW = (
    _OWNED
    + """
local ids = {}
for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
local mine_set = owned(KEYS[1], ARGV[1], ARGV[2], ids)
local mine, lost = {}, {}
for _, id in ipairs(ids) do
  if mine_set[id] then mine[#mine + 1] = id else lost[#lost + 1] = id end
end
for i = 1, #mine, 1000 do
  -- unpack() must come last in an argument list (elsewhere Lua keeps only its first value)
  local args = {KEYS[1], ARGV[1], ARGV[2], 0, unpack(mine, i, math.min(i + 999, #mine))}
  args[#args + 1] = 'JUSTID'
  redis.call('XCLAIM', unpack(args))
end
return lost
"""
)

# KEYS: stream, trained, counters, inflight, held, strikes, acks. ARGV: group, consumer, token,
# retention_ms, max_ids, then (entry id, experience id) pairs.
# Fenced: if any entry is no longer owned by this consumer nothing is done and {-1, lost ids...} comes back.
# Otherwise records the ids as trained, acknowledges and deletes the entries, and returns {fresh, dup}.
# Idempotent: the consumer's last token and result are kept, so a retried ack returns the same answer.
ACK = (
    _NOW_MS
    + _TRIM
    + _SLICES
    + _OWNED
    + f"""
local last = redis.call('HGET', KEYS[7], ARGV[2])
if last then
  local token, fresh, dup = string.match(last, '^(%w+):(%d+):(%d+)$')
  if token == ARGV[3] then return {{tonumber(fresh), tonumber(dup)}} end
end
local entries, exps, members, lost = {{}}, {{}}, {{}}, {{}}
for i = 6, #ARGV, 2 do
  entries[#entries + 1] = ARGV[i]
  exps[#exps + 1] = ARGV[i + 1]
  members[#members + 1] = now
  members[#members + 1] = ARGV[i + 1]
end
local mine = owned(KEYS[1], ARGV[1], ARGV[2], entries)
for _, entry in ipairs(entries) do
  if not mine[entry] then lost[#lost + 1] = entry end
end
if #lost > 0 then
  redis.call('HINCRBY', KEYS[3], '{STREAM_LEASES_LOST}', 1)
  table.insert(lost, 1, -1)
  return lost
end
-- NX adds only ids not yet recorded, and counts them (a repeat counts once)
local fresh = mput('ZADD', KEYS[2], members, 'NX')
mput('XACK', KEYS[1], entries, ARGV[1])
mput('XDEL', KEYS[1], entries)
mput('HDEL', KEYS[5], entries)
mput('HDEL', KEYS[6], entries)
local holders, done = mget('HMGET', KEYS[4], exps), {{}}
for j, exp in ipairs(exps) do
  if holders[j] == entries[j] then done[#done + 1] = exp end
end
mput('HDEL', KEYS[4], done)
local dup = #entries - fresh
trim(KEYS[2], now, tonumber(ARGV[4]), tonumber(ARGV[5]))
if fresh > 0 then redis.call('HINCRBY', KEYS[3], '{STREAM_TRAINED}', fresh) end
if dup > 0 then redis.call('HINCRBY', KEYS[3], '{STREAM_DUPLICATES}', dup) end
redis.call('HSET', KEYS[7], ARGV[2], ARGV[3] .. ':' .. fresh .. ':' .. dup)
return {{fresh, dup}}
"""
)

# KEYS: stream, quarantine, counters, inflight, held, strikes. ARGV: group, quarantine maxlen, most
# payload bytes kept, then (entry id, counter, quarantine reason or '', detail, experience id or '')
# quintuples. Drops entries a read does not deliver: counts each, quarantines those with a reason (with
# their fields, cut to size), acknowledges and deletes them. An entry already gone is skipped, so a retry
# neither quarantines nor counts twice.
SETTLE = """
local cap = tonumber(ARGV[3])
for i = 4, #ARGV, 5 do
  local entry, counter, reason, detail, exp = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local found = redis.call('XRANGE', KEYS[1], entry, entry)
  if #found > 0 then
    if reason ~= '' then
      local record, cut = {}, 0
      local fields = found[1][2]
      for j = 1, #fields, 2 do
        local value = fields[j + 1]
        if #value > cap then cut = math.max(cut, #value); value = string.sub(value, 1, cap) end
        record[#record + 1] = fields[j]
        record[#record + 1] = value
      end
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'q:source', entry, 'q:reason', reason,
        'q:detail', detail, 'q:cut', cut, unpack(record))
    end
    redis.call('HINCRBY', KEYS[3], counter, 1)
    redis.call('XDEL', KEYS[1], entry)
  end
  redis.call('XACK', KEYS[1], ARGV[1], entry)
  redis.call('HDEL', KEYS[5], entry)
  redis.call('HDEL', KEYS[6], entry)
  if exp ~= '' and redis.call('HGET', KEYS[4], exp) == entry then redis.call('HDEL', KEYS[4], exp) end
end
return 0
"""

# KEYS: stream. ARGV: group, consumer, retired consumer, idle ms. Hands what a consumer name holds at the
# start of a process (its previous process died holding it) to a retired name, as idle as a lapsed lease,
# so that it is reclaimed like any failed consumer's batch: in halves, with strikes. Returns the count.
RETIRE = """
local ids = {}
for _, row in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1000000, ARGV[2])) do
  ids[#ids + 1] = row[1]
end
for i = 1, #ids, 1000 do
  local args = {KEYS[1], ARGV[1], ARGV[3], 0, unpack(ids, i, math.min(i + 999, #ids))}
  args[#args + 1] = 'IDLE'
  args[#args + 1] = ARGV[4]
  args[#args + 1] = 'JUSTID'
  redis.call('XCLAIM', unpack(args))
end
return #ids
"""

# KEYS: stream, acks. ARGV: group, own consumer name, min idle ms. Deletes consumers of the group that
# hold no pending entries and have been idle that long, with their last ack; atomic, so a consumer cannot
# read between check and delete (deleting a consumer drops its pending entries from the group for good).
PRUNE = """
for _, row in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local info = {}
  for i = 1, #row, 2 do info[row[i]] = row[i + 1] end
  if info['name'] ~= ARGV[2] and info['pending'] == 0 and info['idle'] > tonumber(ARGV[3]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], info['name'])
    redis.call('HDEL', KEYS[2], info['name'])
  end
end
return 0
"""
