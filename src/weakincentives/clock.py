"""Injectable clocks.

Library code never calls `time.sleep` or `time.monotonic` directly; it takes a
`clock=` argument so tests can advance a `FakeClock` instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["SYSTEM_CLOCK", "Clock", "FakeClock", "SystemClock", "async_sleep"]


@runtime_checkable
class Clock(Protocol):
    """A source of wall time, monotonic time and sleep."""

    def now(self) -> datetime:
        """Return the current wall time, timezone-aware in UTC."""
        ...

    def monotonic(self) -> float:
        """Return seconds on a clock that never goes backwards."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block for `seconds` (a fake clock advances instead)."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)

    monotonic = staticmethod(time.monotonic)
    """Return `time.monotonic()` (the function itself: read a few times per sample, it
    costs no wrapper call)."""

    def sleep(self, seconds: float) -> None:
        """Sleep for `seconds` (negative values sleep for zero)."""
        time.sleep(max(0.0, seconds))

    async def asleep(self, seconds: float) -> None:
        """`sleep` awaited (asyncio or trio): the event loop runs other tasks meanwhile."""
        import anyio  # here, not at the top: most programs never sleep this way

        await anyio.sleep(max(0.0, seconds))


SYSTEM_CLOCK = SystemClock()
"""The process-wide real clock; the default wherever a `clock=` is accepted."""


class FakeClock:
    """A clock that moves only when told to; `sleep` advances it instantly.

    Thread-safe. Starts at 2024-01-01T00:00:00Z and monotonic 0.0 unless given a start.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._lock = threading.Lock()
        self._wall = start or datetime(2024, 1, 1, tzinfo=UTC)
        self._mono = 0.0

    def now(self) -> datetime:
        """Return the fake wall time."""
        with self._lock:
            return self._wall

    def monotonic(self) -> float:
        """Return the fake monotonic time."""
        with self._lock:
            return self._mono

    def sleep(self, seconds: float) -> None:
        """Advance the clock by `seconds` without blocking."""
        self.advance(max(0.0, seconds))

    async def asleep(self, seconds: float) -> None:
        """`sleep`, then let other tasks run once."""
        import anyio.lowlevel

        self.advance(max(0.0, seconds))
        await anyio.lowlevel.checkpoint()

    def advance(self, seconds: float) -> None:
        """Move both wall and monotonic time forward by `seconds`."""
        if seconds < 0:
            raise ValueError(f"cannot move a clock backwards (seconds={seconds})")
        with self._lock:
            self._mono += seconds
            self._wall += timedelta(seconds=seconds)


async def async_sleep(clock: Clock, seconds: float) -> None:
    """Wait `seconds` on `clock` from async code.

    Awaits the clock's `asleep` when it has one (`SystemClock` and `FakeClock` do), so the
    event loop keeps running; a clock with only `sleep` is called as it is (it blocks).
    """
    asleep = getattr(clock, "asleep", None)
    if asleep is not None:
        await asleep(seconds)
    else:
        clock.sleep(seconds)
