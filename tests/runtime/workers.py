"""Shared builders for the worker, DLQ and lifecycle tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from weakincentives.runtime.lease import WorkerHeartbeat
from weakincentives.runtime.mailbox import Mailbox, Message
from weakincentives.runtime.worker import MailboxWorker

Handler = Callable[[Message[Any, Any], WorkerHeartbeat], None]


class FnWorker(MailboxWorker[Any, Any]):
    """A worker whose `handle` is a function, recording every delivery it saw."""

    def __init__(self, requests: Mailbox[Any, Any] | None, fn: Handler, **kwargs: Any) -> None:
        super().__init__(requests=requests, **kwargs)
        self.fn = fn
        self.seen: list[tuple[Any, int]] = []
        self._seen_lock = threading.Lock()

    def handle(self, message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        with self._seen_lock:
            self.seen.append((message.body, message.delivery_count))
        self.fn(message, heartbeat)


def succeed(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
    del message, heartbeat


def fail_with(error: BaseException, *, times: int | None = None) -> Handler:
    """A handler that raises `error` (on the first `times` deliveries, or always)."""

    def handler(message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        del heartbeat
        if times is None or message.delivery_count <= times:
            raise error

    return handler


def run_in_thread(worker: MailboxWorker[Any, Any], **kwargs: Any) -> threading.Thread:
    thread = threading.Thread(target=worker.run, kwargs=kwargs, daemon=True)
    thread.start()
    return thread


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait (polling every few ms of real time) until `predicate()` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)
