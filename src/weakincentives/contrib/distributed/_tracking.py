"""How the submitting side notices lost work: a marker of the run's requests in Redis.

A request the client submitted is, at any time, in the requests queue, held by a
worker (invisible for its visibility timeout), or answered in the run's results
mailbox; dead-lettered requests are answered with an error result too. One thing loses
them all at once: Redis itself coming back empty (a restart without persistence, a
`FLUSHALL`). Queue lengths cannot tell that apart from "the workers are done", so the
client keeps a marker key beside the queues (`<namespace>:wink-run:{<run id>}`), set
once every request of the run was sent, with the queues' TTL:

- while collecting, the client checks it every few seconds and after every outage; a
  marker gone missing means the queues went with it, and the outstanding requests are
  sent again (their late twins, if any survived, are dropped as duplicates);
- a resumed run whose marker is still there has its requests in Redis (the client
  crashed, the queues did not): it collects them instead of running them again.

One request can also be lost while Redis keeps everything else (a worker that
acknowledged it without answering, a key deleted by hand). Each request has a deadline
(`RequestDeadline`, `DEFAULT_REQUEST_DEADLINE` seconds from when it was sent): past it,
with the requests mailbox and the run's results mailbox both empty, no worker holds the
missing requests, none waits, and no answer is on its way (a worker answers before it
acknowledges), so they were lost: the client sends them again, and records an error of
kind `lost` for each one lost a second time. A request that waits in the queue or that
a worker holds is never given up on here (the run's timeout bounds that); when other
runs share the requests mailbox, a loss is noticed once it is empty.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from weakincentives.clock import Clock
from weakincentives.contrib.mailbox import DEFAULT_QUEUE_TTL, RedisMailbox
from weakincentives.errors import MailboxConnectionError, MailboxError
from weakincentives.runtime.mailbox import Mailbox

try:
    import redis
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "distributed evaluation needs the redis package; install it with "
        "`pip install 'weakincentives[redis]'`",
        name="redis",
    ) from exc

__all__ = [
    "DEFAULT_REQUEST_DEADLINE",
    "LOSS_CHECK_SECONDS",
    "STALL_NOTICE_SECONDS",
    "RequestDeadline",
    "RunMarker",
    "Watch",
]

_log = logging.getLogger("weakincentives.contrib.distributed._client")

LOSS_CHECK_SECONDS = 5.0
"""How often a collecting client checks that its run's requests are still in Redis."""
STALL_NOTICE_SECONDS = 30.0
"""After this long without a new result, the client says where its requests wait."""
DEFAULT_REQUEST_DEADLINE = 300.0
"""Seconds a request may go unanswered before the client asks whether it still exists
(as long as a worker's default visibility timeout)."""


class RequestDeadline:
    """When the outstanding requests count as lost (see the module docstring).

    Args:
        seconds: The deadline, counted from the last time requests were sent (None:
            requests are never counted lost).
        outbox: The requests mailbox.
        inbox: The run's results mailbox.
        clock: Measures the deadline.
    """

    def __init__(
        self,
        seconds: float | None,
        outbox: Mailbox[Any, Any],
        inbox: Mailbox[Any, Any],
        clock: Clock,
    ) -> None:
        self.seconds = seconds
        self._outbox = outbox
        self._inbox = inbox
        self._clock = clock
        self._since = clock.monotonic()

    def restart(self) -> None:
        """Requests were sent (again) now."""
        self._since = self._clock.monotonic()

    def check_every(self, interval: float) -> float:
        """How often to ask `lost`: `interval`, or the deadline when that is shorter."""
        return interval if self.seconds is None else min(interval, self.seconds)

    def lost(self) -> bool:
        """True when the deadline passed and both mailboxes hold nothing.

        The requests mailbox is read first: a worker answers before it acknowledges, so
        a request gone from it has its answer in the results mailbox, read second, or
        already collected.

        Raises:
            MailboxError: A mailbox could not be read.
        """
        if self.seconds is None or self._clock.monotonic() - self._since < self.seconds:
            return False
        return self._outbox.approximate_count() == 0 and self._inbox.approximate_count() == 0


class RunMarker:
    """The key that says a run's requests are in Redis (see the module docstring).

    Args:
        client: The client's redis-py connection.
        namespace: Key prefix of the run's mailboxes.
        run_id: The run.
        ttl: How long the marker outlives its last refresh (the queues' TTL).
    """

    def __init__(
        self, client: Any, namespace: str, run_id: str, *, ttl: timedelta = DEFAULT_QUEUE_TTL
    ) -> None:
        self._client = client
        self.key = f"{namespace}:wink-run:{{{run_id}}}"
        self._ttl_ms = int(ttl.total_seconds() * 1000)
        self.set_here = False
        """Whether this process set the marker (only then can it go missing)."""

    def present(self) -> bool:
        """Whether every request of the run was sent and Redis still holds the marker.

        Raises:
            MailboxConnectionError: Redis cannot be reached.
        """
        try:
            return bool(self._client.exists(self.key))
        except redis.RedisError as exc:
            raise MailboxConnectionError(f"could not read run marker {self.key}: {exc}") from exc

    def mark(self, requests: int) -> None:
        """Record that the run's `requests` requests were all sent.

        Raises:
            MailboxConnectionError: Redis cannot be reached.
        """
        try:
            self._client.set(self.key, str(requests).encode(), px=self._ttl_ms)
        except redis.RedisError as exc:
            raise MailboxConnectionError(f"could not set run marker {self.key}: {exc}") from exc
        self.set_here = True

    def lost(self) -> bool:
        """True when this process set the marker and Redis no longer holds it.

        Raises:
            MailboxConnectionError: Redis cannot be reached.
        """
        return self.set_here and not self.present()

    def clear(self) -> None:
        """Delete the marker (the run is complete); failures are ignored."""
        try:
            self._client.delete(self.key)
        except redis.RedisError:
            _log.debug("could not delete run marker %s", self.key, exc_info=True)


class Watch:
    """What a collecting client checks besides results: lost requests, idle workers.

    Args:
        outbox: The requests mailbox (its length says whether workers take requests).
        marker: The run's marker.
        resend: Sends the outstanding requests again (after Redis lost them).
        run_id: The run, for log lines.
        clock: Measures the check interval and the time since the last result.
        deadline: When outstanding requests count as lost (None: never).
        on_lost: Called when `deadline` says they are (sends them again, or records
            them as lost).
    """

    def __init__(
        self,
        outbox: RedisMailbox[Any, Any],
        marker: RunMarker,
        resend: Callable[[], bool],
        run_id: str,
        clock: Clock,
        deadline: RequestDeadline | None = None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self._outbox = outbox
        self._marker = marker
        self._resend = resend
        self._run_id = run_id
        self._clock = clock
        self._deadline = deadline
        self._on_lost = on_lost
        self._interval = (
            LOSS_CHECK_SECONDS if deadline is None else deadline.check_every(LOSS_CHECK_SECONDS)
        )
        self._checked = self._progress = clock.monotonic()
        self._stall_noticed = False
        self.resubmissions = 0
        """Times the outstanding requests were sent again after Redis lost them."""

    def progressed(self) -> None:
        """A new result arrived."""
        self._progress = self._clock.monotonic()
        self._stall_noticed = False

    def check(self, *, now: bool = False) -> None:
        """Every `LOSS_CHECK_SECONDS` (or `now`, after an outage): are the requests there?

        Also asks the request deadline (as often as it is short), and hands requests it
        finds lost to `on_lost`.

        Raises:
            MailboxConnectionError: Redis cannot be reached.
        """
        clock_now = self._clock.monotonic()
        if not now and clock_now - self._checked < self._interval:
            return
        self._checked = clock_now
        if self._marker.lost():
            self.resubmissions += 1
            _log.warning(
                "run %s: Redis no longer holds the run's requests (restarted without "
                "persistence, or flushed); sending the outstanding ones again", self._run_id,
            )  # fmt: skip
            self._resend()
        elif self._deadline is not None and self._on_lost is not None and self._deadline.lost():
            self._on_lost()
        if not self._stall_noticed and clock_now - self._progress >= STALL_NOTICE_SECONDS:
            self._stall_noticed = True
            _log.warning(
                "run %s: no result for %.0fs; %d messages wait in %r (is a `wink worker` "
                "serving it on this Redis and namespace?)",
                self._run_id, clock_now - self._progress, self.queued(), self._outbox.name,
            )  # fmt: skip

    def queued(self) -> int | None:
        """Messages in the requests mailbox (any run's), or None when unknown."""
        try:
            return self._outbox.approximate_count()
        except MailboxError:
            return None
