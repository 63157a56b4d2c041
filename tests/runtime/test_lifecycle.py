"""LoopGroup: threads, graceful shutdown on signals, health endpoints, watchdog."""

from __future__ import annotations

import json
import os
import signal
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.runtime.workers import FnWorker, succeed, wait_for
from weakincentives.clock import FakeClock
from weakincentives.errors import ConfigurationError
from weakincentives.runtime.lifecycle import Loop, LoopGroup
from weakincentives.runtime.mailbox import InMemoryMailbox


class FakeLoop:
    """A loop whose liveness the test controls."""

    def __init__(self, name: str, clock: FakeClock, *, error: Exception | None = None) -> None:
        self.name = name
        self.clock = clock
        self.running = False
        self.last_heartbeat: float | None = None
        self.error = error
        self._stop = threading.Event()

    def beat(self) -> None:
        self.last_heartbeat = self.clock.monotonic()

    def run(self) -> None:
        if self.error is not None:
            raise self.error
        self.running = True
        self.beat()
        self._stop.wait()
        self.running = False

    def shutdown(self, timeout: float = 30.0) -> bool:
        self._stop.set()
        return True


def test_watchdog_flags_stale_loops_once_per_stall() -> None:
    clock = FakeClock()
    a, b = FakeLoop("a", clock), FakeLoop("b", clock)
    for loop in (a, b):
        loop.running = True
        loop.beat()
    reports: list[list[str]] = []
    group = LoopGroup([a, b], watchdog_timeout=60, clock=clock, on_stall=reports.append)

    clock.advance(30)
    b.beat()
    assert group.check_watchdog() == []
    clock.advance(40)  # a: 70 s without a heartbeat; b: 40 s
    assert group.check_watchdog() == ["a"]
    assert group.check_watchdog() == ["a"]
    assert not group.ready()
    a.beat()
    assert group.check_watchdog() == []
    assert group.ready()
    clock.advance(61)
    assert group.check_watchdog() == ["a", "b"]

    assert reports == [["a"], ["a", "b"]]


@pytest.mark.parametrize(
    ("running", "beaten", "ready"),
    [(True, True, True), (False, True, False), (True, False, False)],
)
def test_ready_needs_every_loop_running_and_beating(
    running: bool, beaten: bool, ready: bool
) -> None:
    clock = FakeClock()
    healthy, other = FakeLoop("healthy", clock), FakeLoop("other", clock)
    healthy.running = True
    healthy.beat()
    other.running = running
    if beaten:
        other.beat()

    assert LoopGroup([healthy, other], clock=clock).ready() is ready


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_health_endpoints_over_http() -> None:
    workers = [
        FnWorker(InMemoryMailbox(name), succeed, name=name, wait_time_seconds=0.05)
        for name in ("agent", "eval")
    ]
    loops: list[Loop] = list(workers)
    group = LoopGroup(loops, health_port=0, watchdog_timeout=30)
    group.start()
    try:
        address = group.health_address
        assert address is not None
        base = f"http://{address[0]}:{address[1]}"
        wait_for(lambda: group.ready())

        assert get(f"{base}/health/live") == (200, {"live": True})
        status, report = get(f"{base}/health/ready")
        assert status == 200
        assert [(r["name"], r["running"], r["stalled"]) for r in report["loops"]] == [
            ("agent", True, False),
            ("eval", True, False),
        ]
        assert get(f"{base}/nope")[0] == 404

        assert workers[1].shutdown(timeout=10)
        status, report = get(f"{base}/health/ready")
        assert (status, report["ready"], report["loops"][1]["running"]) == (503, False, False)
    finally:
        assert group.shutdown(timeout=10)
    assert group.health_address is None
    assert not any(worker.running for worker in workers)


def test_sigterm_shuts_the_group_down_gracefully() -> None:
    mailbox: InMemoryMailbox[str, None] = InMemoryMailbox("requests", clock=FakeClock())
    worker = FnWorker(mailbox, succeed, wait_time_seconds=0.05)
    group = LoopGroup([worker], shutdown_timeout=10)
    before = signal.getsignal(signal.SIGTERM)

    def terminate_when_running() -> None:
        wait_for(lambda: worker.running)
        mailbox.send("handled before the signal")
        wait_for(lambda: worker.stats.succeeded == 1)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_when_running)
    killer.start()
    group.run()  # returns once the signal was handled
    killer.join(10)

    assert not worker.running
    assert mailbox.approximate_count() == 0
    assert signal.getsignal(signal.SIGTERM) is before


def test_run_returns_when_every_loop_ended_and_records_errors() -> None:
    clock = FakeClock()
    broken = FakeLoop("broken", clock, error=RuntimeError("bad config"))
    group = LoopGroup([broken], clock=clock)

    group.run()

    assert list(group.errors) == ["broken"]
    assert group.status()["loops"][0]["error"] == "RuntimeError('bad config')"
    assert not group.ready()


def test_run_off_the_main_thread_installs_no_signal_handlers() -> None:
    clock = FakeClock()
    loop = FakeLoop("background", clock)
    group = LoopGroup([loop], clock=clock)
    before = signal.getsignal(signal.SIGTERM)
    runner = threading.Thread(target=group.run)
    runner.start()
    wait_for(lambda: loop.running)

    assert signal.getsignal(signal.SIGTERM) is before
    group.request_shutdown()
    runner.join(10)
    assert not runner.is_alive()


@pytest.mark.parametrize(
    ("names", "kwargs"),
    [([], {}), (["x", "x"], {}), (["x"], {"watchdog_timeout": 0})],
)
def test_bad_groups_are_rejected(names: list[str], kwargs: dict[str, Any]) -> None:
    clock = FakeClock()
    with pytest.raises(ConfigurationError):
        LoopGroup([FakeLoop(name, clock) for name in names], **kwargs)


def test_a_group_starts_once() -> None:
    clock = FakeClock()
    group = LoopGroup([FakeLoop("once", clock)], clock=clock)
    group.start()
    try:
        with pytest.raises(ConfigurationError, match="already started"):
            group.start()
    finally:
        assert group.shutdown(timeout=10)
