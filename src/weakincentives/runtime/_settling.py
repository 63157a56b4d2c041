"""How a `MailboxWorker` settles a message once its handler is done.

Returned means acknowledged; raised means retried with backoff (a nack whose visibility
timeout is the backoff), dead-lettered, or dropped, by the `RetryPolicy` and `DLQPolicy`;
an undecodable body is dead-lettered at once. A shutdown may take a delivery back
(`abandoned`) while its handler still runs: whatever that handler does afterwards is not
settled. Settling never raises: a mailbox that refuses is logged and counted, and the
message comes back by its visibility timeout.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Literal

from weakincentives.clock import Clock
from weakincentives.errors import MailboxConnectionError, MailboxError
from weakincentives.runtime.dlq import (
    DeadLetter,
    DeadLetterReason,
    DLQPolicy,
    RetryPolicy,
    failure_action,
)
from weakincentives.runtime.lease import WorkerHeartbeat
from weakincentives.runtime.mailbox import Message
from weakincentives.runtime.outage import BACKEND_OUTAGE

__all__ = ["Counter", "Delivery", "Settling"]

_log = logging.getLogger("weakincentives.runtime.worker")

Counter = Literal[
    "received",
    "succeeded",
    "failed",
    "retried",
    "dead_lettered",
    "dropped",
    "returned",
    "settle_errors",
    "receive_errors",
]
"""The counts a worker keeps (the fields of `WorkerStats`)."""


class Delivery:
    """A message being handled, and whether a shutdown took it back."""

    __slots__ = ("abandoned", "heartbeat", "lock", "message")

    def __init__(self, message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        self.message = message
        self.heartbeat = heartbeat
        self.lock = threading.Lock()
        self.abandoned = False


class Settling:
    """Settles deliveries of one worker by what their handlers did.

    Args:
        name: The worker's name, in logs.
        source: The requests mailbox's name, recorded in dead letters.
        retry: Retry limit and backoff.
        dlq: Where given-up messages go (None: dropped with an error log).
        clock: Stamps dead letters.
        count: Adds to one of the worker's counts.
        on_give_up: Told about each message given up on (dead-lettered, or dropped
            without a DLQ) before it is acknowledged, so its sender can be answered;
            when it raises a `MailboxError` the message is returned for a later attempt.
    """

    def __init__(
        self,
        *,
        name: str,
        source: str,
        retry: RetryPolicy,
        dlq: DLQPolicy[Any] | None,
        clock: Clock,
        count: Callable[[Counter], None],
        on_give_up: Callable[[Message[Any, Any], DeadLetter[Any]], None] | None = None,
    ) -> None:
        self._name = name
        self._on_give_up = on_give_up
        self._source = source
        self._retry = retry
        self._dlq = dlq
        self._clock = clock
        self._count = count

    def finish(self, delivery: Delivery, error: Exception | None) -> None:
        """Settle after the handler returned (`error` None) or raised `error`."""
        try:
            if error is None:
                self._count("succeeded")
                self.settle(delivery, delivery.message.acknowledge)
            else:
                self._count("failed")
                self._on_failure(delivery, error)
        except Exception:  # a bug in settling must not end the handler's thread or task
            _log.exception(
                "%s: unexpected error settling message %s", self._name, delivery.message.id
            )

    def reject_undecodable(self, delivery: Delivery) -> bool:
        """Dead-letter a message whose body did not decode; False when it decoded."""
        error = delivery.message.decode_error
        if error is None:
            return False
        try:
            self._count("failed")
            self._give_up(delivery, error, "undecodable")
        except Exception:  # see `finish`
            _log.exception(
                "%s: unexpected error settling message %s", self._name, delivery.message.id
            )
        return True

    def settle(self, delivery: Delivery, call: Callable[[], object]) -> bool:
        """Run a settle call unless a shutdown took the delivery back; True on success."""
        with delivery.lock:
            if delivery.abandoned or delivery.message.settled:
                return False
            try:
                call()
            except MailboxError as error:
                self._count("settle_errors")
                self._settle_failed(f"could not settle message {delivery.message.id}", error)
                return False
            BACKEND_OUTAGE.succeeded()  # one attribute read unless an outage is ongoing
            return True

    def _settle_failed(self, what: str, error: MailboxError) -> None:
        # An unreachable backend is one outage, however many messages meet it.
        if isinstance(error, MailboxConnectionError):
            BACKEND_OUTAGE.failed(f"{self._name} {what}", error)
        else:
            # One line: a stale receipt (the message came back meanwhile) is expected.
            _log.warning("%s: %s (%s); it will be delivered again", self._name, what, error)

    def give_back(self, message: Message[Any, Any], visibility_timeout: float = 0.0) -> None:
        """Return `message` to the queue (a nack), logging a mailbox that refuses."""
        try:
            message.nack(visibility_timeout=visibility_timeout)
        except MailboxError as error:
            self._count("settle_errors")
            self._settle_failed(f"could not return message {message.id}", error)

    def _on_failure(self, delivery: Delivery, error: Exception) -> None:
        message = delivery.message
        if message.settled:
            _log.warning(
                "%s: handler settled message %s, then raised",
                self._name,
                message.id,
                exc_info=error,
            )
            return
        action = failure_action(error, message.delivery_count, retry=self._retry, dlq=self._dlq)
        if action == "retry":
            delay = self._retry.backoff(message.delivery_count)
            if isinstance(error, MailboxConnectionError):  # e.g. its reply could not be sent
                BACKEND_OUTAGE.failed(f"{self._name} was handling message {message.id}", error)
            else:
                # One line per retry (the traceback comes once, if it is dead-lettered).
                _log.warning(
                    "%s: message %s failed on delivery %d (%s: %s); retrying in %.3gs",
                    self._name,
                    message.id,
                    message.delivery_count,
                    type(error).__name__,
                    error,
                    delay,
                )
            if self.settle(delivery, lambda: message.nack(visibility_timeout=delay)):
                self._count("retried")
        else:
            self._give_up(delivery, error, action)

    def _give_up(self, delivery: Delivery, error: BaseException, reason: DeadLetterReason) -> None:
        """Answer the sender, dead-letter the message (or drop it without a DLQ), ack it."""
        message = delivery.message
        letter = DeadLetter.from_message(
            message, error, reason=reason, source=self._source, now=self._clock.now()
        )
        if not self._answer(delivery, letter):
            return
        if self._dlq is None:
            _log.error(
                "%s: dropping message %s (%s) after %d deliveries: no DLQPolicy is configured",
                self._name,
                message.id,
                reason,
                message.delivery_count,
                exc_info=error,
            )
            if self.settle(delivery, message.acknowledge):
                self._count("dropped")
            return
        with delivery.lock:
            if delivery.abandoned:
                return
            try:
                self._dlq.mailbox.send(letter, reply_to=None)
            except MailboxError:
                _log.exception("%s: dead-letter queue refused message %s", self._name, message.id)
                self.give_back(message, self._retry.backoff(message.delivery_count))
                return
        _log.error(
            "%s: dead-lettered message %s (%s) to %s",
            self._name,
            message.id,
            reason,
            self._dlq.mailbox.name,
            exc_info=error,
        )
        self._count("dead_lettered")
        self.settle(delivery, message.acknowledge)

    def _answer(self, delivery: Delivery, letter: DeadLetter[Any]) -> bool:
        """Tell `on_give_up`; False when the message went back for a later attempt."""
        if self._on_give_up is None or delivery.abandoned:
            return not delivery.abandoned
        message = delivery.message
        try:
            self._on_give_up(message, letter)
        except MailboxError as exc:  # the answer could not be sent: keep the message
            if isinstance(exc, MailboxConnectionError):
                BACKEND_OUTAGE.failed(f"{self._name} was answering message {message.id}", exc)
            else:
                _log.warning("%s: could not answer message %s: %s", self._name, message.id, exc)
            self.give_back(message, self._retry.backoff(message.delivery_count))
            return False
        except Exception:  # a bug in the answer must not keep the message forever
            _log.exception("%s: answering message %s failed", self._name, message.id)
        return True
