"""The Lua scripts behind `RedisMailbox`: every state change is one atomic script.

One queue lives in eight keys that share the hash tag `{<name>}` (one Redis Cluster
slot), passed to every script in this order:

| KEYS | key | type | holds |
| --- | --- | --- | --- |
| 1 | `<ns>:{<name>}:ready` | zset | pending messages; score = visible-at (server ms) |
| 2 | `<ns>:{<name>}:inflight` | zset | delivered messages; score = visibility deadline |
| 3 | `<ns>:{<name>}:bodies` | hash | member -> encoded body |
| 4 | `<ns>:{<name>}:meta` | hash | member -> JSON `{id, s, u, r}` (id, sent at, reply-to) |
| 5 | `<ns>:{<name>}:deliveries` | hash | member -> delivery count |
| 6 | `<ns>:{<name>}:handles` | hash | member -> the receipt handle of its current delivery |
| 7 | `<ns>:{<name>}:seq` | string | the last member number handed out |
| 8 | `<ns>:{<name>}:notify` | list | wake-up tokens for long polls |

A member is the message's send number as 16 hex digits, so zset ties (equal scores)
resolve in send order. A receipt handle is `<member>:<token>`, with a fresh token per
`receive`; a handle is valid while it equals the stored one and its deadline has not
passed on the server's clock (`TIME`). `ARGV[1]` is always the queue TTL in ms: every
script that adds or moves a message refreshes it on all keys, so an abandoned queue
expires. Acknowledging only deletes, and is always preceded (by less than the
visibility timeout, which must be shorter than the TTL) by the `receive` or `extend`
that refreshed every key, so it skips the refresh (eight calls of its sixteen).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

__all__ = [
    "ACKNOWLEDGE",
    "ACKNOWLEDGE_MANY",
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

KEY_SUFFIXES = (
    "ready",
    "inflight",
    "bodies",
    "meta",
    "deliveries",
    "handles",
    "seq",
    "notify",
)
"""The queue's keys, in `KEYS` order."""

_PRELUDE = """
local ready, inflight, bodies, meta, deliveries, handles, seq, notify =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local ttl = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000

-- Deliveries whose deadline passed go back to `ready`, visible since their deadline;
-- their handles die with them.
local function requeue_expired()
  local expired = redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'WITHSCORES')
  for i = 1, #expired, 2 do
    redis.call('ZREM', inflight, expired[i])
    redis.call('HDEL', handles, expired[i])
    redis.call('ZADD', ready, expired[i + 1], expired[i])
  end
end

local function touch()
  for i = 1, 8 do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end

-- Something may have become visible sooner: wake one long poll (bounded backlog).
local function wake()
  if redis.call('LPUSH', notify, '1') > 64 then
    redis.call('LTRIM', notify, 0, 63)
  end
end

-- The member `handle` owns, or nil when the handle is stale (expired deliveries must
-- have been requeued first).
local function owned(handle)
  local member = string.match(handle, '^(%x+):')
  if not member or redis.call('HGET', handles, member) ~= handle then
    return nil
  end
  return member
end

local function owner(handle)
  requeue_expired()
  return owned(handle)
end

local function enqueue(id, body, reply_to, visible_at)
  local member = string.format('%016x', redis.call('INCR', seq))
  local record = {id = id, s = t[1], u = t[2]}
  if reply_to ~= '' then record.r = reply_to end
  redis.call('HSET', bodies, member, body)
  redis.call('HSET', meta, member, cjson.encode(record))
  redis.call('ZADD', ready, visible_at, member)
end

local function forget(member)
  redis.call('ZREM', inflight, member)
  redis.call('HDEL', bodies, member)
  redis.call('HDEL', meta, member)
  redis.call('HDEL', deliveries, member)
  redis.call('HDEL', handles, member)
end
"""

SEND = (
    _PRELUDE
    + """
-- ARGV: ttl, id, body, reply_to ('' for none), delay ms, max size (0: unbounded)
local max_size = tonumber(ARGV[6])
if max_size > 0 and redis.call('HLEN', bodies) >= max_size then
  return 0
end
enqueue(ARGV[2], ARGV[3], ARGV[4], now + tonumber(ARGV[5]))
wake()
touch()
return 1
"""
)
"""Enqueue one message; returns 1, or 0 when the queue holds `max size` messages."""

SEND_MANY = (
    _PRELUDE
    + """
-- ARGV: ttl, reply_to ('' for none), delay ms, then id, body, id, body, ... (unbounded
-- queues only). Returns how many were enqueued.
local visible_at = now + tonumber(ARGV[3])
local count = 0
for i = 4, #ARGV, 2 do
  enqueue(ARGV[i], ARGV[i + 1], ARGV[2], visible_at)
  count = count + 1
end
wake()
touch()
return count
"""
)
"""Enqueue a batch in one script call (one wake-up and one TTL refresh for all)."""

RECEIVE = (
    _PRELUDE
    + """
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
local rows = {}
for _, member in ipairs(due) do
  local handle = member .. ':' .. ARGV[4]
  redis.call('ZREM', ready, member)
  redis.call('ZADD', inflight, deadline, member)
  redis.call('HSET', handles, member, handle)
  local count = redis.call('HINCRBY', deliveries, member, 1)
  rows[#rows + 1] = {
    handle, count, redis.call('HGET', meta, member), redis.call('HGET', bodies, member)
  }
end
touch()
return {0, rows}
"""
)
"""Deliver up to `max messages` visible messages, each under a fresh handle."""

ACKNOWLEDGE = (
    _PRELUDE
    + """
-- ARGV: ttl, handle. Returns 1, or 0 when the handle is stale.
local member = owner(ARGV[2])
if not member then return 0 end
forget(member)
return 1
"""
)
"""Delete the message the handle owns."""

SEND_AND_ACKNOWLEDGE = (
    _PRELUDE
    + """
-- KEYS 1-8: the queue to send to; KEYS 9-16: the queue of the delivery to acknowledge.
-- ARGV: ttl, id, body, reply_to ('' for none), max size (0: unbounded), handle.
-- Returns {sent, acknowledged}: sent is 0 when the queue is full (then nothing is
-- acknowledged); acknowledged is 0 when the handle is stale.
local max_size = tonumber(ARGV[5])
if max_size > 0 and redis.call('HLEN', bodies) >= max_size then
  return {0, 0}
end
enqueue(ARGV[2], ARGV[3], ARGV[4], now)
wake()
touch()
-- The prelude's functions read these locals: point them at the second queue.
ready, inflight, bodies, meta, deliveries, handles, seq, notify =
  KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16]
local member = owner(ARGV[6])
if not member then return {1, 0} end
forget(member)
return {1, 1}
"""
)
"""Send one message and acknowledge a delivery of another queue (a worker's answer)."""

ACKNOWLEDGE_MANY = (
    _PRELUDE
    + """
-- ARGV: ttl, handle, handle, ... Returns one 1 (deleted) or 0 (stale) per handle.
requeue_expired()
local out = {}
for i = 2, #ARGV do
  local member = owned(ARGV[i])
  if member then
    forget(member)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
"""
)
"""Delete the messages the handles own, atomically, in one round trip."""

NACK = (
    _PRELUDE
    + """
-- ARGV: ttl, handle, visibility timeout ms. Returns 1, or 0 when the handle is stale.
local member = owner(ARGV[2])
if not member then return 0 end
redis.call('ZREM', inflight, member)
redis.call('HDEL', handles, member)
redis.call('ZADD', ready, now + tonumber(ARGV[3]), member)
wake()
touch()
return 1
"""
)
"""Return the message the handle owns to the queue, visible after the timeout."""

EXTEND = (
    _PRELUDE
    + """
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
"""
)
"""Move the visibility deadline of the message the handle owns to `now + timeout`."""

PURGE = (
    _PRELUDE
    + """
-- ARGV: ttl. Returns how many messages were deleted. `seq` stays, so members (and
-- therefore receipt handles) are never reused.
local count = redis.call('HLEN', bodies)
redis.call('DEL', ready, inflight, bodies, meta, deliveries, handles)
touch()
return count
"""
)
"""Delete every message, pending or in flight."""


def parse_meta(raw: bytes | str) -> tuple[str, str | None, datetime]:
    """Return (message id, reply-to name, enqueue time) from a meta record `SEND` wrote.

    Raises:
        TypeError, ValueError, KeyError: The record is missing or malformed.
    """
    meta = json.loads(raw)
    reply_to = meta.get("r")
    sent_at = int(meta["s"]) + int(meta["u"]) / 1_000_000
    return (
        str(meta["id"]),
        None if reply_to is None else str(reply_to),
        datetime.fromtimestamp(sent_at, UTC),
    )
