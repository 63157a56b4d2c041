"""MailboxWorker: the run loop, settling, retries, leases, concurrency, shutdown."""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

import pytest

from tests.runtime.workers import FnWorker, fail_with, run_in_thread, succeed, wait_for
from weakincentives.clock import FakeClock
from weakincentives.errors import ConfigurationError, MailboxConnectionError
from weakincentives.runtime.dlq import RetryPolicy
from weakincentives.runtime.lease import LeaseExtenderConfig, WorkerHeartbeat
from weakincentives.runtime.mailbox import (
    CollectingMailbox,
    FakeMailbox,
    InMemoryMailbox,
    Message,
)
from weakincentives.runtime.worker import WorkerStats

NO_JITTER = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=10.0, jitter=0.0)


def mailbox_with(*bodies: Any, clock: FakeClock | None = None) -> InMemoryMailbox[Any, Any]:
    mailbox: InMemoryMailbox[Any, Any] = InMemoryMailbox("requests", clock=clock or FakeClock())
    for body in bodies:
        mailbox.send(body)
    return mailbox


def test_handles_and_acknowledges_every_message_in_order() -> None:
    mailbox = mailbox_with(*range(5))
    worker = FnWorker(mailbox, succeed)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.seen == [(n, 1) for n in range(5)]
    assert mailbox.approximate_count() == 0
    assert worker.stats == WorkerStats(received=5, succeeded=5)
    assert not worker.running


def test_handler_replies_reach_the_senders_mailbox() -> None:
    replies: CollectingMailbox[int, None] = CollectingMailbox("replies")
    mailbox: InMemoryMailbox[int, int] = InMemoryMailbox("requests")
    for n in (1, 2):
        mailbox.send(n, reply_to=replies)

    def double(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        message.reply(message.body * 2)

    FnWorker(mailbox, double).run(until_drained=True, wait_time_seconds=0)

    assert replies.sent == [2, 4]


def test_max_iterations_counts_receives() -> None:
    mailbox = mailbox_with("a", "b", "c")
    worker = FnWorker(mailbox, succeed)

    worker.run(max_iterations=2, wait_time_seconds=0)

    assert [body for body, _ in worker.seen] == ["a", "b"]
    assert mailbox.approximate_count() == 1


def test_failures_are_retried_after_an_exponential_backoff() -> None:
    clock = FakeClock()
    mailbox = mailbox_with("job", clock=clock)
    worker = FnWorker(mailbox, fail_with(RuntimeError("flaky"), times=2), retry=NO_JITTER)

    def drain() -> list[int]:
        worker.run(until_drained=True, wait_time_seconds=0)
        return [count for _, count in worker.seen]

    assert drain() == [1]
    clock.advance(0.99)
    assert drain() == [1]  # still backing off (1 s)
    clock.advance(0.01)
    assert drain() == [1, 2]
    clock.advance(1.99)
    assert drain() == [1, 2]  # second backoff is 2 s
    clock.advance(0.01)
    assert drain() == [1, 2, 3]
    assert mailbox.approximate_count() == 0
    assert worker.stats == WorkerStats(received=3, succeeded=1, failed=2, retried=2)


def test_exhausted_message_without_dlq_is_dropped_loudly(caplog: pytest.LogCaptureFixture) -> None:
    mailbox = mailbox_with("doomed")
    retry = RetryPolicy(max_attempts=2, base_delay=0.0, jitter=0.0)
    worker = FnWorker(mailbox, fail_with(ValueError("bad")), retry=retry)

    with caplog.at_level(logging.ERROR):
        worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.seen == [("doomed", 1), ("doomed", 2)]
    assert mailbox.approximate_count() == 0
    assert worker.stats.dropped == 1
    assert "no DLQPolicy is configured" in caplog.text


def test_a_handler_that_settles_its_message_is_left_alone() -> None:
    clock = FakeClock()
    mailbox = mailbox_with("later", clock=clock)

    def postpone(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        message.nack(visibility_timeout=5)

    worker = FnWorker(mailbox, postpone)
    worker.run(until_drained=True, wait_time_seconds=0)

    assert mailbox.approximate_count() == 1
    clock.advance(5)
    assert mailbox.receive()[0].delivery_count == 2


def test_a_handler_that_raises_after_acknowledging_is_not_retried() -> None:
    mailbox = mailbox_with("done")

    def ack_then_fail(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        message.acknowledge()
        raise RuntimeError("cleanup failed")

    worker = FnWorker(mailbox, ack_then_fail)
    worker.run(until_drained=True, wait_time_seconds=0)

    assert mailbox.approximate_count() == 0
    assert worker.stats == WorkerStats(received=1, failed=1)


def test_receive_errors_do_not_stop_the_worker() -> None:
    mailbox: FakeMailbox[str, None] = FakeMailbox(clock=FakeClock())
    mailbox.send("survivor")
    mailbox.fail_next_receive(MailboxConnectionError("blip"), times=2)
    worker = FnWorker(mailbox, succeed)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.seen == [("survivor", 1)]
    assert mailbox.calls["receive"] >= 3


def test_a_failed_acknowledge_leaves_the_message_for_redelivery() -> None:
    clock = FakeClock()
    mailbox: FakeMailbox[str, None] = FakeMailbox(clock=clock)
    mailbox.send("job")
    mailbox.fail_next_ack(MailboxConnectionError("lost"))
    worker = FnWorker(mailbox, succeed)

    worker.run(until_drained=True, wait_time_seconds=0, visibility_timeout=10)
    clock.advance(10)
    worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.seen == [("job", 1), ("job", 2)]
    assert worker.stats.settle_errors == 1
    assert mailbox.approximate_count() == 0


def test_heartbeats_record_progress_on_the_workers_clock() -> None:
    clock = FakeClock()
    mailbox = mailbox_with("slow", clock=clock)
    beats: list[float | None] = []

    def work(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        clock.advance(5)
        heartbeat()
        beats.append(heartbeat.last)

    worker = FnWorker(mailbox, work, clock=clock)
    assert worker.last_heartbeat is None
    worker.run(until_drained=True, wait_time_seconds=0)

    assert beats == [5.0]
    assert worker.last_heartbeat == 5.0


@pytest.mark.parametrize(
    ("lease", "settle_errors", "left"),
    [(LeaseExtenderConfig(interval=10, visibility_timeout=30), 0, 0), (None, 1, 1)],
    ids=["with-lease", "without-lease"],
)
def test_heartbeats_extend_the_lease_of_long_handlers(
    lease: LeaseExtenderConfig | None, settle_errors: int, left: int
) -> None:
    clock = FakeClock()
    mailbox = mailbox_with("long job", clock=clock)

    def work_for_50s(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        for _ in range(5):
            clock.advance(10)
            heartbeat()

    worker = FnWorker(mailbox, work_for_50s, clock=clock, lease=lease)
    worker.run(max_iterations=1, wait_time_seconds=0, visibility_timeout=30)

    assert worker.stats.settle_errors == settle_errors
    assert mailbox.approximate_count() == left


def test_max_concurrent_handlers_run_in_parallel_but_never_more() -> None:
    mailbox = mailbox_with(*range(7))
    barrier = threading.Barrier(3, timeout=10)
    lock = threading.Lock()
    active = [0, 0]  # now, most

    def work(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        with lock:
            active[0] += 1
            active[1] = max(active)
        if message.body < 3:
            barrier.wait()  # the first three can only pass together
        with lock:
            active[0] -= 1

    worker = FnWorker(mailbox, work, max_concurrent=3)
    worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.stats == WorkerStats(received=7, succeeded=7)
    assert active[1] == 3


def gated(gate: threading.Event, blocked: set[int]) -> Any:
    def work(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        if message.body in blocked:
            assert gate.wait(10)

    return work


def test_shutdown_lets_running_handlers_finish_and_leaves_the_rest_queued() -> None:
    mailbox = mailbox_with(*range(6))
    gate = threading.Event()
    first = FnWorker(mailbox, gated(gate, {0, 1}), max_concurrent=2)
    thread = run_in_thread(first, wait_time_seconds=0.05)
    wait_for(lambda: len(first.seen) == 2)

    results: list[bool] = []
    stopping = threading.Thread(target=lambda: results.append(first.shutdown(timeout=10)))
    stopping.start()
    gate.set()
    stopping.join(10)
    thread.join(10)

    second = FnWorker(mailbox, succeed)
    second.run(until_drained=True, wait_time_seconds=0)
    assert results == [True]
    handled = [body for body, _ in first.seen + second.seen]
    assert sorted(handled) == list(range(6))  # each message handled exactly once
    assert mailbox.approximate_count() == 0


def test_shutdown_returns_stuck_messages_and_a_restart_handles_each_once() -> None:
    mailbox = mailbox_with(*range(4))
    gate = threading.Event()
    stuck = FnWorker(mailbox, gated(gate, {0, 1}), max_concurrent=2)
    thread = run_in_thread(stuck, wait_time_seconds=0.05, visibility_timeout=60)
    wait_for(lambda: len(stuck.seen) == 2)

    assert stuck.shutdown(timeout=0.05) is False
    assert stuck.stats.returned == 2
    restarted = FnWorker(mailbox, succeed)
    restarted.run(until_drained=True, wait_time_seconds=0)
    gate.set()  # the stuck handlers finish late; their messages are no longer theirs
    thread.join(10)

    assert sorted(body for body, _ in restarted.seen) == [0, 1, 2, 3]
    assert mailbox.approximate_count() == 0
    assert stuck.stats.settle_errors == 0
    assert not stuck.running


class ShutdownDuringReceive(FakeMailbox[Any, Any]):
    """Asks its worker to shut down right after handing it a batch."""

    worker: FnWorker | None = None

    def receive(self, **kwargs: Any) -> Any:
        batch = super().receive(**kwargs)
        if self.worker is not None:
            self.worker.shutdown(timeout=0)
        return batch


def test_messages_received_as_a_shutdown_arrives_go_back_unhandled() -> None:
    mailbox = ShutdownDuringReceive(clock=FakeClock())
    for n in range(3):
        mailbox.send(n)
    worker = FnWorker(mailbox, succeed, max_concurrent=3)
    mailbox.worker = worker

    worker.run(wait_time_seconds=0)

    assert worker.seen == []
    assert worker.stats == WorkerStats(received=3, returned=3)
    mailbox.worker = None
    assert [m.delivery_count for m in mailbox.receive(max_messages=10)] == [2, 2, 2]


def test_shutdown_before_run_makes_that_run_return_at_once() -> None:
    mailbox = mailbox_with("kept")
    worker = FnWorker(mailbox, succeed)

    assert worker.shutdown(timeout=1) is True
    worker.run(wait_time_seconds=0)
    assert worker.seen == []
    worker.run(until_drained=True, wait_time_seconds=0)  # the request was used up
    assert worker.seen == [("kept", 1)]


def test_closing_the_mailbox_stops_the_worker() -> None:
    mailbox = mailbox_with()
    worker = FnWorker(mailbox, succeed)
    thread = run_in_thread(worker, wait_time_seconds=0.05)
    wait_for(lambda: worker.running)

    mailbox.close()
    thread.join(10)

    assert not thread.is_alive()


def test_run_needs_a_mailbox_and_cannot_run_twice() -> None:
    with pytest.raises(ConfigurationError, match="no requests mailbox"):
        FnWorker(None, succeed).run()
    worker = FnWorker(mailbox_with(), succeed)
    thread = run_in_thread(worker, wait_time_seconds=0.05)
    wait_for(lambda: worker.running)
    try:
        with pytest.raises(ConfigurationError, match="already running"):
            worker.run()
    finally:
        assert worker.shutdown(timeout=10)
        thread.join(10)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_concurrent": 0}, {"visibility_timeout": -1.0}, {"wait_time_seconds": 30.0}],
)
def test_bad_worker_settings_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # ConfigurationError or MailboxArgumentError
        FnWorker(mailbox_with(), succeed, **kwargs)


def test_name_defaults_to_class_and_mailbox() -> None:
    assert FnWorker(mailbox_with(), succeed).name == "FnWorker(requests)"
    assert FnWorker(None, succeed, name="agent").name == "agent"


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=0.0)

    assert [policy.backoff(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.backoff(10_000) == 5.0


def test_jitter_shortens_waits_reproducibly_with_a_seeded_rng() -> None:
    def waits(seed: int) -> list[float]:
        policy = RetryPolicy(base_delay=8.0, max_delay=8.0, jitter=0.5, rng=random.Random(seed))
        return [policy.backoff(1) for _ in range(50)]

    assert waits(7) == waits(7)
    assert all(4.0 <= w <= 8.0 for w in waits(7))
    assert len(set(waits(7))) > 40


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"base_delay": -1.0},
        {"base_delay": 10.0, "max_delay": 5.0},
        {"jitter": 1.5},
    ],
)
def test_bad_retry_policies_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**kwargs)


class RecordingMailbox(InMemoryMailbox[Any, Any]):
    """Records which thread made each receive; can run a hook on the handlers' receives."""

    def __init__(self, name: str) -> None:
        super().__init__(name, clock=FakeClock())
        self.receivers: list[int] = []
        self.on_refill: Any = None
        self.runner: threading.Thread | None = None  # the thread that runs the worker

    def receive(self, **kwargs: Any) -> Any:
        self.receivers.append(threading.get_ident())
        got = super().receive(**kwargs)
        if got and self.on_refill is not None and threading.current_thread() is not self.runner:
            self.on_refill()
        return got


def test_a_handler_thread_takes_the_next_message_itself() -> None:
    mailbox = RecordingMailbox("requests")
    for n in range(20):
        mailbox.send(n)
    mailbox.runner = threading.current_thread()
    worker = FnWorker(mailbox, succeed, max_concurrent=2)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert sorted(body for body, _ in worker.seen) == list(range(20))
    assert worker.stats == WorkerStats(received=20, succeeded=20)
    # The run loop receives the first batch; the handlers' threads pull the rest.
    by_handlers = [t for t in mailbox.receivers if t != threading.get_ident()]
    assert len(by_handlers) >= 18


def test_a_message_taken_by_a_handler_while_stopping_goes_back_untouched() -> None:
    mailbox = RecordingMailbox("requests")
    for body in ("first", "second"):
        mailbox.send(body)
    mailbox.runner = threading.current_thread()
    worker = FnWorker(mailbox, succeed, max_concurrent=1)

    def first_only(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        del message, heartbeat
        mailbox.on_refill = lambda: worker.shutdown(timeout=0)  # stop as "second" arrives

    worker.fn = first_only
    worker.run(wait_time_seconds=0)

    assert worker.seen == [("first", 1)]
    assert worker.stats.returned == 1
    assert mailbox.approximate_count() == 1  # "second" is back in the queue
    [again] = mailbox.receive(max_messages=1, wait_time_seconds=0)
    assert again.body == "second"
