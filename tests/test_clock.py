from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from weakincentives.clock import SYSTEM_CLOCK, Clock, FakeClock, SystemClock


def test_fake_clock_starts_at_a_fixed_point() -> None:
    clock = FakeClock()
    assert clock.now() == datetime(2024, 1, 1, tzinfo=UTC)
    assert clock.monotonic() == 0.0


def test_fake_clock_accepts_a_start() -> None:
    start = datetime(2030, 6, 1, 8, tzinfo=UTC)
    assert FakeClock(start).now() == start


def test_advance_moves_wall_and_monotonic_time_together() -> None:
    clock = FakeClock()
    clock.advance(1.5)
    clock.advance(0)
    assert clock.monotonic() == 1.5
    assert clock.now() == datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=1.5)


@pytest.mark.parametrize(("seconds", "expected"), [(2.0, 2.0), (0.0, 0.0), (-3.0, 0.0)])
def test_sleep_advances_instantly_and_never_backwards(seconds: float, expected: float) -> None:
    clock = FakeClock()
    clock.sleep(seconds)
    assert clock.monotonic() == expected


def test_advance_backwards_is_refused() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    assert clock.monotonic() == 0.0


def test_fake_clock_is_thread_safe() -> None:
    clock = FakeClock()

    def work() -> None:
        for _ in range(1000):
            clock.advance(0.001)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clock.monotonic() == pytest.approx(8.0)
    elapsed = clock.now() - datetime(2024, 1, 1, tzinfo=UTC)
    assert elapsed.total_seconds() == pytest.approx(8.0, abs=0.001)


@pytest.mark.parametrize("clock", [SYSTEM_CLOCK, SystemClock(), FakeClock()], ids=type)
def test_clocks_satisfy_the_protocol(clock: Clock) -> None:
    assert isinstance(clock, Clock)
    assert clock.now().tzinfo is not None
    assert clock.now().utcoffset() == timedelta(0)


def test_system_clock_moves_forward() -> None:
    first = SYSTEM_CLOCK.monotonic()
    SYSTEM_CLOCK.sleep(0.001)
    SYSTEM_CLOCK.sleep(-5)  # negative sleeps return at once
    assert SYSTEM_CLOCK.monotonic() > first
    assert abs(SYSTEM_CLOCK.now() - datetime.now(UTC)) < timedelta(seconds=5)
