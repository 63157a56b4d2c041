"""A shorter path for the mailbox's script calls: straight onto a pooled connection.

`client.evalsha(...)` costs about as much client CPU as the round trip itself in
redis-py 8: per command it takes a connection from the pool and gives it back under a
lock, records observability counters, wraps the call in its retry helper and re-checks
every argument before hiredis packs them. `DirectCalls` keeps a few connections of the
client's own pool aside (one per thread calling at the same moment, shared by every
mailbox on that client), packs with hiredis and sends and reads on them directly: a
round trip of send, receive and acknowledge costs about half the client CPU.

On a connection that parses with hiredis (redis-py's default when hiredis is installed,
over RESP2 or RESP3), the command goes straight onto the connection's socket and the reply is read
with the connection's own hiredis reader and buffer: redis-py's `read_response` adds
checks for push messages, maintenance events and a second layer of error handling that
cost about a tenth of a mailbox call. Other connections go through
`send_packed_command` and `read_response`.

It is only a fast path. A connection or timeout error is raised as itself, and the
mailbox then runs the command again through the client, whose retry policy reconnects
(a command may run twice; delivery is at-least-once anyway). Clients it cannot serve
(Redis Cluster, a single-connection client, a blocking or custom pool, a client-side
cache) get no `DirectCalls` and use the client as before.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import redis
from redis.connection import ConnectionPool

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
_Push: type[Any] | None
try:
    from hiredis import pack_command as _hiredis_pack

    _Push = getattr(__import__("hiredis"), "PushNotification", None)  # hiredis >= 3.2
except ImportError:  # pragma: no cover - hiredis is in the redis extra
    _hiredis_pack = _Push = None

_HiredisParser: type[Any] | None
_NOT_ENOUGH_DATA: object
try:  # redis-py's own parser class and "reply incomplete" marker (private, so guarded)
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
    from redis._parsers.hiredis import _HiredisParser
except ImportError:  # pragma: no cover - another redis-py layout: the general path
    _HiredisParser, _NOT_ENOUGH_DATA = None, object()

__all__ = ["DirectCalls", "direct_calls"]

_MAX_IDLE = 16
"""Connections kept aside at most: more concurrent callers go back to the pool."""

_registry: weakref.WeakKeyDictionary[Any, DirectCalls] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def direct_calls(client: Any) -> DirectCalls | None:
    """The `DirectCalls` shared by every mailbox on `client`, or None if it cannot have one."""
    if type(client) is not redis.Redis or getattr(client, "connection", None) is not None:
        return None
    pool = getattr(client, "connection_pool", None)
    if type(pool) is not ConnectionPool or getattr(pool, "cache", None) is not None:
        return None
    with _registry_lock:
        calls = _registry.get(client)
        if calls is None:
            calls = _registry[client] = DirectCalls(pool)
        return calls


class DirectCalls:
    """Runs one command at a time on connections set aside from `pool` (thread-safe).

    Args:
        pool: The client's connection pool (connections are taken from it and, past
            `_MAX_IDLE` idle ones or on an error, given back to it).
    """

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        # list.append and list.pop are atomic under the GIL: no lock on the hot path.
        self._idle: list[Any] = []

    def call(self, *args: Any) -> Any:
        """Send one command and return its reply (a Redis error reply is raised).

        Raises:
            redis.ConnectionError, redis.TimeoutError: The connection failed (it is
                closed and returned to the pool; run the command through the client).
            redis.ResponseError: Redis answered with an error (the connection is fine).
        """
        try:
            conn = self._idle.pop()
        except IndexError:
            # redis-py 5+ takes no arguments (types-redis still describes redis 4).
            conn = self._pool.get_connection()  # type: ignore[call-arg]
        try:
            if _hiredis_pack is None:  # pragma: no cover - hiredis is in the redis extra
                conn.send_command(*args)
                reply = conn.read_response()
            elif (
                type(parser := getattr(conn, "_parser", None)) is _HiredisParser
                and getattr(parser, "_sock", None) is not None
                and getattr(parser, "_reader", None) is not None
            ):  # connected and parsing with hiredis: read it raw
                reply = _round_trip(parser, _hiredis_pack(args))
            else:
                conn.send_packed_command((_hiredis_pack(args),))
                reply = conn.read_response()
        except redis.ResponseError:
            self._keep(conn)  # the error reply was read whole: the connection is clean
            raise
        except BaseException:
            conn.disconnect()
            self._pool.release(conn)
            raise
        self._keep(conn)
        return reply

    def _keep(self, conn: Any) -> None:
        if len(self._idle) < _MAX_IDLE:
            self._idle.append(conn)
        else:
            self._pool.release(conn)


def _forget_inherited_connections() -> None:
    """In a forked child: the parent's sockets are not ours; take fresh ones from the pools."""
    for calls in list(_registry.values()):
        calls._idle = []


os.register_at_fork(after_in_child=_forget_inherited_connections)


def _round_trip(parser: Any, packed: bytes) -> Any:
    """Send `packed` on the socket of a connection's hiredis `parser`, read one reply.

    Raises:
        redis.ResponseError: The reply is an error (raised as the class redis-py maps
            it to, e.g. `NoScriptError`).
        redis.ConnectionError, redis.TimeoutError: The socket failed or timed out, or
            a RESP3 push came instead of the reply.
    """
    sock, reader, buffer = parser._sock, parser._reader, parser._buffer
    try:
        sock.sendall(packed)
        reply = reader.gets()
        while reply is _NOT_ENOUGH_DATA:
            received = sock.recv_into(buffer)
            if received == 0:
                raise redis.ConnectionError("Connection closed by server.")
            reader.feed(buffer, 0, received)
            reply = reader.gets()
    except TimeoutError as exc:  # socket.timeout is TimeoutError
        raise redis.TimeoutError(f"Timeout on the Redis socket: {exc}") from exc
    except OSError as exc:
        raise redis.ConnectionError(f"Error on the Redis socket: {exc}") from exc
    if isinstance(reply, redis.ResponseError):  # the reader builds error replies
        raise reply
    if isinstance(reply, redis.ConnectionError):  # a protocol error
        raise reply
    if _Push is not None and isinstance(reply, _Push):
        # A RESP3 push (a server notice) where a reply was due: this path does not
        # dispatch pushes, so the connection is dropped and the command runs again
        # through the client, which does.
        raise redis.ConnectionError("a RESP3 push arrived on a direct connection")
    return reply
