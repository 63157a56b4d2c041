"""MailboxWorker with async handlers: tasks on one event loop thread (`handles_async`).

The same settling rules as the thread pool path (ack, retry with backoff, dead-letter,
undecodable bodies), bounded concurrency with real overlap, blocking work offloaded to
the loop's pool, and a shutdown that returns stuck messages and cancels their handlers.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.runtime.workers import run_in_thread, wait_for
from weakincentives.clock import FakeClock
from weakincentives.errors import MailboxConnectionError
from weakincentives.runtime._loop_thread import LoopThread
from weakincentives.runtime.dlq import DeadLetter, DLQPolicy, RetryPolicy
from weakincentives.runtime.lease import WorkerHeartbeat
from weakincentives.runtime.mailbox import FakeMailbox, InMemoryMailbox, Message
from weakincentives.runtime.worker import MailboxWorker, WorkerStats

AsyncHandler = Callable[[Message[Any, Any], WorkerHeartbeat], Awaitable[None]]

NO_JITTER = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=10.0, jitter=0.0)
QUICK = RetryPolicy(max_attempts=100, base_delay=0.0, jitter=0.0)


class AsyncFnWorker(MailboxWorker[Any, Any]):
    """A worker whose `handle_async` awaits a function, recording every delivery it saw."""

    def __init__(
        self, requests: Any, fn: AsyncHandler, *, name: str = "async-worker", **kwargs: Any
    ) -> None:
        super().__init__(requests=requests, name=name, **kwargs)
        self.fn = fn
        self.seen: list[tuple[Any, int]] = []
        self.threads: set[str] = set()
        self._seen_lock = threading.Lock()

    @property
    def handles_async(self) -> bool:
        return True

    async def handle_async(self, message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        with self._seen_lock:
            self.seen.append((message.body, message.delivery_count))
            self.threads.add(threading.current_thread().name)
        await self.fn(message, heartbeat)


async def succeed(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
    await asyncio.sleep(0)


def fail_with(error: Exception, *, times: int | None = None) -> AsyncHandler:
    """An async handler that raises `error` (on the first `times` deliveries, or always)."""

    async def handler(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        await asyncio.sleep(0)
        if times is None or message.delivery_count <= times:
            raise error

    return handler


def mailbox_with(*bodies: Any, clock: FakeClock | None = None) -> InMemoryMailbox[Any, Any]:
    mailbox: InMemoryMailbox[Any, Any] = InMemoryMailbox("requests", clock=clock or FakeClock())
    for body in bodies:
        mailbox.send(body)
    return mailbox


def dead_letters(dead: InMemoryMailbox[DeadLetter[Any], None]) -> list[DeadLetter[Any]]:
    return [m.body for m in dead.receive(max_messages=10)]


def threads_of(worker: MailboxWorker[Any, Any]) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(worker.name)]


def test_messages_are_handled_on_the_loop_thread_and_acknowledged() -> None:
    mailbox = mailbox_with(*range(5))
    worker = AsyncFnWorker(mailbox, succeed)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.seen == [(n, 1) for n in range(5)]
    assert worker.threads == {"async-worker"}  # the LoopThread, not the caller's thread
    assert mailbox.approximate_count() == 0
    assert worker.stats == WorkerStats(received=5, succeeded=5)
    assert not worker.running


def test_max_iterations_counts_the_receives_of_the_run_loop() -> None:
    mailbox = mailbox_with("a", "b", "c")
    worker = AsyncFnWorker(mailbox, succeed)

    worker.run(max_iterations=2, wait_time_seconds=0)

    assert [body for body, _ in worker.seen] == ["a", "b"]
    assert mailbox.approximate_count() == 1


def test_failures_are_retried_with_backoff_then_dead_lettered() -> None:
    clock = FakeClock()
    mailbox = mailbox_with("job", clock=clock)
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead", clock=clock)
    worker = AsyncFnWorker(
        mailbox,
        fail_with(RuntimeError("flaky")),
        retry=NO_JITTER,
        dlq=DLQPolicy(dead, max_deliveries=3),
        clock=clock,
    )

    def drain() -> list[int]:
        worker.run(until_drained=True, wait_time_seconds=0)
        return [count for _, count in worker.seen]

    assert drain() == [1]
    clock.advance(0.99)
    assert drain() == [1]  # still backing off (1 s)
    clock.advance(0.01)
    assert drain() == [1, 2]
    clock.advance(2.0)  # second backoff is 2 s
    assert drain() == [1, 2, 3]

    [letter] = dead_letters(dead)
    assert (letter.reason, letter.delivery_count, letter.body) == ("exhausted", 3, "job")
    assert letter.error_type == "builtins.RuntimeError" and letter.error_message == "flaky"
    assert mailbox.approximate_count() == 0
    assert worker.stats == WorkerStats(received=3, failed=3, retried=2, dead_lettered=1)


@pytest.mark.parametrize(
    ("policy", "handler", "deliveries", "letters"),
    [
        ({"dead_letter_on": (KeyError,)}, fail_with(KeyError("x")), [1], [("non_retryable", 1)]),
        (
            {"max_deliveries": 2, "never_dead_letter": (ConnectionError,)},
            fail_with(ConnectionError("429"), times=4),
            [1, 2, 3, 4, 5],
            [],
        ),
    ],
    ids=["dead-letter-on", "never-dead-letter"],
)
def test_error_types_decide_between_dead_letter_at_once_and_retry_forever(
    policy: dict[str, Any],
    handler: AsyncHandler,
    deliveries: list[int],
    letters: list[tuple[str, int]],
) -> None:
    mailbox = mailbox_with("x")
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead")
    worker = AsyncFnWorker(mailbox, handler, retry=QUICK, dlq=DLQPolicy(dead, **policy))

    worker.run(until_drained=True, wait_time_seconds=0)

    assert [count for _, count in worker.seen] == deliveries
    assert [(d.reason, d.delivery_count) for d in dead_letters(dead)] == letters
    assert mailbox.approximate_count() == 0


def test_an_undecodable_body_is_dead_lettered_and_the_worker_goes_on() -> None:
    requests: FakeMailbox[Any, Any] = FakeMailbox("requests", clock=FakeClock())
    requests.send_undecodable(b'{"sample": \xff', reason="invalid UTF-8 at byte 11")
    requests.send("good")
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead")
    worker = AsyncFnWorker(requests, succeed, dlq=DLQPolicy(dead))

    worker.run(until_drained=True, wait_time_seconds=0)

    [letter] = dead_letters(dead)
    assert (letter.reason, letter.body, letter.delivery_count) == ("undecodable", None, 1)
    assert "invalid UTF-8 at byte 11" in letter.error_message
    assert worker.seen == [("good", 1)]
    assert worker.stats == WorkerStats(received=2, succeeded=1, failed=1, dead_lettered=1)
    assert requests.approximate_count() == 0


@pytest.mark.parametrize("max_concurrent", [1, 3, 8])
def test_up_to_max_concurrent_handlers_overlap_and_never_more(max_concurrent: int) -> None:
    mailbox = mailbox_with(*range(2 * max_concurrent + 1))
    all_in = asyncio.Event()  # used only on the worker's loop
    active = [0, 0]  # now, most

    async def work(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        active[0] += 1  # on the loop thread only: no lock needed
        active[1] = max(active)
        if active[0] == max_concurrent:
            all_in.set()
        try:
            # The first `max_concurrent` handlers can only pass together.
            await asyncio.wait_for(all_in.wait(), timeout=5)
        finally:
            active[0] -= 1

    worker = AsyncFnWorker(mailbox, work, max_concurrent=max_concurrent)
    worker.run(until_drained=True, wait_time_seconds=0)

    n = 2 * max_concurrent + 1
    assert worker.stats == WorkerStats(received=n, succeeded=n)
    assert active == [0, max_concurrent]
    assert worker.threads == {"async-worker"}


def test_blocking_work_runs_in_the_loops_pool_of_max_concurrent_threads() -> None:
    mailbox = mailbox_with(*range(6))
    barrier = threading.Barrier(3, timeout=5)  # passes only if three calls run at once
    names: list[str] = []

    def blocking() -> str:
        barrier.wait()
        return threading.current_thread().name

    async def offload(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        names.append(await asyncio.to_thread(blocking))

    worker = AsyncFnWorker(mailbox, offload, max_concurrent=3)
    worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.stats == WorkerStats(received=6, succeeded=6)
    assert len(names) == 6 and all(n.startswith("async-worker-blocking") for n in names)


def test_heartbeats_from_async_handlers_reach_the_worker() -> None:
    clock = FakeClock()
    mailbox = mailbox_with("slow", clock=clock)

    async def work(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        clock.advance(5)
        heartbeat()

    worker = AsyncFnWorker(mailbox, work, clock=clock)
    worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.last_heartbeat == 5.0


class RecordingMailbox(InMemoryMailbox[Any, Any]):
    """Records the thread of each receive that got messages."""

    def __init__(self) -> None:
        super().__init__("requests", clock=FakeClock())
        self.receivers: list[str] = []

    def receive(self, **kwargs: Any) -> Any:
        got = super().receive(**kwargs)
        if got:
            self.receivers.append(threading.current_thread().name)
        return got


def test_a_finished_task_refills_its_slot_itself() -> None:
    mailbox = RecordingMailbox()
    for n in range(20):
        mailbox.send(n)
    worker = AsyncFnWorker(mailbox, succeed, max_concurrent=2)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert sorted(body for body, _ in worker.seen) == list(range(20))
    # The run loop receives the first batch; the tasks, on the loop thread, take the rest.
    assert mailbox.receivers.count("async-worker") >= 18


def test_until_drained_returns_at_once_on_an_empty_mailbox_and_waits_for_handlers() -> None:
    empty = AsyncFnWorker(mailbox_with(), succeed)
    empty.run(until_drained=True, wait_time_seconds=0)
    assert empty.stats == WorkerStats()

    finished: list[int] = []

    async def slow(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        await asyncio.sleep(0.01)  # the run loop meets an empty queue meanwhile
        finished.append(message.body)

    worker = AsyncFnWorker(mailbox_with(1, 2), slow, max_concurrent=2)
    worker.run(until_drained=True, wait_time_seconds=0)
    assert sorted(finished) == [1, 2]
    assert worker.stats == WorkerStats(received=2, succeeded=2)


def test_shutdown_lets_running_handlers_finish_and_leaves_the_rest_queued() -> None:
    mailbox = mailbox_with(*range(6))
    gate = threading.Event()

    async def gated(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        if message.body in (0, 1):
            assert await asyncio.to_thread(gate.wait, 10)

    first = AsyncFnWorker(mailbox, gated, max_concurrent=2)
    thread = run_in_thread(first, wait_time_seconds=0.05)
    wait_for(lambda: len(first.seen) == 2)

    stopped: list[bool] = []
    stopping = threading.Thread(target=lambda: stopped.append(first.shutdown(timeout=10)))
    stopping.start()
    wait_for(first._stop.is_set)  # open the gate only once stopping
    gate.set()
    stopping.join(10)
    thread.join(10)

    second = AsyncFnWorker(mailbox, succeed)
    second.run(until_drained=True, wait_time_seconds=0)
    assert stopped == [True]
    assert sorted(body for body, _ in second.seen) == [2, 3, 4, 5]
    handled = [body for body, _ in first.seen + second.seen]
    assert sorted(handled) == list(range(6))  # each message handled exactly once
    assert mailbox.approximate_count() == 0


def test_shutdown_returns_stuck_messages_and_cancels_their_handlers() -> None:
    mailbox = mailbox_with(*range(4))
    cancelled: list[int] = []
    finished: list[int] = []

    async def stuck(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            cancelled.append(message.body)
            raise
        finally:
            finished.append(message.body)

    worker = AsyncFnWorker(mailbox, stuck, max_concurrent=2)
    thread = run_in_thread(worker, wait_time_seconds=0.05, visibility_timeout=60)
    wait_for(lambda: len(worker.seen) == 2)

    assert worker.shutdown(timeout=0.05) is False
    thread.join(5)

    assert not thread.is_alive() and not worker.running
    # run() returned only after the loop cancelled the abandoned handlers.
    assert sorted(cancelled) == [0, 1] and sorted(finished) == [0, 1]
    assert worker.stats == WorkerStats(received=2, returned=2)
    # The stuck messages were nacked back (visible at once on the mailbox's fake clock).
    again = {m.body: m.delivery_count for m in mailbox.receive(max_messages=10)}
    assert again == {0: 2, 1: 2, 2: 1, 3: 1}
    assert threads_of(worker) == []  # no blocking pool thread was ever started


def test_no_worker_thread_outlives_run() -> None:
    mailbox = mailbox_with(*range(8))

    async def offload(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        await asyncio.to_thread(lambda: None)

    worker = AsyncFnWorker(mailbox, offload, max_concurrent=4, name="leak-check")
    worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.stats.succeeded == 8
    assert "leak-check" not in threads_of(worker)  # the loop thread is joined by run()
    # Its blocking pool is shut down without a join: idle threads exit a moment later.
    wait_for(lambda: threads_of(worker) == [], timeout=2)


def test_an_abandoned_handler_blocked_in_a_thread_does_not_hold_up_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mailbox = mailbox_with("stuck")
    gate = threading.Event()
    cancelled: list[str] = []

    async def blocked(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        try:
            await asyncio.to_thread(gate.wait, 10)
        except asyncio.CancelledError:
            cancelled.append(message.body)
            raise

    worker = AsyncFnWorker(mailbox, blocked, name="blocked-worker")
    thread = run_in_thread(worker, wait_time_seconds=0.05, visibility_timeout=60)
    wait_for(lambda: len(worker.seen) == 1)

    assert worker.shutdown(timeout=0.05) is False
    thread.join(5)
    # run() returned while the blocking call still runs: the task was cancelled anyway.
    assert not thread.is_alive() and cancelled == ["stuck"]
    assert [t.startswith("blocked-worker-blocking") for t in threads_of(worker)] == [True]
    with caplog.at_level(logging.WARNING):
        gate.set()  # the orphaned call returns to a closed loop: nothing may break
        wait_for(lambda: threads_of(worker) == [], timeout=2)
    assert caplog.records == []
    assert [m.delivery_count for m in mailbox.receive(max_messages=10)] == [2]


def test_a_stray_cancelled_error_from_a_handler_is_a_failure_not_a_lost_slot() -> None:
    mailbox = mailbox_with(0, 1, 2)

    async def awaits_a_cancelled_task(message: Message[Any, Any], hb: WorkerHeartbeat) -> None:
        if message.body == 0 and message.delivery_count == 1:
            inner = asyncio.get_running_loop().create_task(asyncio.sleep(10))
            inner.cancel()
            await inner  # raises CancelledError, though this handler was not cancelled

    worker = AsyncFnWorker(mailbox, awaits_a_cancelled_task, retry=QUICK)
    thread = run_in_thread(worker, until_drained=True, wait_time_seconds=0)
    try:
        thread.join(0.5)  # a few ms when it works
        assert not thread.is_alive(), "run() hangs: the failed handler's slot was never freed"
        assert sorted(worker.seen) == [(0, 1), (0, 2), (1, 1), (2, 1)]
        assert mailbox.approximate_count() == 0
    finally:
        worker.shutdown(timeout=0.1)
        thread.join(5)


# -- a run's start ---------------------------------------------------------------------


def spy_on_spawn(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record how many tasks each hand-over to the event loop carries."""
    sizes: list[int] = []
    spawn = LoopThread.spawn

    def recording(self: LoopThread, factories: Any) -> None:
        sizes.append(len(factories))
        spawn(self, factories)

    monkeypatch.setattr(LoopThread, "spawn", recording)
    return sizes


def test_a_start_fills_every_free_slot_in_one_hand_over(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = spy_on_spawn(monkeypatch)
    mailbox = mailbox_with(*range(25))  # more than one receive (MAX_MESSAGES) can take
    worker = AsyncFnWorker(mailbox, succeed, max_concurrent=25)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert sizes == [25]
    assert worker.stats == WorkerStats(received=25, succeeded=25)


def test_a_receive_failing_while_filling_slots_hands_over_what_it_got(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sizes = spy_on_spawn(monkeypatch)
    mailbox = mailbox_with(*range(25))
    receive, calls = mailbox.receive, [0]

    def flaky_receive(**kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:  # the first non-blocking top-up
            raise MailboxConnectionError("redis went away")
        return receive(**kwargs)

    monkeypatch.setattr(mailbox, "receive", flaky_receive)
    worker = AsyncFnWorker(mailbox, succeed, max_concurrent=25)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert sizes[0] == 10 and sum(sizes) <= 25
    assert worker.stats.succeeded == 25 and mailbox.approximate_count() == 0
