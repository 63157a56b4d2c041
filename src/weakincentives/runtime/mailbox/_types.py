"""The mailbox protocols and `Message`, one delivery with the calls that settle it.

Backends implement these protocols structurally; they do not inherit from them.
`Mailbox` hands out `Message`s and a `Message` replies to a `Mailbox`, so the two live in
one module. The argument checks every backend shares are in `_limits.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast, runtime_checkable

from weakincentives.errors import (
    MailboxResolutionError,
    MessageDecodeError,
    NoReplyToError,
    ReceiptHandleExpiredError,
)
from weakincentives.runtime.mailbox._limits import check_timeout

__all__ = [
    "Mailbox",
    "MailboxFactory",
    "MailboxResolver",
    "Message",
    "ReceiptSettler",
    "SupportsAcknowledgeMany",
    "SupportsSendAndAcknowledge",
    "SupportsSendMany",
    "acknowledge_all",
    "rebind",
    "send_and_acknowledge",
]

T = TypeVar("T")
R = TypeVar("R")


@runtime_checkable
class Mailbox(Protocol[T, R]):
    """A point-to-point queue with visibility timeouts and at-least-once delivery.

    A received message is invisible to other consumers until it is acknowledged, nacked,
    or its visibility timeout passes; then it is delivered again with `delivery_count`
    one higher and a new receipt handle. Each delivery's handle settles that delivery
    only: once the message was acknowledged, nacked, or its visibility timeout passed,
    the old handle raises `ReceiptHandleExpiredError`.

    Messages become visible in order of the time they became visible, ties in send
    order: plain sends are FIFO.

    Its two type parameters are the body type of its messages (`T`) and the body type
    of replies to them (`R`, `None` when nobody replies).
    """

    @property
    def name(self) -> str:
        """The mailbox's name; reply-to addresses and resolvers use it."""
        ...

    @property
    def closed(self) -> bool:
        """True once `close()` was called."""
        ...

    def send(
        self,
        body: T,
        *,
        reply_to: Mailbox[R, Any] | str | None = None,
        delay: float = 0.0,
    ) -> str:
        """Enqueue `body` and return the new message's id.

        Args:
            body: The message body.
            reply_to: Where replies go: a mailbox, or a name the receiving side resolves
                through its reply resolver.
            delay: Seconds before the message becomes visible (0 to 12 hours).

        Raises:
            MailboxArgumentError: `delay` is out of range.
            MailboxClosedError: The mailbox was closed.
            MailboxFullError: The mailbox holds its maximum number of messages.
        """
        ...

    def receive(
        self,
        *,
        max_messages: int = 1,
        visibility_timeout: float = 30.0,
        wait_time_seconds: float = 0.0,
    ) -> Sequence[Message[T, R]]:
        """Return up to `max_messages` visible messages, hiding them for a while.

        Args:
            max_messages: 1 to `MAX_MESSAGES`.
            visibility_timeout: Seconds each message stays invisible (0 to 12 hours).
            wait_time_seconds: Long poll: wait up to this long (0 to 20 s) for at least
                one message; returns as soon as one is available.

        Returns:
            The messages, possibly none. A poll in progress when the mailbox is closed
            returns an empty sequence.

        Raises:
            MailboxArgumentError: An argument is out of range.
            MailboxClosedError: The mailbox was closed before the call.
        """
        ...

    def approximate_count(self) -> int:
        """Return the number of messages held, visible or not (exact for local backends)."""
        ...

    def purge(self) -> int:
        """Delete every message, in flight or not; return how many were deleted."""
        ...

    def close(self) -> None:
        """Close the mailbox; further calls raise `MailboxClosedError`. Idempotent."""
        ...


class ReceiptSettler(Protocol):
    """How a `Message` settles its delivery with the backend that delivered it.

    Backends pass one to every `Message` they build. Each method raises
    `ReceiptHandleExpiredError` when `receipt_handle` no longer owns its message.
    Arguments were already checked by the `Message`.
    """

    def acknowledge(self, receipt_handle: str) -> None:
        """Delete the message delivered under `receipt_handle`."""
        ...

    def nack(self, receipt_handle: str, visibility_timeout: float) -> None:
        """Return the message to the queue, visible again after `visibility_timeout`."""
        ...

    def extend_visibility(self, receipt_handle: str, timeout: float) -> None:
        """Keep the message invisible until `timeout` seconds from now."""
        ...


@runtime_checkable
class SupportsAcknowledgeMany(Protocol):
    """A `ReceiptSettler` that settles a batch of deliveries in one call (`RedisMailbox`'s).

    Not part of `ReceiptSettler`: `acknowledge_all` acknowledges through it when the
    messages' backend has it, else one message at a time.
    """

    def acknowledge_many(self, receipt_handles: Sequence[str]) -> list[bool]:
        """Delete the messages the handles own; one bool per handle, False when stale."""
        ...


@runtime_checkable
class SupportsSendAndAcknowledge(Protocol):
    """A mailbox that can send a body and acknowledge a delivery in one call (`RedisMailbox`).

    Not part of `Mailbox`: `send_and_acknowledge` (the function) uses it when the target
    has it, else sends and leaves the acknowledge to the caller.
    """

    def send_and_acknowledge(
        self, body: Any, settler: ReceiptSettler, receipt_handle: str
    ) -> tuple[str, bool]:
        """Send `body` here, then acknowledge the delivery `settler` and `receipt_handle` name.

        Returns the sent message's id and whether the delivery was acknowledged (False:
        its handle was stale, or the two cannot be done together; the caller then
        acknowledges it the usual way). Nothing is acknowledged when the send fails.
        """
        ...


@runtime_checkable
class SupportsSendMany(Protocol):
    """A mailbox that can enqueue a batch at once (`InMemoryMailbox`, `RedisMailbox`).

    Not part of `Mailbox`: a backend without it is sent to one body at a time
    (`submit_dataset` checks for it).
    """

    def send_many(
        self,
        bodies: Iterable[Any],
        *,
        reply_to: Mailbox[Any, Any] | str | None = None,
        delay: float = 0.0,
    ) -> list[str]:
        """Enqueue every body in order, as `send` would each; return their ids.

        Raises:
            MailboxArgumentError: `delay` is out of range or `reply_to` is an empty name.
            MailboxClosedError: The mailbox was closed.
            MailboxFullError: A bounded mailbox refused a body (those before it were sent).
        """
        ...


class MailboxResolver(Protocol[T]):
    """Turns a reply-to name into a mailbox whose bodies are of type `T`."""

    def resolve(self, name: str) -> Mailbox[T, Any]:
        """Return the mailbox called `name`.

        Raises:
            MailboxResolutionError: No mailbox of that name can be found or made.
        """
        ...


class MailboxFactory(Protocol[T]):
    """Creates (or returns the existing) mailbox called `name`."""

    def create(self, name: str) -> Mailbox[T, Any]:
        """Return the mailbox called `name`, creating it if needed."""
        ...


class Message(Generic[T, R]):
    """One delivery of a message: its body, its metadata and its receipt handle.

    Backends build messages; consumers read them and settle them with `acknowledge`,
    `nack` or `extend_visibility`, and answer them with `reply`. A message that could not
    be decoded (a backend that stores bytes found a payload it cannot read) is still
    delivered, built with `Message.undecodable`: its `body` raises `MessageDecodeError`,
    `raw_body` holds the payload, so a worker can dead-letter it instead of looping.

    Args:
        id: The message id, stable across deliveries.
        body: The decoded body.
        receipt_handle: This delivery's handle.
        delivery_count: 1 on the first delivery, one more on each redelivery.
        enqueued_at: When the message was sent (UTC).
        settler: The backend object that settles this delivery.
        reply_to: Where replies go: a mailbox, a name to resolve, or None.
        resolver: Resolves a `reply_to` name (None: names cannot be resolved).
        raw_body: The payload as stored by the backend, when it has one.
    """

    __slots__ = (
        "_body",
        "_decode_error",
        "_delivery_count",
        "_enqueued_at",
        "_id",
        "_raw_body",
        "_receipt_handle",
        "_reply_target",
        "_reply_to",
        "_resolver",
        "_settled",
        "_settler",
    )

    def __init__(
        self,
        *,
        id: str,
        body: T,
        receipt_handle: str,
        delivery_count: int,
        enqueued_at: datetime,
        settler: ReceiptSettler,
        reply_to: Mailbox[R, Any] | str | None = None,
        resolver: MailboxResolver[R] | None = None,
        raw_body: str | bytes | None = None,
    ) -> None:
        self._id = id
        self._body = body
        self._decode_error: MessageDecodeError | None = None
        self._receipt_handle = receipt_handle
        self._delivery_count = delivery_count
        self._enqueued_at = enqueued_at
        self._settler = settler
        self._reply_to = reply_to
        self._resolver = resolver
        self._raw_body = raw_body
        self._settled = False
        self._reply_target: Mailbox[R, Any] | None = None

    @classmethod
    def undecodable(
        cls,
        *,
        id: str,
        raw_body: str | bytes,
        error: MessageDecodeError,
        receipt_handle: str,
        delivery_count: int,
        enqueued_at: datetime,
        settler: ReceiptSettler,
        reply_to: Mailbox[R, Any] | str | None = None,
        resolver: MailboxResolver[R] | None = None,
    ) -> Message[T, R]:
        """Build a delivery whose payload could not be decoded into `T`.

        Reading `body` raises `error`; `raw_body` and `decode_error` describe it.
        """
        message: Message[T, R] = cls(
            id=id,
            body=cast("T", None),
            receipt_handle=receipt_handle,
            delivery_count=delivery_count,
            enqueued_at=enqueued_at,
            settler=settler,
            reply_to=reply_to,
            resolver=resolver,
            raw_body=raw_body,
        )
        message._decode_error = error
        return message

    def __repr__(self) -> str:
        return (
            f"Message(id={self._id!r}, delivery_count={self._delivery_count}, "
            f"reply_to={self.reply_to_name!r}, decodable={self._decode_error is None})"
        )

    @property
    def id(self) -> str:
        """The message id, the same on every delivery."""
        return self._id

    @property
    def body(self) -> T:
        """The decoded body.

        Raises:
            MessageDecodeError: The backend could not decode the payload (see `raw_body`).
        """
        if self._decode_error is not None:
            raise self._decode_error
        return self._body

    @property
    def raw_body(self) -> str | bytes | None:
        """The payload as the backend stored it, or None for backends that store objects."""
        return self._raw_body

    @property
    def decode_error(self) -> MessageDecodeError | None:
        """Why the payload could not be decoded, or None when `body` is usable."""
        return self._decode_error

    @property
    def receipt_handle(self) -> str:
        """This delivery's handle; stale once the message is settled or redelivered."""
        return self._receipt_handle

    @property
    def delivery_count(self) -> int:
        """How many times the message has been delivered, this delivery included."""
        return self._delivery_count

    @property
    def enqueued_at(self) -> datetime:
        """When the message was sent (UTC)."""
        return self._enqueued_at

    @property
    def settled(self) -> bool:
        """True once this delivery was acknowledged or nacked through this object."""
        return self._settled

    @property
    def reply_to_name(self) -> str | None:
        """The name of the reply-to mailbox, or None when the sender gave none."""
        if self._reply_to is None or isinstance(self._reply_to, str):
            return self._reply_to
        return self._reply_to.name

    @property
    def reply_to(self) -> Mailbox[R, Any] | None:
        """The reply-to mailbox (resolved from its name on first use), or None.

        Raises:
            MailboxResolutionError: The name cannot be resolved.
        """
        if self._reply_to is None or not isinstance(self._reply_to, str):
            return self._reply_to
        if self._reply_target is None:
            self._reply_target = self._resolve(self._reply_to)
        return self._reply_target

    def _resolve(self, name: str) -> Mailbox[R, Any]:
        if self._resolver is None:
            raise MailboxResolutionError(
                f"message {self._id!r} has reply_to={name!r} but its mailbox has no "
                "reply resolver; pass reply_resolver= (for example a CompositeResolver "
                "or an InMemoryMailboxFactory) when creating the mailbox",
            )
        return self._resolver.resolve(name)

    def acknowledge(self) -> None:
        """Delete the message: processing succeeded.

        Raises:
            ReceiptHandleExpiredError: This delivery no longer owns the message.
            MailboxClosedError: The mailbox was closed.
        """
        self._settler.acknowledge(self._receipt_handle)
        self._settled = True

    def nack(self, visibility_timeout: float = 0.0) -> None:
        """Return the message to the queue, visible again after `visibility_timeout` s.

        Raises:
            MailboxArgumentError: The timeout is out of range.
            ReceiptHandleExpiredError: This delivery no longer owns the message.
            MailboxClosedError: The mailbox was closed.
        """
        check_timeout("visibility_timeout", visibility_timeout)
        self._settler.nack(self._receipt_handle, visibility_timeout)
        self._settled = True

    def extend_visibility(self, timeout: float) -> None:
        """Keep the message invisible until `timeout` seconds from now.

        Raises:
            MailboxArgumentError: The timeout is out of range.
            ReceiptHandleExpiredError: This delivery no longer owns the message.
            MailboxClosedError: The mailbox was closed.
        """
        check_timeout("timeout", timeout)
        self._settler.extend_visibility(self._receipt_handle, timeout)

    def reply(self, body: R) -> str:
        """Send `body` to the reply-to mailbox and return the reply's message id.

        A message may be answered several times (progress updates, then a result).

        Raises:
            NoReplyToError: The message was sent without `reply_to`.
            MailboxResolutionError: The reply-to name cannot be resolved.
        """
        target = self.reply_to
        if target is None:
            raise NoReplyToError(
                f"message {self._id!r} was sent without reply_to, so it cannot be "
                "answered; pass reply_to= to send() when the sender expects replies",
            )
        return target.send(body)


def rebind(
    message: Message[T, R],
    settler: ReceiptSettler,
    *,
    decode_error: MessageDecodeError | None = None,
    raw_body: str | bytes | None = None,
) -> Message[T, R]:
    """Copy `message` with another settler (and optionally mark it undecodable).

    Used by the test doubles, which wrap an in-memory mailbox's deliveries.
    """
    copy: Message[T, R] = Message(
        id=message._id,
        body=message._body,
        receipt_handle=message._receipt_handle,
        delivery_count=message._delivery_count,
        enqueued_at=message._enqueued_at,
        settler=settler,
        reply_to=message._reply_to,
        resolver=message._resolver,
        raw_body=raw_body if raw_body is not None else message._raw_body,
    )
    copy._decode_error = decode_error or message._decode_error
    return copy


def send_and_acknowledge(target: Mailbox[R, Any], body: R, message: Message[Any, Any]) -> bool:
    """Send `body` to `target`, then acknowledge `message`: one round trip where possible.

    A worker answering a request does both; with `RedisMailbox`es on one Redis client
    (`SupportsSendAndAcknowledge`) it is one atomic script call instead of two round
    trips. Elsewhere `body` is sent and `message` is left for the caller to acknowledge.

    Returns:
        True when `message` was acknowledged here (it is then `settled`); False when the
        caller still has to acknowledge it (a stale handle then raises there, as usual).

    Raises:
        Whatever `target.send` raises; then `message` is not acknowledged.
    """
    combined = getattr(target, "send_and_acknowledge", None)
    if combined is None:
        target.send(body)
        return False
    _, acknowledged = combined(body, message._settler, message._receipt_handle)
    if acknowledged:
        message._settled = True
    return bool(acknowledged)


def acknowledge_all(messages: Iterable[Message[Any, Any]]) -> list[Message[Any, Any]]:
    """Acknowledge every message; return those whose delivery was stale.

    Messages whose backend settles in batches (`SupportsAcknowledgeMany`, e.g.
    `RedisMailbox`) are acknowledged in one call per backend (one round trip); the others
    one by one. A stale handle does not stop the rest: the message is returned instead
    of raising `ReceiptHandleExpiredError`.

    Raises:
        MailboxClosedError: A message's mailbox was closed.
        MailboxConnectionError: A backend cannot be reached.
    """
    batches: dict[int, list[Message[Any, Any]]] = {}
    stale: list[Message[Any, Any]] = []
    for message in messages:
        # getattr, not isinstance on the Protocol: that costs microseconds per message.
        if getattr(message._settler, "acknowledge_many", None) is not None:
            batches.setdefault(id(message._settler), []).append(message)
            continue
        try:
            message.acknowledge()
        except ReceiptHandleExpiredError:
            stale.append(message)
    for batch in batches.values():
        settler = cast("SupportsAcknowledgeMany", batch[0]._settler)
        done = settler.acknowledge_many([m._receipt_handle for m in batch])
        for message, ok in zip(batch, done, strict=True):
            if ok:
                message._settled = True
            else:
                stale.append(message)
    return stale
