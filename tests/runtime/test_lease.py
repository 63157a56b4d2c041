"""Lease extension driven by heartbeats, and the heartbeat callable itself."""

from __future__ import annotations

from typing import Any

import pytest

from weakincentives.clock import FakeClock
from weakincentives.errors import ConfigurationError, MailboxConnectionError
from weakincentives.runtime.lease import LeaseExtender, LeaseExtenderConfig, WorkerHeartbeat
from weakincentives.runtime.mailbox import FakeMailbox, Message

CONFIG = LeaseExtenderConfig(interval=10, visibility_timeout=30)


def in_flight(clock: FakeClock) -> tuple[FakeMailbox[str, None], Message[str, None]]:
    mailbox: FakeMailbox[str, None] = FakeMailbox(clock=clock)
    mailbox.send("job")
    return mailbox, mailbox.receive(visibility_timeout=30)[0]


def test_beats_extend_only_once_the_interval_passed() -> None:
    clock = FakeClock()
    mailbox, message = in_flight(clock)
    lease = LeaseExtender(message, CONFIG, clock=clock)

    clock.advance(9)
    assert lease.beat() is False
    clock.advance(1)
    assert lease.beat() is True
    assert lease.beat() is False  # the interval restarts at each extension

    clock.advance(25)  # 35 s after receipt: visible again without the extension
    assert mailbox.receive() == []
    assert (lease.extensions, mailbox.calls["extend_visibility"]) == (1, 1)


def test_a_lease_whose_handle_went_stale_is_lost_for_good() -> None:
    clock = FakeClock()
    _, message = in_flight(clock)
    lease = LeaseExtender(message, CONFIG, clock=clock)

    clock.advance(31)
    assert lease.beat() is False
    assert lease.lost
    clock.advance(10)
    assert lease.beat() is False


def test_a_backend_error_is_retried_at_the_next_beat() -> None:
    clock = FakeClock()
    mailbox, message = in_flight(clock)
    lease = LeaseExtender(message, CONFIG, clock=clock)
    mailbox.fail_next("extend_visibility", MailboxConnectionError("blip"))

    clock.advance(10)
    assert lease.beat() is False
    assert lease.beat() is True
    assert not lease.lost


@pytest.mark.parametrize(
    "kwargs",
    [
        {"interval": 0},
        {"interval": 30, "visibility_timeout": 30},
        {"interval": 10, "visibility_timeout": 50_000},
    ],
)
def test_a_lease_must_outlast_its_interval(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="interval"):
        LeaseExtenderConfig(**kwargs)


def test_heartbeat_records_time_reports_it_and_drives_the_lease() -> None:
    clock = FakeClock()
    _, message = in_flight(clock)
    lease = LeaseExtender(message, CONFIG, clock=clock)
    reported: list[float] = []
    heartbeat = WorkerHeartbeat(clock=clock, on_beat=reported.append, lease=lease)

    before = heartbeat.last
    clock.advance(12)
    heartbeat()

    assert before is None
    assert (heartbeat.last, reported, lease.extensions) == (12.0, [12.0], 1)
    assert heartbeat.lease is lease


def test_heartbeat_without_lease_or_listener_only_records() -> None:
    clock = FakeClock()
    heartbeat = WorkerHeartbeat(clock=clock)
    clock.advance(3)

    heartbeat.beat()

    assert heartbeat.last == 3.0
