"""Failure policies: retries with backoff, and dead-letter queues for what keeps failing.

A `DLQPolicy` names the dead-letter mailbox and decides which failures go there at
once, which never do, and after how many deliveries the rest do. What lands there is a
`DeadLetter`: the original body (or the raw payload when it could not be decoded), the
error, and enough metadata to inspect or replay it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from weakincentives.errors import ConfigurationError
from weakincentives.runtime.mailbox import MAX_TIMEOUT_SECONDS, Mailbox, Message

__all__ = [
    "DLQPolicy",
    "DeadLetter",
    "DeadLetterReason",
    "FailureAction",
    "RetryPolicy",
    "failure_action",
]

T = TypeVar("T")

DeadLetterReason = Literal["undecodable", "non_retryable", "exhausted"]
"""Why a message was dead-lettered: its payload could not be decoded; its error type is
in `DLQPolicy.dead_letter_on`; or it failed on every delivery it was allowed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter(Generic[T]):
    """A message that was given up on, with why."""

    message_id: str
    """The original message's id."""

    source: str
    """The name of the mailbox it came from."""

    body: T | None
    """The original body, or None when it could not be decoded (see `raw_body`)."""

    raw_body: str | None
    """The payload as the backend stored it, when the backend stores payloads (bytes
    that are not UTF-8 are kept with backslash escapes)."""

    delivery_count: int
    """Deliveries before it was dead-lettered, the last one included."""

    reason: DeadLetterReason
    """Why it was dead-lettered."""

    error_type: str
    """Qualified name of the last error's type, e.g. `builtins.ValueError`."""

    error_message: str
    """The last error's message."""

    enqueued_at: datetime
    """When the original message was sent (UTC)."""

    dead_lettered_at: datetime
    """When it was dead-lettered (UTC)."""

    reply_to: str | None = None
    """The original reply-to mailbox name, so a replay can answer the sender."""

    @classmethod
    def from_message(
        cls,
        message: Message[Any, Any],
        error: BaseException,
        *,
        reason: DeadLetterReason,
        source: str,
        now: datetime,
    ) -> DeadLetter[Any]:
        """Describe `message`, which failed with `error`, as a dead letter."""
        raw = message.raw_body
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="backslashreplace")
        return DeadLetter(
            message_id=message.id,
            source=source,
            body=None if message.decode_error is not None else message.body,
            raw_body=raw,
            delivery_count=message.delivery_count,
            reason=reason,
            error_type=f"{type(error).__module__}.{type(error).__qualname__}",
            error_message=str(error),
            enqueued_at=message.enqueued_at,
            dead_lettered_at=now,
            reply_to=message.reply_to_name,
        )


_DEFAULT_MAX_DELIVERIES = 5


@dataclass(frozen=True, slots=True, init=False)
class DLQPolicy(Generic[T]):
    """Where failed messages go, and when.

    When a handler raises on delivery `n`: an error in `never_dead_letter` is retried
    (with the worker's backoff) however often it happens; an error in `dead_letter_on`
    is dead-lettered at once; any other error is dead-lettered once `n` reaches
    `max_deliveries` (or the worker's `RetryPolicy.max_attempts`, if lower) and retried
    before that. Undecodable messages are always dead-lettered at once.

    `max_delivery_count=` is the reference implementation's name for `max_deliveries`
    (an alias: one field, readable under both names).

    Examples:
        ```python
        dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox(name="dead")
        policy = DLQPolicy(dead, max_deliveries=3, dead_letter_on=(ValueError,))
        ```
    """

    mailbox: Mailbox[DeadLetter[T], Any]
    """The dead-letter mailbox."""

    max_deliveries: int
    """Deliveries after which a failing message is dead-lettered (default 5)."""

    dead_letter_on: tuple[type[BaseException], ...]
    """Error types not worth retrying: dead-lettered on the first failure."""

    never_dead_letter: tuple[type[BaseException], ...]
    """Error types that are always retried (transient trouble such as rate limits)."""

    def __init__(
        self,
        mailbox: Mailbox[DeadLetter[T], Any],
        *,
        max_deliveries: int | None = None,
        dead_letter_on: tuple[type[BaseException], ...] = (),
        never_dead_letter: tuple[type[BaseException], ...] = (),
        max_delivery_count: int | None = None,
    ) -> None:
        """Build the policy; `max_delivery_count` is an alias of `max_deliveries`.

        Raises:
            ConfigurationError: the two names are given different values, or the limit
                is below 1.
        """
        if max_deliveries is None:
            max_deliveries = max_delivery_count
        elif max_delivery_count is not None and max_delivery_count != max_deliveries:
            raise ConfigurationError(
                f"DLQPolicy got max_deliveries={max_deliveries} and max_delivery_count="
                f"{max_delivery_count}: they are one setting, pass one of them",
            )
        if max_deliveries is None:
            max_deliveries = _DEFAULT_MAX_DELIVERIES
        if max_deliveries < 1:
            raise ConfigurationError(
                f"DLQPolicy.max_deliveries must be at least 1, got {max_deliveries}",
            )
        object.__setattr__(self, "mailbox", mailbox)
        object.__setattr__(self, "max_deliveries", max_deliveries)
        object.__setattr__(self, "dead_letter_on", dead_letter_on)
        object.__setattr__(self, "never_dead_letter", never_dead_letter)

    @property
    def max_delivery_count(self) -> int:
        """The reference implementation's name for `max_deliveries`."""
        return self.max_deliveries


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often a failing message is retried, and how long to wait before each retry.

    The wait after delivery `n` fails is `min(max_delay, base_delay * 2 ** (n - 1))`,
    shortened by up to `jitter` of itself at random so that retries spread out.
    """

    max_attempts: int = 3
    """Deliveries a failing message gets before it is given up on."""

    base_delay: float = 1.0
    """Seconds to wait after the first failure."""

    max_delay: float = 300.0
    """Longest wait between two attempts."""

    jitter: float = 0.1
    """Fraction (0 to 1) of each wait that is randomised away."""

    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)
    """Source of jitter (inject a seeded one for reproducible waits)."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if not 0 <= self.base_delay <= self.max_delay <= MAX_TIMEOUT_SECONDS:
            raise ConfigurationError(
                f"RetryPolicy needs 0 <= base_delay <= max_delay <= {MAX_TIMEOUT_SECONDS:g},"
                f" got base_delay={self.base_delay}, max_delay={self.max_delay}",
            )
        if not 0 <= self.jitter <= 1:
            raise ConfigurationError(f"jitter must be between 0 and 1, got {self.jitter}")

    def backoff(self, delivery_count: int) -> float:
        """Seconds to keep a message invisible after its delivery `delivery_count` failed."""
        exponent = min(max(delivery_count, 1) - 1, 64)
        capped = min(self.max_delay, self.base_delay * 2.0**exponent)
        return capped * (1.0 - self.jitter * self.rng.random())


FailureAction = Literal["retry", "exhausted", "non_retryable"]
"""What to do with a failed delivery: retry it after a backoff, or dead-letter it
because it failed on every delivery it was allowed, or because its error is not worth
retrying."""


def failure_action(
    error: BaseException,
    delivery_count: int,
    *,
    retry: RetryPolicy,
    dlq: DLQPolicy[Any] | None,
) -> FailureAction:
    """Decide what happens to a delivery whose handling raised `error`.

    `DLQPolicy.never_dead_letter` errors are always retried; `dead_letter_on` errors
    are not; other errors are retried until `delivery_count` reaches the lower of
    `retry.max_attempts` and `dlq.max_deliveries`.
    """
    if dlq is not None:
        if isinstance(error, dlq.never_dead_letter):
            return "retry"
        if isinstance(error, dlq.dead_letter_on):
            return "non_retryable"
        if delivery_count >= dlq.max_deliveries:
            return "exhausted"
    return "retry" if delivery_count < retry.max_attempts else "exhausted"
