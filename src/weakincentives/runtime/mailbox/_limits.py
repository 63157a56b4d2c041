"""The argument rules every mailbox backend shares.

They live in one place so that every backend rejects the same values with the same
message (the contract suite checks it).
"""

from __future__ import annotations

import math

from weakincentives.errors import MailboxArgumentError

__all__ = [
    "MAX_MESSAGES",
    "MAX_TIMEOUT_SECONDS",
    "MAX_WAIT_SECONDS",
    "check_receive_arguments",
    "check_timeout",
]

MAX_MESSAGES = 10
"""The most messages one `receive` call may ask for (as in SQS)."""

MAX_TIMEOUT_SECONDS = 43_200.0
"""The longest visibility timeout, nack timeout or send delay: 12 hours (as in SQS)."""

MAX_WAIT_SECONDS = 20.0
"""The longest long poll one `receive` call may ask for (as in SQS)."""


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
