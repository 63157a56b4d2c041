from __future__ import annotations

import pytest

from weakincentives.clock import FakeClock
from weakincentives.errors import BudgetExceededError, DeadlineExceededError, ExecutionError
from weakincentives.runtime import Budget, BudgetTracker, Deadline, TokenUsage


def test_deadline_counts_down_on_its_clock() -> None:
    clock = FakeClock()
    clock.advance(100)
    deadline = Deadline.after(5, clock=clock)
    assert deadline.expires_at == 105
    assert deadline.remaining() == 5
    assert not deadline.expired()
    deadline.check()

    clock.advance(5)
    assert deadline.remaining() == 0
    assert deadline.expired()


def test_check_raises_once_expired_naming_what_and_by_how_much() -> None:
    clock = FakeClock()
    deadline = Deadline.after(1, clock=clock)
    clock.advance(3.5)
    with pytest.raises(
        DeadlineExceededError, match=r"prompt x passed its deadline \(2\.500s over\)"
    ):
        deadline.check("prompt x")


def test_deadline_exceeded_is_a_timeout_error() -> None:
    assert issubclass(DeadlineExceededError, TimeoutError)
    assert issubclass(DeadlineExceededError, ExecutionError)


@pytest.mark.parametrize("seconds", [0, -1])
def test_deadline_must_be_in_the_future(seconds: float) -> None:
    with pytest.raises(ValueError, match="future"):
        Deadline.after(seconds, clock=FakeClock())


def test_budget_tracker_accumulates_usage() -> None:
    tracker = BudgetTracker(Budget(max_total_tokens=100))
    tracker.record(TokenUsage(input_tokens=10, output_tokens=5, cached_tokens=2))
    tracker.record(TokenUsage(input_tokens=20, output_tokens=15))
    assert tracker.usage == TokenUsage(input_tokens=30, output_tokens=20, cached_tokens=2)
    assert tracker.usage.total_tokens == 50


def test_no_budget_is_unlimited() -> None:
    tracker = BudgetTracker(None)
    tracker.record(TokenUsage(input_tokens=10**9, output_tokens=10**9))
    assert tracker.usage.total_tokens == 2 * 10**9


@pytest.mark.parametrize(
    ("budget", "label"),
    [
        (Budget(max_total_tokens=29), "30 total tokens used, limit 29"),
        (Budget(max_input_tokens=19), "20 input tokens used, limit 19"),
        (Budget(max_output_tokens=9), "10 output tokens used, limit 9"),
    ],
    ids=["total", "input", "output"],
)
def test_each_limit_raises_when_passed(budget: Budget, label: str) -> None:
    tracker = BudgetTracker(budget)
    usage = TokenUsage(input_tokens=10, output_tokens=5)
    tracker.record(usage)  # within every limit
    with pytest.raises(BudgetExceededError, match=label):
        tracker.record(usage)


def test_reaching_a_limit_exactly_is_allowed() -> None:
    tracker = BudgetTracker(Budget(max_total_tokens=15))
    tracker.record(TokenUsage(input_tokens=10, output_tokens=5))
    assert tracker.usage.total_tokens == 15
