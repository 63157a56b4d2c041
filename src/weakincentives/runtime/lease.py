"""Heartbeats and heartbeat-driven lease extension for messages being handled.

A worker hands each handler a `WorkerHeartbeat`. Calling it says "still making
progress": it refreshes the worker's liveness timestamp (which the `LoopGroup` watchdog
reads) and, when a `LeaseExtender` is attached and `interval` seconds have passed since
the last extension, pushes the message's visibility timeout out again. A handler that
hangs stops heartbeating, so its lease runs out and another worker gets the message.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError, MailboxError, ReceiptHandleExpiredError
from weakincentives.runtime.mailbox import MAX_TIMEOUT_SECONDS, Message

__all__ = ["LeaseExtender", "LeaseExtenderConfig", "WorkerHeartbeat"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseExtenderConfig:
    """How a handler's heartbeats keep its message invisible to other workers."""

    interval: float = 60.0
    """Least seconds between two extensions (heartbeats in between are free)."""

    visibility_timeout: float = 300.0
    """The visibility timeout set on each extension, counted from the heartbeat."""

    def __post_init__(self) -> None:
        if not 0 < self.interval < self.visibility_timeout <= MAX_TIMEOUT_SECONDS:
            raise ConfigurationError(
                "LeaseExtenderConfig needs 0 < interval < visibility_timeout <= "
                f"{MAX_TIMEOUT_SECONDS:g}, got interval={self.interval}, "
                f"visibility_timeout={self.visibility_timeout}: the lease must outlast "
                "the gap between two extensions",
            )


class LeaseExtender:
    """Extends one delivery's visibility when its handler heartbeats and it is due.

    Args:
        message: The delivery whose lease is extended.
        config: Interval and new visibility timeout.
        clock: Source of monotonic time.
    """

    def __init__(
        self,
        message: Message[Any, Any],
        config: LeaseExtenderConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._message = message
        self._config = config
        self._clock = clock
        self._lock = threading.Lock()
        self._last = clock.monotonic()
        self._extensions = 0
        self._lost = False

    @property
    def extensions(self) -> int:
        """How many times the lease was extended."""
        return self._extensions

    @property
    def lost(self) -> bool:
        """True once the delivery's handle went stale: another worker may have it now."""
        return self._lost

    def beat(self) -> bool:
        """Extend the lease if `interval` has passed since the last one; True if extended.

        Never raises: a stale handle marks the lease `lost`; other mailbox errors are
        logged and retried at the next heartbeat.
        """
        with self._lock:
            now = self._clock.monotonic()
            if self._lost or now - self._last < self._config.interval:
                return False
            try:
                self._message.extend_visibility(self._config.visibility_timeout)
            except ReceiptHandleExpiredError:
                self._lost = True
                _log.warning(
                    "lease of message %s was lost: its visibility timeout passed before "
                    "a heartbeat extended it; lower LeaseExtenderConfig.interval or "
                    "heartbeat more often",
                    self._message.id,
                )
                return False
            except MailboxError:
                _log.warning("could not extend message %s", self._message.id, exc_info=True)
                return False
            self._last = now
            self._extensions += 1
            return True


class WorkerHeartbeat:
    """The callable a worker hands its handler: call it while making progress.

    Compatible with `weakincentives.adapters.Heartbeat` (`Callable[[], None]`), so a
    handler can pass it on to `adapter.evaluate(..., heartbeat=heartbeat)`.

    Args:
        clock: Source of monotonic time.
        on_beat: Called with the beat's monotonic time (the worker records liveness).
        lease: Extends the message's lease when due (None: no extension).
    """

    __slots__ = ("_clock", "_last", "_lease", "_on_beat")

    def __init__(
        self,
        *,
        clock: Clock = SYSTEM_CLOCK,
        on_beat: Callable[[float], None] | None = None,
        lease: LeaseExtender | None = None,
    ) -> None:
        self._clock = clock
        self._on_beat = on_beat
        self._lease = lease
        self._last: float | None = None

    def __call__(self) -> None:
        """Beat (see `beat`)."""
        self.beat()

    @property
    def last(self) -> float | None:
        """Monotonic time of the latest beat, or None before the first."""
        return self._last

    @property
    def lease(self) -> LeaseExtender | None:
        """The lease extender attached to this heartbeat, if any."""
        return self._lease

    def beat(self) -> None:
        """Record progress and extend the message's lease if it is due. Never raises."""
        now = self._clock.monotonic()
        self._last = now
        if self._on_beat is not None:
            self._on_beat(now)
        if self._lease is not None:
            self._lease.beat()
