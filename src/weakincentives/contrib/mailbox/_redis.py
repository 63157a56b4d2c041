"""`RedisMailbox`: a mailbox shared by many processes through a Redis server."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Generic, TypeVar

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.contrib.mailbox import _scripts
from weakincentives.contrib.mailbox._codec import JsonCodec, MailboxCodec
from weakincentives.contrib.mailbox._delivery import build_message
from weakincentives.contrib.mailbox._direct import direct_calls
from weakincentives.contrib.mailbox._options import check_options
from weakincentives.errors import (
    MailboxArgumentError,
    MailboxClosedError,
    MailboxConnectionError,
    MailboxError,
    MailboxFullError,
    ReceiptHandleExpiredError,
)
from weakincentives.runtime.mailbox import (
    Mailbox,
    MailboxResolver,
    Message,
    check_receive_arguments,
    check_timeout,
)

try:
    import redis
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "RedisMailbox needs the redis package; install it with "
        "`pip install 'weakincentives[redis]'`",
        name="redis",
    ) from exc

__all__ = ["DEFAULT_QUEUE_TTL", "SEND_CHUNK", "RedisMailbox", "RedisMailboxFactory"]

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_QUEUE_TTL = timedelta(days=7)
"""How long a queue nobody writes to survives; every write starts the period again."""

SEND_CHUNK = 500
"""Bodies per script call of `send_many` (a long script blocks the server meanwhile)."""

_MAX_BLOCK_SECONDS = 1.0
"""Longest single server-side wait of a long poll; well under redis-py's default
5 s `socket_timeout`, which would otherwise end a blocking pop with a TimeoutError."""
_MIN_BLOCK_SECONDS = 0.005
"""Shortest wait: Redis reads a blocking timeout that rounds to 0 ms as "forever"."""
_CLOSE_WAKE_TTL_MS = 60_000
"""How long tokens that wake this instance's long polls on `close()` are kept."""


class RedisMailbox(Generic[T, R]):
    """A mailbox stored in Redis: durable, shared by every process that names it.

    Semantics are those of `InMemoryMailbox` (the contract suite runs against both):
    FIFO, delayed sends, visibility timeouts, a fresh receipt handle per delivery, stale
    handles rejected with `ReceiptHandleExpiredError`, at-least-once delivery. Every
    state change is one Lua script, so it is atomic, and every deadline is measured on
    the Redis server's clock, so consumers on machines with skewed clocks agree.

    Keys are `<namespace>:{<name>}:<part>`: the hash tag keeps one queue in one Redis
    Cluster slot. Each write refreshes a TTL (`queue_ttl`) on all of them, so a queue
    nobody uses any more disappears. Bodies go through `codec` (JSON by default); a
    payload that cannot be decoded is still delivered, as a message whose `body`
    raises `MessageDecodeError` and whose `raw_body` holds the bytes, so a worker can
    dead-letter it instead of looping on it.

    `reply_to` is stored by name and resolved on receipt through `reply_resolver`;
    without one, names resolve to `RedisMailbox`es of the same client and namespace.

    Args:
        name: The queue's name (and the reply-to address of this mailbox).
        client: A redis-py client (`redis.Redis` or `redis.cluster.RedisCluster`)
            created with `decode_responses=False`, the default. Its `socket_timeout`
            must exceed one second: long polls block on the server up to that long.
        reply_resolver: Resolves reply-to names of received messages.
        codec: Encodes and decodes bodies (default: `JsonCodec(body_type)`).
        namespace: Prefix of every key, to keep applications apart.
        body_type: Type bodies are decoded into, for the default codec (for example
            `EvalRequest[str, str]`); None decodes plain JSON values.
        queue_ttl: How long an idle queue lives (at least one second; make it longer
            than any delay or visibility timeout you use).
        max_size: The most messages held at once (None: unbounded).
        clock: Times long polls on this side (deadlines use the server's clock).

    Raises:
        MailboxArgumentError: An argument is invalid (empty name, braces in the
            namespace, both `codec` and `body_type`, `decode_responses=True`, ...).

    Examples:
        ```python
        requests: RedisMailbox[EvalRequest[str, str], EvalResult] = RedisMailbox(
            "eval-requests", client=redis.Redis(), body_type=EvalRequest[str, str]
        )
        ```
    """

    def __init__(
        self,
        name: str,
        *,
        client: Any,
        reply_resolver: MailboxResolver[R] | None = None,
        codec: MailboxCodec[T] | None = None,
        namespace: str = "wink",
        body_type: Any = None,
        queue_ttl: timedelta = DEFAULT_QUEUE_TTL,
        max_size: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        check_options(name, client, namespace, codec, body_type, queue_ttl, max_size)
        self._name = name
        self._client = client
        self._namespace = namespace
        self._explicit_resolver = reply_resolver
        self._default_resolver: RedisMailboxFactory[R] | None = None
        self._codec: MailboxCodec[T] = codec or JsonCodec(body_type)
        self._ttl_ms = int(queue_ttl.total_seconds() * 1000)
        self._queue_ttl = queue_ttl
        self._max_size = max_size or 0
        self._clock = clock
        prefix = f"{namespace}:{{{name}}}"
        self._keys = [f"{prefix}:{suffix}" for suffix in _scripts.KEY_SUFFIXES]
        # This instance's own wake-up list: `close()` pushes to it to end long polls.
        self._wake_key = f"{prefix}:wake:{uuid.uuid4().hex}"
        self._scripts = {
            script: client.register_script(source)
            for script, source in (
                ("send", _scripts.SEND),
                ("send_many", _scripts.SEND_MANY),
                ("send_and_acknowledge", _scripts.SEND_AND_ACKNOWLEDGE),
                ("acknowledge_many", _scripts.ACKNOWLEDGE_MANY),
                ("receive", _scripts.RECEIVE),
                ("acknowledge", _scripts.ACKNOWLEDGE),
                ("nack", _scripts.NACK),
                ("extend", _scripts.EXTEND),
                ("purge", _scripts.PURGE),
                ("count", _scripts.COUNT),
            )
        }
        self._direct = direct_calls(client)
        self._lock = threading.Lock()
        self._closed = False
        self._pollers = 0
        # One settler for every delivery: `acknowledge_all` batches by settler.
        self._settler = _Settler(self)

    def __repr__(self) -> str:
        return f"RedisMailbox(name={self._name!r}, namespace={self._namespace!r})"

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._name

    @property
    def namespace(self) -> str:
        """The prefix of the queue's keys."""
        return self._namespace

    @property
    def keys(self) -> tuple[str, ...]:
        """The Redis keys of this queue (some exist only once used)."""
        return tuple(self._keys)

    @property
    def closed(self) -> bool:
        """True once `close()` was called."""
        return self._closed

    def send(
        self,
        body: T,
        *,
        reply_to: Mailbox[R, Any] | str | None = None,
        delay: float = 0.0,
    ) -> str:
        """Enqueue `body`, visible after `delay` seconds; return its message id.

        A `reply_to` mailbox is stored by its name.

        Raises:
            MailboxArgumentError: `delay` is out of range or `reply_to` is an empty name.
            MailboxClosedError: The mailbox was closed.
            MailboxFullError: The queue holds `max_size` messages.
            MailboxConnectionError: Redis cannot be reached.
            SerdeError: The default codec cannot serialize `body`.
        """
        check_timeout("delay", delay)
        reply_name = reply_to if reply_to is None or isinstance(reply_to, str) else reply_to.name
        if reply_name == "":
            raise MailboxArgumentError("reply_to must be a mailbox, a non-empty name, or None")
        self._check_open()
        payload = self._codec.encode(body)
        message_id = _new_id()
        args = [message_id, payload, reply_name or "", delay * 1000, self._max_size]
        if not self._run("send", args):
            raise MailboxFullError(
                f"mailbox {self._name!r} holds its max_size of {self._max_size} "
                "messages; receive and acknowledge some before sending more",
            )
        return message_id

    def send_many(
        self,
        bodies: Iterable[T],
        *,
        reply_to: Mailbox[R, Any] | str | None = None,
        delay: float = 0.0,
    ) -> list[str]:
        """Enqueue every body of `bodies` in order (one network round trip); return ids.

        Same as calling `send` for each body, but one script call per `SEND_CHUNK`
        bodies, all pipelined: much faster for large batches (submitting a dataset). A
        mailbox with `max_size` sends one by one, so a full queue stops the batch at the
        first body it refuses (`MailboxFullError`, the bodies before it were sent). Each
        chunk is atomic, the batch is not: if Redis goes away mid-batch, some chunks may
        have been enqueued; sending them again makes duplicates, which idempotent
        consumers (`EvalLoop` results keyed by request id) absorb.

        Raises:
            MailboxArgumentError: `delay` is out of range or `reply_to` is an empty name.
            MailboxClosedError: The mailbox was closed.
            MailboxFullError: A bounded queue refused a body.
            MailboxConnectionError: Redis cannot be reached.
            SerdeError: The default codec cannot serialize a body (nothing is sent).
        """
        check_timeout("delay", delay)
        if self._max_size:
            return [self.send(body, reply_to=reply_to, delay=delay) for body in bodies]
        reply_name = reply_to if reply_to is None or isinstance(reply_to, str) else reply_to.name
        if reply_name == "":
            raise MailboxArgumentError("reply_to must be a mailbox, a non-empty name, or None")
        self._check_open()
        ids: list[str] = []
        chunks: list[list[Any]] = []
        encode = self._codec.encode
        for body in bodies:
            if len(ids) % SEND_CHUNK == 0:
                chunks.append([self._ttl_ms, reply_name or "", delay * 1000])
            ids.append(_new_id())
            chunks[-1] += (ids[-1], encode(body))
        with self._translate("sending a batch"):
            if len(chunks) == 1:
                self._scripts["send_many"](keys=self._keys, args=chunks[0])
            elif chunks:
                pipe = self._client.pipeline(transaction=False)
                for args in chunks:
                    self._scripts["send_many"](keys=self._keys, args=args, client=pipe)
                pipe.execute()
        return ids

    def send_and_acknowledge(self, body: T, settler: Any, receipt_handle: str) -> tuple[str, bool]:
        """Send `body` here and acknowledge a delivery, in one atomic script call.

        The delivery (its `settler` and `receipt_handle`, a `Message`'s) must come from a
        `RedisMailbox` on the same client, and the client must not be a Redis Cluster
        one (two queues live in two slots there); otherwise `body` is only sent. Use
        `weakincentives.runtime.mailbox.send_and_acknowledge(target, body, message)`.

        Returns:
            The sent message's id, and whether the delivery was acknowledged (False:
            the handle was stale, or the two could not be combined).

        Raises:
            MailboxClosedError: This mailbox or the delivery's was closed.
            MailboxFullError: The queue holds `max_size` messages (nothing is
                acknowledged).
            MailboxConnectionError: Redis cannot be reached.
        """
        source = settler._mailbox if isinstance(settler, _Settler) else None
        if source is None or source._client is not self._client or self._direct is None:
            return self.send(body), False
        self._check_open()
        source._check_open()
        message_id = _new_id()
        args = [message_id, self._codec.encode(body), "", self._max_size, receipt_handle]
        try:
            sent, acknowledged = self._run("send_and_acknowledge", args, extra_keys=source._keys)
        except MailboxError as exc:
            if "CROSSSLOT" not in str(exc):
                raise
            return self.send(body), False  # a cluster node: the script did not run
        if not sent:
            raise MailboxFullError(
                f"mailbox {self._name!r} holds its max_size of {self._max_size} "
                "messages; receive and acknowledge some before sending more",
            )
        return message_id, bool(acknowledged)

    def receive(
        self,
        *,
        max_messages: int = 1,
        visibility_timeout: float = 30.0,
        wait_time_seconds: float = 0.0,
    ) -> Sequence[Message[T, R]]:
        """Return up to `max_messages` visible messages, hidden for `visibility_timeout`.

        With `wait_time_seconds > 0`, blocks on the server (not a client-side sleep
        loop) until a message may be available and returns as soon as there is one.
        A poll in progress when the mailbox closes returns nothing.

        Raises:
            MailboxArgumentError: An argument is out of range.
            MailboxClosedError: The mailbox was closed before the call.
            MailboxConnectionError: Redis cannot be reached.
        """
        check_receive_arguments(max_messages, visibility_timeout, wait_time_seconds)
        self._check_open()
        args = [max_messages, visibility_timeout * 1000, os.urandom(16).hex()]
        if wait_time_seconds == 0:  # one script call, nothing to wake on close
            rows = self._run("receive", args)[1]
            return [self._message(row) for row in rows]
        with self._polling():
            started = self._clock.monotonic()
            # Seconds spent in blocks that timed out: ends the poll even under a clock
            # that does not move (a FakeClock).
            blocked = 0.0
            while not self._closed:
                wait_ms, rows = self._run("receive", args)
                if rows:
                    return [self._message(row) for row in rows]
                elapsed = self._clock.monotonic() - started
                remaining = wait_time_seconds - max(elapsed, blocked)
                if remaining <= 0:
                    return []
                block = min(remaining, _MAX_BLOCK_SECONDS)
                if wait_ms >= 0:
                    block = min(block, wait_ms / 1000)
                block = max(block, _MIN_BLOCK_SECONDS)
                if self._block(block) is None:
                    blocked += block
            return []

    def approximate_count(self) -> int:
        """Return the number of messages held, visible or not.

        Raises:
            MailboxClosedError: The mailbox was closed.
            MailboxConnectionError: Redis cannot be reached.
        """
        self._check_open()
        with self._translate("counting messages"):
            return int(self._run("count", []))

    def purge(self) -> int:
        """Delete every message, pending or in flight; return how many were deleted.

        Receipt handles of purged deliveries become stale.

        Raises:
            MailboxClosedError: The mailbox was closed.
            MailboxConnectionError: Redis cannot be reached.
        """
        self._check_open()
        return int(self._run("purge", []))

    def close(self) -> None:
        """Close this mailbox object and end its long polls; the queue stays in Redis.

        The client is not closed (it belongs to the caller). Idempotent.
        """
        with self._lock:
            self._closed = True
            pollers = self._pollers
        if pollers:
            try:
                pipe = self._client.pipeline(transaction=False)
                pipe.rpush(self._wake_key, *["closed"] * pollers)
                pipe.pexpire(self._wake_key, _CLOSE_WAKE_TTL_MS)
                pipe.execute()
            except redis.RedisError:
                pass  # a poll blocked on a dead connection fails by itself

    # -- settling (called by messages through `_Settler`) ------------------------------

    def _acknowledge_many(self, handles: Sequence[str]) -> list[bool]:
        self._check_open()
        if not handles:
            return []
        return [bool(ok) for ok in self._run("acknowledge_many", list(handles))]

    def _settle(self, script: str, handle: str, *args: float) -> None:
        self._check_open()
        if not self._run(script, [handle, *args]):
            raise ReceiptHandleExpiredError(
                f"receipt handle {handle!r} of mailbox {self._name!r} is stale: the "
                "message was acknowledged, nacked, purged, or its visibility timeout "
                "passed; receive it again to settle it",
            )

    # -- internals ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise MailboxClosedError(
                f"mailbox {self._name!r} is closed; create a new one to keep going",
            )

    @contextmanager
    def _translate(self, action: str) -> Iterator[None]:
        """Turn redis-py errors into mailbox errors."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise MailboxConnectionError(
                f"mailbox {self._name!r} could not reach Redis while {action}: {exc}; "
                "check that the server is running and reachable, then retry",
            ) from exc
        except redis.RedisError as exc:
            raise MailboxError(
                f"Redis failed while {action} on mailbox {self._name!r}: {exc}",
            ) from exc

    def _run(self, script: str, args: list[Any], extra_keys: Sequence[str] = ()) -> Any:
        # EVALSHA on a connection set aside (`_direct`), else straight through the
        # client: redis-py's `Script.__call__` costs about a fifth of a round trip in
        # client CPU on top. Inline error handling, not `_translate`: this is the hot
        # path of every call.
        sha = self._scripts[script].sha
        keys = (*self._keys, *extra_keys) if extra_keys else self._keys
        direct = self._direct
        if direct is not None:
            command = ("EVALSHA", sha, len(keys), *keys, self._ttl_ms, *args)
            try:
                try:
                    return direct.call(*command)
                except redis.exceptions.NoScriptError:  # a new, restarted or flushed server
                    self._client.script_load(self._scripts[script].script)
                    return direct.call(*command)
            except (redis.ConnectionError, redis.TimeoutError):
                pass  # again through the client: it reconnects and retries
            except redis.RedisError:
                with self._translate(f"running {script}"):
                    raise
        try:
            try:
                return self._client.evalsha(sha, len(keys), *keys, self._ttl_ms, *args)
            except redis.exceptions.NoScriptError:  # a restarted or flushed server
                self._client.script_load(self._scripts[script].script)
                return self._client.evalsha(sha, len(keys), *keys, self._ttl_ms, *args)
        except redis.RedisError:
            with self._translate(f"running {script}"):
                raise

    @contextmanager
    def _polling(self) -> Iterator[None]:
        with self._lock:
            self._pollers += 1
        try:
            yield
        finally:
            with self._lock:
                self._pollers -= 1

    def _block(self, seconds: float) -> Any:
        """Wait on the server for a wake-up token; None when the wait timed out."""
        with self._translate("waiting for messages"):
            return self._client.blpop([self._keys[3], self._wake_key], timeout=seconds)

    def _message(self, row: list[Any]) -> Message[T, R]:
        """Build one delivery from a row of the receive script."""
        return build_message(
            row, mailbox=self._name, codec=self._codec, settler=self._settler,
            resolver=self._reply_resolver(),
        )  # fmt: skip

    def _reply_resolver(self) -> MailboxResolver[R]:
        if self._explicit_resolver is not None:
            return self._explicit_resolver
        if self._default_resolver is None:
            self._default_resolver = RedisMailboxFactory(
                client=self._client, namespace=self._namespace, queue_ttl=self._queue_ttl
            )
        return self._default_resolver


def _new_id() -> str:
    """A random (version 4) UUID as text, like `str(uuid.uuid4())` at a third of its cost."""
    digits = os.urandom(16).hex()
    variant = "89ab"[int(digits[16], 16) & 3]
    return f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{variant}{digits[17:20]}-{digits[20:]}"


class _Settler:
    """Settles deliveries of one `RedisMailbox` (a `ReceiptSettler`)."""

    __slots__ = ("_mailbox",)

    def __init__(self, mailbox: RedisMailbox[Any, Any]) -> None:
        self._mailbox = mailbox

    def acknowledge(self, receipt_handle: str) -> None:
        self._mailbox._settle("acknowledge", receipt_handle)

    def nack(self, receipt_handle: str, visibility_timeout: float) -> None:
        self._mailbox._settle("nack", receipt_handle, visibility_timeout * 1000)

    def extend_visibility(self, receipt_handle: str, timeout: float) -> None:
        self._mailbox._settle("extend", receipt_handle, timeout * 1000)

    def acknowledge_many(self, receipt_handles: Sequence[str]) -> list[bool]:
        return self._mailbox._acknowledge_many(receipt_handles)


class RedisMailboxFactory(Generic[T]):
    """Creates `RedisMailbox`es on one client and namespace (a `MailboxFactory`).

    The factory is also a `MailboxResolver`, and the mailboxes it creates resolve
    reply-to names through it; wrap it in a `CompositeResolver` to mix in registered
    mailboxes. Mailboxes are cached by name, so `create` is cheap.

    Args:
        client: The redis-py client every mailbox uses.
        namespace: Prefix of every key.
        body_type: Type bodies are decoded into (None: plain JSON values).
        queue_ttl: How long an idle queue lives.
        max_size: `max_size` of every mailbox created.

    Examples:
        ```python
        factory = RedisMailboxFactory(client=redis_client)
        resolver = CompositeResolver(registry={}, factory=factory)
        ```
    """

    def __init__(
        self,
        *,
        client: Any,
        namespace: str = "wink",
        body_type: Any = None,
        queue_ttl: timedelta = DEFAULT_QUEUE_TTL,
        max_size: int | None = None,
    ) -> None:
        check_options("factory", client, namespace, None, body_type, queue_ttl, max_size)
        self._client = client
        self._namespace = namespace
        self._body_type = body_type
        self._queue_ttl = queue_ttl
        self._max_size = max_size
        self._lock = threading.Lock()
        self._mailboxes: dict[str, RedisMailbox[T, Any]] = {}

    def create(self, name: str) -> RedisMailbox[T, Any]:
        """Return the mailbox called `name` (a new object on first use)."""
        with self._lock:
            mailbox = self._mailboxes.get(name)
            if mailbox is None or mailbox.closed:
                mailbox = RedisMailbox(
                    name,
                    client=self._client,
                    reply_resolver=self,
                    namespace=self._namespace,
                    body_type=self._body_type,
                    queue_ttl=self._queue_ttl,
                    max_size=self._max_size,
                )
                self._mailboxes[name] = mailbox
            return mailbox

    def resolve(self, name: str) -> RedisMailbox[T, Any]:
        """Same as `create`: every name resolves to the queue of that name."""
        return self.create(name)
