"""`AnsweringWorker`: a mailbox worker that answers every request it is given.

The one rule `AgentLoopWorker` (production traffic) and `EvalLoop` (evaluation) share
for what a failure becomes:

- a failure of the work itself (the agent's logic or output, a timeout, a budget) is
  the answer: an error result, sent at once;
- an infrastructure failure that outlived the adapter's own retries (`transient_errors`:
  connection refused, provider 5xx, 429, provider timeouts) is raised again
  (`raise_if_transient`), so the worker retries it through the mailbox with backoff
  (`RetryPolicy`) and, once the retry or dead-letter policy gives up, dead-letters it
  (`DLQPolicy`; without one it is dropped, with an error log);
- every message given up on (that one, or a body that cannot be decoded, dead-lettered
  at once) is answered with an error result of kind `dead_letter` saying why
  (`on_dead_letter`), so no request goes unanswered.

A subclass says what its answers look like: `dead_letter_answer(message, letter)`.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, TypeVar

from weakincentives.errors import MailboxResolutionError, MessageDecodeError
from weakincentives.runtime.dlq import DeadLetter, DLQPolicy, RetryPolicy
from weakincentives.runtime.mailbox import Mailbox, Message, send_and_acknowledge
from weakincentives.runtime.worker import MailboxWorker

__all__ = [
    "AnsweringWorker",
    "dead_letter_error",
    "reply_target",
    "with_decode_errors_dead_lettered",
]

T = TypeVar("T")
R = TypeVar("R")

_log = logging.getLogger(__name__)


def with_decode_errors_dead_lettered(dlq: DLQPolicy[T] | None) -> DLQPolicy[T] | None:
    """Return `dlq` with `MessageDecodeError` among the errors dead-lettered at once.

    A body of the wrong type will not decode better on a second delivery.
    """
    if dlq is None or any(issubclass(MessageDecodeError, t) for t in dlq.dead_letter_on):
        return dlq
    return dataclasses.replace(dlq, dead_letter_on=(*dlq.dead_letter_on, MessageDecodeError))


def reply_target(
    message: Message[Any, Any], results: Mailbox[Any, Any] | None
) -> Mailbox[Any, Any] | None:
    """Where the answer to `message` goes: its `reply_to`, else `results`, else nowhere.

    Called before the work starts, so a reply-to name that cannot be resolved fails the
    delivery before any work is spent on it.

    Raises:
        MailboxResolutionError: The reply-to name cannot be resolved.
    """
    target = message.reply_to
    return target if target is not None else results


def dead_letter_error(letter: DeadLetter[Any]) -> str:
    """The error text of an answer to a message given up on, e.g.

    `dead-lettered after 3 deliveries (exhausted): RateLimitError: 429 Too Many Requests`.
    """
    error_type = letter.error_type.rpartition(".")[2]
    deliveries = "delivery" if letter.delivery_count == 1 else "deliveries"
    return (
        f"dead-lettered after {letter.delivery_count} {deliveries} ({letter.reason}): "
        f"{error_type}: {letter.error_message}"
    )


class AnsweringWorker(MailboxWorker[T, R]):
    """A `MailboxWorker` under the answering rule of the module docstring.

    Args:
        requests: The mailbox to receive from (None: the worker is only driven directly).
        results: Where answers go when a request has no `reply_to` (None: dropped with a
            warning).
        transient_errors: Failures retried through the mailbox before the message is
            given up on and answered with an error of kind `dead_letter`.
        retry: Retry limit and backoff between deliveries.
        dlq: Dead-letter policy; bodies that cannot be decoded go there at once.
        **options: The other `MailboxWorker` arguments (name, clock, max_concurrent,
            lease, visibility_timeout, wait_time_seconds).
    """

    def __init__(
        self,
        *,
        requests: Mailbox[T, R] | None,
        results: Mailbox[R, Any] | None,
        transient_errors: tuple[type[BaseException], ...],
        retry: RetryPolicy | None = None,
        dlq: DLQPolicy[T] | None = None,
        **options: Any,
    ) -> None:
        self._retry_policy = retry or RetryPolicy()
        self._dlq_policy = with_decode_errors_dead_lettered(dlq)
        super().__init__(
            requests=requests, retry=self._retry_policy, dlq=self._dlq_policy, **options
        )
        self.results = results
        """Where answers go when a request has no `reply_to`."""
        self.transient_errors = transient_errors
        """Failures retried through the mailbox rather than answered at once."""

    def raise_if_transient(self, error: BaseException | None) -> None:
        """Raise `error` when it is transient: the worker's policies decide what follows.

        Called by a handler with the failure of its work, before answering with it: a
        transient failure is retried with backoff and, once given up on, answered by
        `on_dead_letter`; any other failure returns here and is the answer.
        """
        if isinstance(error, Exception) and isinstance(error, self.transient_errors):
            raise error

    def send_answer(
        self,
        target: Mailbox[R, Any] | None,
        answer: R,
        request_id: object,
        *,
        message: Message[Any, Any] | None = None,
    ) -> None:
        """Send `answer` to `target` (see `reply_target`), or log that it has nowhere to go.

        Given the `message` answered, the answer is sent and the message acknowledged in
        one round trip where the backend can (`send_and_acknowledge`: Redis); a message
        acknowledged here is left alone by the worker's settling.

        Raises:
            MailboxError: The answer could not be sent (the message is not acknowledged).
        """
        if target is not None:
            if message is None:
                target.send(answer)
            else:
                send_and_acknowledge(target, answer, message)
            return
        _log.warning(
            "%s: request %s has no reply_to and the worker has no results mailbox; its "
            "answer is dropped", self.name, request_id,
        )  # fmt: skip

    def dead_letter_answer(self, message: Message[T, R], letter: DeadLetter[Any]) -> R | None:
        """The error answer (kind `dead_letter`) to a message given up on.

        None when the message does not say which request it was (nothing to answer).
        Subclasses implement this.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement dead_letter_answer()")

    def on_dead_letter(self, message: Message[T, R], letter: DeadLetter[Any]) -> None:
        """Answer a message the worker gave up on with `dead_letter_answer`.

        The answer goes to the message's `reply_to` (or `results`), so the sender counts
        it; a message that names no request cannot be answered (logged).

        Raises:
            MailboxError: The answer could not be sent (the message is kept for later).
        """
        answer = self.dead_letter_answer(message, letter)
        if answer is None:
            _log.warning(
                "%s: message %s names no request; it is given up on unanswered",
                self.name, message.id,
            )  # fmt: skip
            return
        try:
            target = reply_target(message, self.results)
        except MailboxResolutionError as exc:
            _log.warning("%s: cannot answer message %s: %s", self.name, message.id, exc)
            return
        self.send_answer(target, answer, message.id)
