"""Test doubles for code that uses mailboxes: a recording mailbox and a faulty one.

Both wrap an `InMemoryMailbox` (composition, not inheritance) and satisfy the `Mailbox`
protocol, so they pass the same contract suite as the real backends.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import MessageDecodeError
from weakincentives.runtime.mailbox._in_memory import InMemoryMailbox
from weakincentives.runtime.mailbox._types import Mailbox, MailboxResolver, Message, rebind

__all__ = ["CollectingMailbox", "FakeMailbox", "MailboxOperation"]

T = TypeVar("T")
R = TypeVar("R")

MailboxOperation = Literal[
    "send",
    "receive",
    "acknowledge",
    "nack",
    "extend_visibility",
    "approximate_count",
    "purge",
]
"""The calls a `FakeMailbox` can be told to fail."""


class _Wrapper(Generic[T, R]):
    """Delegates the `Mailbox` protocol to an inner `InMemoryMailbox`."""

    def __init__(
        self,
        name: str,
        *,
        clock: Clock,
        reply_resolver: MailboxResolver[R] | None,
        max_size: int | None,
    ) -> None:
        self._inner: InMemoryMailbox[Any, R] = InMemoryMailbox(
            name, clock=clock, reply_resolver=reply_resolver, max_size=max_size
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    @property
    def name(self) -> str:
        """The mailbox's name."""
        return self._inner.name

    @property
    def closed(self) -> bool:
        """True once `close()` was called."""
        return self._inner.closed

    def send(
        self,
        body: T,
        *,
        reply_to: Mailbox[R, Any] | str | None = None,
        delay: float = 0.0,
    ) -> str:
        """Enqueue `body` (see `InMemoryMailbox.send`)."""
        return self._inner.send(body, reply_to=reply_to, delay=delay)

    def receive(
        self,
        *,
        max_messages: int = 1,
        visibility_timeout: float = 30.0,
        wait_time_seconds: float = 0.0,
    ) -> Sequence[Message[T, R]]:
        """Receive messages (see `InMemoryMailbox.receive`)."""
        return self._inner.receive(
            max_messages=max_messages,
            visibility_timeout=visibility_timeout,
            wait_time_seconds=wait_time_seconds,
        )

    def approximate_count(self) -> int:
        """Return the number of messages held."""
        return self._inner.approximate_count()

    def purge(self) -> int:
        """Delete every message and return how many there were."""
        return self._inner.purge()

    def close(self) -> None:
        """Close the mailbox."""
        self._inner.close()


class CollectingMailbox(_Wrapper[T, R]):
    """An in-memory mailbox that records every body sent to it in `sent`.

    Use it as a reply-to or results mailbox to assert on what a worker sent; it can
    still be received from like any mailbox.

    Args:
        name: The mailbox's name.
        clock: Source of time for delays and visibility timeouts.
        reply_resolver: Resolves reply-to names.
        max_size: The most messages held at once (None: unbounded).
    """

    def __init__(
        self,
        name: str = "collecting",
        *,
        clock: Clock = SYSTEM_CLOCK,
        reply_resolver: MailboxResolver[R] | None = None,
        max_size: int | None = None,
    ) -> None:
        super().__init__(name, clock=clock, reply_resolver=reply_resolver, max_size=max_size)
        self._lock = threading.Lock()
        self._sent: list[T] = []

    @property
    def sent(self) -> list[T]:
        """Every body sent so far, in send order (a copy)."""
        with self._lock:
            return list(self._sent)

    def send(
        self,
        body: T,
        *,
        reply_to: Mailbox[R, Any] | str | None = None,
        delay: float = 0.0,
    ) -> str:
        """Enqueue `body` and record it in `sent` (only when the send succeeds)."""
        message_id = super().send(body, reply_to=reply_to, delay=delay)
        with self._lock:
            self._sent.append(body)
        return message_id


@dataclass(frozen=True, slots=True)
class _Poison:
    """The stored form of a message sent with `FakeMailbox.send_undecodable`."""

    raw_body: str | bytes
    reason: str


class FakeMailbox(_Wrapper[T, R]):
    """An in-memory mailbox with failure injection.

    `fail_next(operation, error)` makes the next call of that operation raise `error`
    before it reaches the mailbox (so a failed send enqueues nothing and a failed
    acknowledge leaves the message in flight). `send_undecodable` enqueues a message
    that is delivered the way a serializing backend delivers a payload it cannot
    decode. `calls` counts every call, failed or not.

    Args:
        name: The mailbox's name.
        clock: Source of time for delays and visibility timeouts.
        reply_resolver: Resolves reply-to names.
        max_size: The most messages held at once (None: unbounded).

    Examples:
        ```python
        mailbox = FakeMailbox(clock=FakeClock())
        mailbox.fail_next("acknowledge", MailboxConnectionError("redis went away"))
        ```
    """

    def __init__(
        self,
        name: str = "fake",
        *,
        clock: Clock = SYSTEM_CLOCK,
        reply_resolver: MailboxResolver[R] | None = None,
        max_size: int | None = None,
    ) -> None:
        super().__init__(name, clock=clock, reply_resolver=reply_resolver, max_size=max_size)
        self._lock = threading.Lock()
        self._failures: dict[str, deque[BaseException]] = {}
        self._calls: Counter[str] = Counter()

    @property
    def calls(self) -> dict[str, int]:
        """How many times each operation was called (a copy)."""
        with self._lock:
            return dict(self._calls)

    def fail_next(
        self, operation: MailboxOperation, error: BaseException, *, times: int = 1
    ) -> None:
        """Make the next `times` calls of `operation` raise `error`."""
        with self._lock:
            self._failures.setdefault(operation, deque()).extend([error] * times)

    def fail_next_send(self, error: BaseException, *, times: int = 1) -> None:
        """Make the next `times` sends raise `error`."""
        self.fail_next("send", error, times=times)

    def fail_next_receive(self, error: BaseException, *, times: int = 1) -> None:
        """Make the next `times` receives raise `error`."""
        self.fail_next("receive", error, times=times)

    def fail_next_ack(self, error: BaseException, *, times: int = 1) -> None:
        """Make the next `times` acknowledges raise `error`."""
        self.fail_next("acknowledge", error, times=times)

    def _call(self, operation: MailboxOperation) -> None:
        with self._lock:
            self._calls[operation] += 1
            pending = self._failures.get(operation)
            error = pending.popleft() if pending else None
        if error is not None:
            raise error

    def send_undecodable(
        self,
        raw_body: str | bytes,
        *,
        reason: str = "payload is not valid JSON",
        reply_to: Mailbox[R, Any] | str | None = None,
    ) -> str:
        """Enqueue a message whose delivery's `body` raises `MessageDecodeError`."""
        return self._inner.send(_Poison(raw_body, reason), reply_to=reply_to)

    def send(
        self,
        body: T,
        *,
        reply_to: Mailbox[R, Any] | str | None = None,
        delay: float = 0.0,
    ) -> str:
        """Enqueue `body`, unless a send failure was injected."""
        self._call("send")
        return super().send(body, reply_to=reply_to, delay=delay)

    def receive(
        self,
        *,
        max_messages: int = 1,
        visibility_timeout: float = 30.0,
        wait_time_seconds: float = 0.0,
    ) -> Sequence[Message[T, R]]:
        """Receive messages, unless a receive failure was injected."""
        self._call("receive")
        delivered = super().receive(
            max_messages=max_messages,
            visibility_timeout=visibility_timeout,
            wait_time_seconds=wait_time_seconds,
        )
        return [self._wrap(message) for message in delivered]

    def approximate_count(self) -> int:
        """Return the number of messages held, unless a failure was injected."""
        self._call("approximate_count")
        return super().approximate_count()

    def purge(self) -> int:
        """Delete every message, unless a failure was injected."""
        self._call("purge")
        return super().purge()

    def _wrap(self, message: Message[T, R]) -> Message[T, R]:
        settler = _FaultySettler(self, message)
        poison = message.body
        if not isinstance(poison, _Poison):
            return rebind(message, settler)
        error = MessageDecodeError(
            f"message {message.id!r} in mailbox {self.name!r} cannot be decoded: {poison.reason}",
        )
        return rebind(message, settler, decode_error=error, raw_body=poison.raw_body)


class _FaultySettler:
    """Settles a wrapped delivery, raising injected failures first."""

    __slots__ = ("_delivery", "_mailbox")

    def __init__(self, mailbox: FakeMailbox[Any, Any], delivery: Message[Any, Any]) -> None:
        self._mailbox = mailbox
        self._delivery = delivery

    def acknowledge(self, receipt_handle: str) -> None:
        del receipt_handle  # the wrapped delivery holds the same handle
        self._mailbox._call("acknowledge")
        self._delivery.acknowledge()

    def nack(self, receipt_handle: str, visibility_timeout: float) -> None:
        del receipt_handle
        self._mailbox._call("nack")
        self._delivery.nack(visibility_timeout)

    def extend_visibility(self, receipt_handle: str, timeout: float) -> None:
        del receipt_handle
        self._mailbox._call("extend_visibility")
        self._delivery.extend_visibility(timeout)
