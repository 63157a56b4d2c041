"""The mailbox protocols and the argument rules every backend shares.

Backends implement these protocols structurally; they do not inherit from them. The
argument checks live here so that every backend rejects the same values with the same
message (the contract suite checks it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from weakincentives.errors import MailboxArgumentError

if TYPE_CHECKING:
    from weakincentives.runtime.mailbox._message import Message

__all__ = [
    "MAX_MESSAGES",
    "MAX_TIMEOUT_SECONDS",
    "MAX_WAIT_SECONDS",
    "Mailbox",
    "MailboxFactory",
    "MailboxResolver",
    "ReceiptSettler",
    "SupportsSendMany",
    "check_receive_arguments",
    "check_timeout",
]

T = TypeVar("T")
R = TypeVar("R")

MAX_MESSAGES = 10
"""The most messages one `receive` call may ask for (as in SQS)."""

MAX_TIMEOUT_SECONDS = 43_200.0
"""The longest visibility timeout, nack timeout or send delay: 12 hours (as in SQS)."""

MAX_WAIT_SECONDS = 20.0
"""The longest long poll one `receive` call may ask for (as in SQS)."""


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

    Type parameters:
        T: The body type of messages in this mailbox.
        R: The body type of replies to them (`None` when nobody replies).
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


def check_timeout(name: str, value: float, *, maximum: float = MAX_TIMEOUT_SECONDS) -> None:
    """Reject a timeout that is not a finite number of seconds in `[0, maximum]`.

    Args:
        name: The argument's name, for the message.
        value: The value to check.
        maximum: The largest allowed value.

    Raises:
        MailboxArgumentError: The value is negative, too large, or not finite.
    """
    if not math.isfinite(value) or not 0.0 <= value <= maximum:
        raise MailboxArgumentError(
            f"{name} must be a number of seconds between 0 and {maximum:g}, got {value!r}",
        )


def check_receive_arguments(
    max_messages: int,
    visibility_timeout: float,
    wait_time_seconds: float,
) -> None:
    """Reject out-of-range `receive` arguments (every backend calls this first).

    Raises:
        MailboxArgumentError: An argument is out of range.
    """
    if (  # the usual case in one test (NaN and infinities fail it, and are reported below)
        type(max_messages) is int
        and 1 <= max_messages <= MAX_MESSAGES
        and 0.0 <= visibility_timeout <= MAX_TIMEOUT_SECONDS
        and 0.0 <= wait_time_seconds <= MAX_WAIT_SECONDS
    ):
        return
    if isinstance(max_messages, bool) or not 1 <= max_messages <= MAX_MESSAGES:
        raise MailboxArgumentError(
            f"max_messages must be an integer between 1 and {MAX_MESSAGES}, got {max_messages!r}",
        )
    check_timeout("visibility_timeout", visibility_timeout)
    check_timeout("wait_time_seconds", wait_time_seconds, maximum=MAX_WAIT_SECONDS)
