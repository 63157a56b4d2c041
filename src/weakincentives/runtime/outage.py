"""Calm logs while a mailbox backend (Redis) is unreachable: one warning, one recovery.

During an outage every part of a process meets the same error: the receiving loop,
each handler that tries to reply, each acknowledge, the submitting client. Logged one
by one, with tracebacks, a five-second Redis restart buried a worker's log under dozens
of them. They all report to one `OutageLog` per process (`BACKEND_OUTAGE`) instead: the
first failure logs one warning line (what failed and why, no traceback), the next ones
are logged at DEBUG, and the first success after them logs one line saying the backend
is reachable again, after how many failures and how long.
"""

from __future__ import annotations

import logging
import threading

from weakincentives.clock import SYSTEM_CLOCK, Clock

__all__ = ["BACKEND_OUTAGE", "OutageLog"]


class OutageLog:
    """Tracks whether a backend is unreachable and logs the outage once.

    Thread-safe: workers, handlers and clients of one process share one instance.

    Args:
        logger: Where the two lines go.
        clock: Measures how long the outage lasted.
    """

    def __init__(self, logger: logging.Logger, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._logger = logger
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0

    @property
    def ongoing(self) -> bool:
        """True between a failure and the next success."""
        return self._since is not None

    def failed(self, action: str, error: BaseException) -> None:
        """Record a failure while doing `action` (e.g. "receiving requests").

        The first failure of an outage logs a warning; later ones log at DEBUG.
        """
        with self._lock:
            self._failures += 1
            first = self._since is None
            if first:
                self._since = self._clock.monotonic()
        if first:
            self._logger.warning(
                "backend unreachable while %s: %s; retrying until it is back", action, error
            )
        else:
            self._logger.debug("still unreachable while %s: %s", action, error)

    def succeeded(self) -> None:
        """Record a success; ends an ongoing outage with one line."""
        if self._since is None:  # the common case, without taking the lock
            return
        with self._lock:
            since, failures = self._since, self._failures
            if since is None:
                return
            self._since, self._failures = None, 0
        seconds = self._clock.monotonic() - since
        self._logger.warning(
            "backend reachable again after %.1fs (%d failed calls)", seconds, failures
        )


BACKEND_OUTAGE = OutageLog(logging.getLogger("weakincentives.outage"))
"""The outage log every worker and client of this process reports to."""
