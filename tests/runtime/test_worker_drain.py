"""A drained run (`until_drained=True`) ends when nothing is left, and not before."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.runtime.workers import FnWorker, wait_for
from weakincentives.clock import FakeClock
from weakincentives.runtime import worker as worker_module
from weakincentives.runtime.dlq import RetryPolicy
from weakincentives.runtime.lease import WorkerHeartbeat
from weakincentives.runtime.mailbox import InMemoryMailbox, Message

AT_ONCE = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0, jitter=0.0)
"""Retries nacked with no backoff: visible again at once."""


def test_a_retry_is_taken_at_once_while_other_handlers_still_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With a receive budget no handler takes its next message itself, so the receiving
    # thread must be woken by the freed slot: its periodic poll is made too long to help.
    monkeypatch.setattr(worker_module, "_POLL_SLICE", 30.0)
    mailbox: InMemoryMailbox[str, Any] = InMemoryMailbox("requests", clock=FakeClock())
    mailbox.send("fail once")
    mailbox.send("slow")
    retried = threading.Event()
    slow_saw_retry: list[bool] = []

    def handle(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        del heartbeat
        if message.body == "slow":
            slow_saw_retry.append(retried.wait(5.0))
        elif message.delivery_count == 1:
            raise RuntimeError("transient")
        else:
            retried.set()

    worker = FnWorker(mailbox, handle, max_concurrent=3, retry=AT_ONCE)
    worker.run(until_drained=True, max_iterations=1000, wait_time_seconds=0)

    assert slow_saw_retry == [True]
    assert worker.stats.succeeded == 2
    assert mailbox.approximate_count() == 0


class EmptyReceiveOutlastsAHandler(InMemoryMailbox[Any, Any]):
    """An empty receive by the run loop returns only after the worker's handlers ended.

    As on a remote backend, where an empty receive is a round trip that a quick
    handler may outlast (and nack a retry meanwhile).
    """

    def __init__(self) -> None:
        super().__init__("requests", clock=FakeClock())
        self.runner: threading.Thread | None = None
        self.worker: FnWorker | None = None
        self.empty_seen = threading.Event()

    def receive(self, **kwargs: Any) -> Any:
        got = super().receive(**kwargs)
        worker = self.worker
        if not got and threading.current_thread() is self.runner and worker is not None:
            self.empty_seen.set()
            wait_for(lambda: not worker._inflight)  # white box: the handler released it
        return got


@pytest.mark.parametrize("max_iterations", [None, 1000])
def test_a_retry_nacked_during_the_last_empty_receive_is_not_left_behind(
    max_iterations: int | None,
) -> None:
    mailbox = EmptyReceiveOutlastsAHandler()
    mailbox.runner = threading.current_thread()
    mailbox.send("a")

    def handle(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        del heartbeat
        if message.delivery_count == 1:
            mailbox.empty_seen.wait(5.0)  # fail while the run loop's receive is out
            raise RuntimeError("transient")

    worker = FnWorker(mailbox, handle, max_concurrent=2, retry=AT_ONCE)
    mailbox.worker = worker
    worker.run(until_drained=True, max_iterations=max_iterations, wait_time_seconds=0)

    assert mailbox.approximate_count() == 0
    assert worker.stats.succeeded == 1
    assert [count for _, count in worker.seen] == [1, 2]
