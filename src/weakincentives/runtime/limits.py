"""Deadlines and token budgets for one agent run."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import BudgetExceededError, DeadlineExceededError
from weakincentives.runtime.session import TokenUsage

__all__ = ["Budget", "BudgetTracker", "Deadline"]


@dataclass(frozen=True, slots=True)
class Deadline:
    """A point in monotonic time after which a run must stop.

    Examples:
        >>> from weakincentives.clock import FakeClock
        >>> clock = FakeClock()
        >>> d = Deadline.after(5.0, clock=clock)
        >>> clock.advance(6.0)
        >>> d.expired()
        True
    """

    expires_at: float
    """The clock's monotonic time at which the deadline passes."""
    clock: Clock = SYSTEM_CLOCK
    """Clock the deadline is measured on."""

    @classmethod
    def after(cls, seconds: float, *, clock: Clock = SYSTEM_CLOCK) -> Deadline:
        """Return a deadline `seconds` from now."""
        if seconds <= 0:
            raise ValueError(f"a deadline must be in the future (seconds={seconds})")
        return cls(expires_at=clock.monotonic() + seconds, clock=clock)

    def remaining(self) -> float:
        """Seconds left (negative once expired)."""
        return self.expires_at - self.clock.monotonic()

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self.remaining() <= 0

    def check(self, what: str = "run") -> None:
        """Raise `DeadlineExceededError` if the deadline has passed."""
        left = self.remaining()
        if left <= 0:
            raise DeadlineExceededError(f"{what} passed its deadline ({-left:.3f}s over)")


@dataclass(frozen=True, slots=True)
class Budget:
    """Token limits for one run; None means unlimited."""

    max_total_tokens: int | None = None
    """Input plus output tokens across every model call."""
    max_input_tokens: int | None = None
    """Input tokens across every model call."""
    max_output_tokens: int | None = None
    """Output tokens across every model call."""


_ZERO = TokenUsage()
"""The usage of a tracker that recorded nothing yet (one shared, immutable zero)."""


class BudgetTracker:
    """Accumulates usage and raises once a `Budget` is exceeded. Thread-safe."""

    def __init__(self, budget: Budget | None) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._usage = _ZERO

    @property
    def usage(self) -> TokenUsage:
        """Usage recorded so far."""
        with self._lock:
            return self._usage

    def record(self, usage: TokenUsage) -> None:
        """Add `usage`; raise `BudgetExceededError` when a limit is passed."""
        with self._lock:
            current = self._usage
            # The first call's usage is the total: kept as it is (immutable) when it is
            # a plain `TokenUsage`, as `0 + usage` would make it, without the copy.
            if current is _ZERO and type(usage) is TokenUsage:
                self._usage = usage
            else:
                self._usage = current + usage
            total = self._usage
        b = self._budget
        if b is None:
            return
        checks = (
            ("total", b.max_total_tokens, total.total_tokens),
            ("input", b.max_input_tokens, total.input_tokens),
            ("output", b.max_output_tokens, total.output_tokens),
        )
        for label, limit, used in checks:
            if limit is not None and used > limit:
                raise BudgetExceededError(
                    f"token budget exceeded: {used} {label} tokens used, limit {limit}",
                )
