"""The Lua scripts behind `RedisMailbox`: every state change is one atomic script.

One queue lives in four keys that share the hash tag `{<name>}` (one Redis Cluster
slot), passed to every script in this order:

| KEYS | key | type | holds |
| --- | --- | --- | --- |
| 1 | `<ns>:{<name>}:ready` | zset | pending messages; score = visible-at (server ms) |
| 2 | `<ns>:{<name>}:inflight` | zset | delivered messages; score = visibility deadline |
| 3 | `<ns>:{<name>}:messages` | hash | the fields of every message, and `seq` |
| 4 | `<ns>:{<name>}:notify` | list | wake-up tokens for long polls |

The fields of message `<m>` in the messages hash: `<m>:b` the encoded body, `<m>:m` JSON
`{id, s, u, r}` (id, sent at, reply-to), `<m>:d` the delivery count, `<m>:h` the receipt
handle of its current delivery; `seq` is the last member number handed out.

A member is the message's send number as 16 hex digits, so zset ties (equal scores)
resolve in send order. A receipt handle is `<member>:<token>`, with a fresh token per
`receive`; a handle is valid while it equals the stored one and its deadline has not
passed on the server's clock (`TIME`).

Every `redis.call` from Lua costs about a microsecond of server CPU beyond the command
itself, and it is most of what a script costs; so the per-message fields share one
hash (one HSET, HMGET or HDEL for all of a message's fields, or a batch's), batches
use one call per command (ZADD, ZREM, HSET and HDEL take many members), and the TTL
refresh touches four keys. `ARGV[1]` is always the queue TTL in ms: every script that
adds or moves a message refreshes it on all keys, so an abandoned queue expires.
Acknowledging only deletes, and is always preceded (by less than the visibility
timeout, which must be shorter than the TTL) by the `receive` or `extend` that
refreshed every key, so it skips the refresh.

Redis memory per message held: about 0.5 KiB plus its body (measured by W5 in
`bench/w5_million.py`, `redis_bytes_per_queued_sample`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

__all__ = [
    "ACKNOWLEDGE",
    "ACKNOWLEDGE_MANY",
    "COUNT",
    "EXTEND",
    "KEY_SUFFIXES",
    "NACK",
    "PURGE",
    "RECEIVE",
    "SEND",
    "SEND_AND_ACKNOWLEDGE",
    "SEND_MANY",
    "parse_meta",
]

KEY_SUFFIXES = ("ready", "inflight", "messages", "notify")
"""The queue's keys, in `KEYS` order."""

_HEADER = """
local ready, inflight, messages, notify = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ttl = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
"""

_FUNCTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "call_many": (
        (),
        """
-- One call with many arguments, in slices (Lua's unpack has a stack limit).
local function call_many(command, key, args)
  for i = 1, #args, 4000 do
    redis.call(command, key, unpack(args, i, math.min(i + 3999, #args)))
  end
end
""",
    ),
    "requeue_expired": (
        ("call_many",),
        """
-- Deliveries whose deadline passed go back to `ready`, visible since their deadline;
-- their handles die with them.
local function requeue_expired()
  local expired = redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'WITHSCORES')
  if #expired == 0 then return end
  local members, fields, scored = {}, {}, {}
  for i = 1, #expired, 2 do
    members[#members + 1] = expired[i]
    fields[#fields + 1] = expired[i] .. ':h'
    scored[#scored + 1] = expired[i + 1]
    scored[#scored + 1] = expired[i]
  end
  call_many('ZREM', inflight, members)
  call_many('HDEL', messages, fields)
  call_many('ZADD', ready, scored)
end
""",
    ),
    "touch": (
        (),
        """
local function touch()
  for i = 1, 4 do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
""",
    ),
    "wake": (
        (),
        """
-- Something may have become visible sooner: wake one long poll (bounded backlog).
local function wake()
  if redis.call('LPUSH', notify, '1') > 64 then
    redis.call('LTRIM', notify, 0, 63)
  end
end
""",
    ),
    "member_of": (
        (),
        """
local function member_of(handle)
  return string.match(handle, '^(%x+):')
end
""",
    ),
    "owner": (
        ("requeue_expired", "member_of"),
        """
-- The member `handle` owns, or nil when the handle is stale (expired deliveries are
-- requeued first, so an expired handle is stale).
local function owner(handle)
  requeue_expired()
  local member = member_of(handle)
  if not member or redis.call('HGET', messages, member .. ':h') ~= handle then
    return nil
  end
  return member
end
""",
    ),
    "enqueue": (
        ("call_many",),
        """
-- Enqueue `batch` = {id, body, id, body, ...}, all visible at `visible_at`.
local function enqueue(batch, reply_to, visible_at)
  local n = #batch / 2
  local last = redis.call('HINCRBY', messages, 'seq', n)
  local fields, scored = {}, {}
  for k = 1, n do
    local member = string.format('%016x', last - n + k)
    local record = {id = batch[2 * k - 1], s = t[1], u = t[2]}
    if reply_to ~= '' then record.r = reply_to end
    fields[#fields + 1] = member .. ':b'
    fields[#fields + 1] = batch[2 * k]
    fields[#fields + 1] = member .. ':m'
    fields[#fields + 1] = cjson.encode(record)
    scored[#scored + 1] = visible_at
    scored[#scored + 1] = member
  end
  call_many('HSET', messages, fields)
  call_many('ZADD', ready, scored)
end
""",
    ),
    "forget": (
        ("call_many",),
        """
local function forget(members)
  local fields = {}
  for _, member in ipairs(members) do
    fields[#fields + 1] = member .. ':b'
    fields[#fields + 1] = member .. ':m'
    fields[#fields + 1] = member .. ':d'
    fields[#fields + 1] = member .. ':h'
  end
  call_many('ZREM', inflight, members)
  call_many('HDEL', messages, fields)
end
""",
    ),
}
"""The scripts' shared Lua functions: name -> (the functions it calls, its source)."""


def _script(body: str, *functions: str) -> str:
    """The header, `functions` and the ones they call (callees first), then `body`.

    A script defines only the functions it uses: Lua builds a closure for each one on
    every call, a few microseconds of server CPU per script for the whole set.
    """
    ordered: list[str] = []

    def add(name: str) -> None:
        if name in ordered:
            return
        for callee in _FUNCTIONS[name][0]:
            add(callee)
        ordered.append(name)

    for name in functions:
        add(name)
    return _HEADER + "".join(_FUNCTIONS[name][1] for name in ordered) + body


SEND = _script(
    """
-- ARGV: ttl, id, body, reply_to ('' for none), delay ms, max size (0: unbounded)
local max_size = tonumber(ARGV[6])
if max_size > 0
  and redis.call('ZCARD', ready) + redis.call('ZCARD', inflight) >= max_size then
  return 0
end
enqueue({ARGV[2], ARGV[3]}, ARGV[4], now + tonumber(ARGV[5]))
wake()
touch()
return 1
""",
    "enqueue",
    "wake",
    "touch",
)
"""Enqueue one message; returns 1, or 0 when the queue holds `max size` messages."""

SEND_MANY = _script(
    """
-- ARGV: ttl, reply_to ('' for none), delay ms, then id, body, id, body, ... (unbounded
-- queues only). Returns how many were enqueued.
enqueue({unpack(ARGV, 4)}, ARGV[2], now + tonumber(ARGV[3]))
wake()
touch()
return (#ARGV - 3) / 2
""",
    "enqueue",
    "wake",
    "touch",
)
"""Enqueue a batch in one script call (one wake-up and one TTL refresh for all)."""

SEND_AND_ACKNOWLEDGE = _script(
    """
-- KEYS 1-4: the queue to send to; KEYS 5-8: the queue of the delivery to acknowledge.
-- ARGV: ttl, id, body, reply_to ('' for none), max size (0: unbounded), handle.
-- Returns {sent, acknowledged}: sent is 0 when the queue is full (then nothing is
-- acknowledged); acknowledged is 0 when the handle is stale.
local max_size = tonumber(ARGV[5])
if max_size > 0
  and redis.call('ZCARD', ready) + redis.call('ZCARD', inflight) >= max_size then
  return {0, 0}
end
enqueue({ARGV[2], ARGV[3]}, ARGV[4], now)
wake()
touch()
-- The prelude's functions read these locals: point them at the second queue.
ready, inflight, messages, notify = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local member = owner(ARGV[6])
if not member then return {1, 0} end
forget({member})
return {1, 1}
""",
    "enqueue",
    "wake",
    "touch",
    "owner",
    "forget",
)
"""Send one message and acknowledge a delivery of another queue (a worker's answer)."""

RECEIVE = _script(
    """
-- ARGV: ttl, max messages, visibility timeout ms, token
-- Returns {wait_ms, rows}: rows of {handle, delivery count, meta, body}; with no rows,
-- wait_ms is how long until a message may become visible (-1: none is pending).
requeue_expired()
local due = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then
  -- Any wake-up token left here announced a change this script has just seen.
  redis.call('DEL', notify)
  local next_at = nil
  for _, key in ipairs({ready, inflight}) do
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #first > 0 and (next_at == nil or tonumber(first[2]) < next_at) then
      next_at = tonumber(first[2])
    end
  end
  if next_at == nil then return {-1, {}} end
  return {math.max(1, math.ceil(next_at - now)), {}}
end
local deadline = now + tonumber(ARGV[3])
local scored, wanted = {}, {}
for _, member in ipairs(due) do
  scored[#scored + 1] = deadline
  scored[#scored + 1] = member
  wanted[#wanted + 1] = member .. ':m'
  wanted[#wanted + 1] = member .. ':b'
  wanted[#wanted + 1] = member .. ':d'
end
redis.call('ZREM', ready, unpack(due))
redis.call('ZADD', inflight, unpack(scored))
-- One HMGET and one HSET for the batch: each message's new handle and delivery count.
local records = redis.call('HMGET', messages, unpack(wanted))
local fields, rows = {}, {}
for k, member in ipairs(due) do
  local handle = member .. ':' .. ARGV[4]
  local count = (tonumber(records[3 * k]) or 0) + 1
  fields[#fields + 1] = member .. ':h'
  fields[#fields + 1] = handle
  fields[#fields + 1] = member .. ':d'
  fields[#fields + 1] = count
  rows[k] = {handle, count, records[3 * k - 2], records[3 * k - 1]}
end
redis.call('HSET', messages, unpack(fields))
touch()
return {0, rows}
""",
    "requeue_expired",
    "touch",
)
"""Deliver up to `max messages` visible messages, each under a fresh handle."""

ACKNOWLEDGE = _script(
    """
-- ARGV: ttl, handle. Returns 1, or 0 when the handle is stale.
local member = owner(ARGV[2])
if not member then return 0 end
forget({member})
return 1
""",
    "owner",
    "forget",
)
"""Delete the message the handle owns."""

ACKNOWLEDGE_MANY = _script(
    """
-- ARGV: ttl, handle, handle, ... Returns one 1 (deleted) or 0 (stale) per handle.
requeue_expired()
local fields = {}
for i = 2, #ARGV do
  fields[i - 1] = (member_of(ARGV[i]) or '-') .. ':h'
end
local current = {}
for i = 1, #fields, 4000 do
  local slice = redis.call('HMGET', messages, unpack(fields, i, math.min(i + 3999, #fields)))
  for k = 1, #slice do current[i + k - 1] = slice[k] end
end
local out, done = {}, {}
for i = 2, #ARGV do
  if current[i - 1] == ARGV[i] then
    done[#done + 1] = member_of(ARGV[i])
    out[i - 1] = 1
  else
    out[i - 1] = 0
  end
end
if #done > 0 then forget(done) end
return out
""",
    "requeue_expired",
    "member_of",
    "forget",
)
"""Delete the messages the handles own, atomically, in one round trip."""

NACK = _script(
    """
-- ARGV: ttl, handle, visibility timeout ms. Returns 1, or 0 when the handle is stale.
local member = owner(ARGV[2])
if not member then return 0 end
redis.call('ZREM', inflight, member)
redis.call('HDEL', messages, member .. ':h')
redis.call('ZADD', ready, now + tonumber(ARGV[3]), member)
wake()
touch()
return 1
""",
    "owner",
    "wake",
    "touch",
)
"""Return the message the handle owns to the queue, visible after the timeout."""

EXTEND = _script(
    """
-- ARGV: ttl, handle, timeout ms. Returns 1, or 0 when the handle is stale.
local member = owner(ARGV[2])
if not member then return 0 end
local deadline = now + tonumber(ARGV[3])
if deadline < tonumber(redis.call('ZSCORE', inflight, member)) then
  wake()  -- a long poll may be waiting for the old, later deadline
end
redis.call('ZADD', inflight, deadline, member)
touch()
return 1
""",
    "owner",
    "wake",
    "touch",
)
"""Move the visibility deadline of the message the handle owns to `now + timeout`."""

COUNT = _script(
    """
-- ARGV: ttl. Returns how many messages are held, pending or in flight.
return redis.call('ZCARD', ready) + redis.call('ZCARD', inflight)
""",
)
"""Count the messages held."""

PURGE = _script(
    """
-- ARGV: ttl. Returns how many messages were deleted. `seq` stays, so members (and
-- therefore receipt handles) are never reused.
local count = redis.call('ZCARD', ready) + redis.call('ZCARD', inflight)
local seq = redis.call('HGET', messages, 'seq')
redis.call('DEL', ready, inflight, messages)
if seq then redis.call('HSET', messages, 'seq', seq) end
touch()
return count
""",
    "touch",
)
"""Delete every message, pending or in flight."""


def parse_meta(raw: bytes | str) -> tuple[str, str | None, datetime]:
    """Return (message id, reply-to name, enqueue time) from a meta record `SEND` wrote.

    Raises:
        TypeError, ValueError, KeyError: The record is missing or malformed.
    """
    meta = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    reply_to = meta.get("r")
    sent_at = int(meta["s"]) + int(meta["u"]) / 1_000_000
    return (
        str(meta["id"]),
        None if reply_to is None else str(reply_to),
        datetime.fromtimestamp(sent_at, UTC),
    )
