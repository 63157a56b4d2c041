"""`MailboxWorker`: the receive-handle-settle loop under `AgentLoop` and `EvalLoop`.

A subclass implements `handle(message, heartbeat)`; the worker receives messages,
runs up to `max_concurrent` handlers at once, and settles each message by what its
handler did: returned means acknowledged; raised means retried with backoff (a nack
whose visibility timeout is the backoff), dead-lettered, or dropped, by the
`RetryPolicy` and `DLQPolicy`. Undecodable messages go straight to the dead-letter
queue. Delivery is at-least-once, so handlers must be idempotent (EvalLoop keys
results by request id).

A subclass whose work waits on I/O may implement `handle_async` instead and return
True from `handles_async`: its handlers then run as tasks on one event loop in a thread
of the worker's own (`LoopThread`) rather than a thread each. With 200 handlers in
flight that matters on CPython: every thread that wakes from a wait needs the GIL, and
200 threads spend more time handing it over than working. Measured on two cores, 200
samples in flight, each waiting 100 ms: a bare thread pool reaches 0.91-0.93 of the ideal
throughput, `EvalLoop` on this path 0.952-0.96, plain asyncio with no mailbox 0.97-0.98.
Settling (acknowledge, nack, dead-letter) and the receive that refills a slot then run on
the loop's thread too: quick for an in-memory mailbox, one round trip for Redis.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Generic, TypeVar

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import (
    ConfigurationError,
    MailboxClosedError,
    MailboxConnectionError,
    MailboxError,
)
from weakincentives.runtime._loop_thread import LoopThread
from weakincentives.runtime._settling import Counter, Delivery, Settling
from weakincentives.runtime.dlq import (
    DeadLetter,
    DLQPolicy,
    RetryPolicy,
)
from weakincentives.runtime.lease import LeaseExtender, LeaseExtenderConfig, WorkerHeartbeat
from weakincentives.runtime.mailbox import (
    MAX_MESSAGES,
    MAX_WAIT_SECONDS,
    Mailbox,
    Message,
    check_timeout,
)
from weakincentives.runtime.outage import BACKEND_OUTAGE
from weakincentives.runtime.threads import WorkerThreads

__all__ = ["MailboxWorker", "WorkerStats"]

T = TypeVar("T")
R = TypeVar("R")

_log = logging.getLogger(__name__)

_POLL_SLICE = 0.5
"""Longest single receive: bounds how long `shutdown` waits for an idle long poll."""
_IDLE_PAUSE = 0.05
"""Pause after an empty non-blocking poll (or a receive error), so idling is not a spin."""
_MAX_RECEIVE_BACKOFF = 2.0
"""Longest pause between two failing receives: the backend (Redis) may be down for a
while; the worker waits for it, doubling its pause from `_IDLE_PAUSE` up to this."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerStats:
    """What a worker did with the messages it received (a snapshot)."""

    received: int = 0
    """Deliveries received."""
    succeeded: int = 0
    """Deliveries whose handler returned."""
    failed: int = 0
    """Deliveries whose handler raised (or whose body could not be decoded)."""
    retried: int = 0
    """Failed deliveries nacked for a retry."""
    dead_lettered: int = 0
    """Messages sent to the dead-letter queue."""
    dropped: int = 0
    """Messages given up on without a dead-letter queue (logged as errors)."""
    returned: int = 0
    """Deliveries nacked back unhandled or unfinished because of a shutdown."""
    settle_errors: int = 0
    """Acknowledges or nacks that failed (stale handle, backend error)."""
    receive_errors: int = 0
    """Receives that failed (backend unreachable); the worker backs off and retries."""


class MailboxWorker(Generic[T, R]):
    """Receives messages from `requests` and hands each to `handle`.

    Subclass it and implement `handle`. `run()` blocks (run it in a thread, or hand
    several workers to a `LoopGroup`); `shutdown()` stops it from another thread.

    Args:
        requests: The mailbox to receive from (None: the worker is not runnable, which
            suits loops that are only driven directly).
        name: Name in logs and health reports (default: class and mailbox name).
        clock: Source of time for heartbeats and leases.
        max_concurrent: Handlers running at once; the worker receives only when one of
            these slots is free, so it never holds more messages than it can work on.
        retry: Retry limit and backoff for failed deliveries.
        dlq: Where given-up messages go (None: they are dropped with an error log).
        lease: Heartbeat-driven visibility extension (None: no extension).
        visibility_timeout: Default visibility timeout of each receive.
        wait_time_seconds: Default long poll of each receive.
    """

    def __init__(
        self,
        *,
        requests: Mailbox[T, R] | None,
        name: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        max_concurrent: int = 1,
        retry: RetryPolicy | None = None,
        dlq: DLQPolicy[T] | None = None,
        lease: LeaseExtenderConfig | None = None,
        visibility_timeout: float = 300.0,
        wait_time_seconds: float = MAX_WAIT_SECONDS,
    ) -> None:
        if max_concurrent < 1:
            raise ConfigurationError(f"max_concurrent must be >= 1, got {max_concurrent}")
        check_timeout("visibility_timeout", visibility_timeout)
        check_timeout("wait_time_seconds", wait_time_seconds, maximum=MAX_WAIT_SECONDS)
        self._requests = requests
        mailbox_name = requests.name if requests is not None else "no mailbox"
        self._name = name or f"{type(self).__name__}({mailbox_name})"
        self._clock = clock
        self._max_concurrent = max_concurrent
        self._retry = retry or RetryPolicy()
        self._dlq = dlq
        self._lease = lease
        self._visibility_timeout = visibility_timeout
        self._wait_time_seconds = wait_time_seconds
        # `with self._lock` is a C-level enter (the Condition's own is Python code, paid
        # several times per message). Two conditions on that lock: `_cond` for a free
        # slot (and the end of `run`), `_idle` for no handler left. A drained run waits
        # on `_idle` only: with one condition it would wake at every slot released, 200
        # GIL hand-overs while the last 200 samples finish, each delaying the next.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._running = False
        self._inflight: dict[str, Delivery] = {}
        self._released = 0  # slots freed so far (see `_wait_for_idle`)
        # How a pool thread takes its next message itself (set by `run`; None: it doesn't).
        self._refill: Callable[[], Sequence[Message[T, R]]] | None = None
        self._last_heartbeat: float | None = None
        self._counts = {counter.name: 0 for counter in fields(WorkerStats)}
        self._settling = Settling(
            name=self._name, source=requests.name if requests is not None else self._name,
            retry=self._retry, dlq=dlq, clock=clock, count=self._count,
            on_give_up=self.on_dead_letter,
        )  # fmt: skip

    # -- what subclasses implement -----------------------------------------------------

    def handle(self, message: Message[T, R], heartbeat: WorkerHeartbeat) -> None:
        """Process one message. Subclasses implement this.

        Return to have the message acknowledged; raise to have it retried or
        dead-lettered. A handler may settle the message itself (`message.nack(...)`);
        the worker then leaves it alone. Call `heartbeat()` while working: it keeps the
        worker healthy and, with a lease configured, the message invisible.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement handle()")

    def on_dead_letter(self, message: Message[T, R], letter: DeadLetter[T]) -> None:
        """Called for each message given up on, before it is dead-lettered and acknowledged.

        Given up on means dead-lettered, or dropped when there is no `DLQPolicy`:
        undecodable, failed with an error not worth retrying, or failed on every
        delivery allowed. The default does nothing; `EvalLoop` answers the request's
        `reply_to` with an error result (kind `dead_letter`), so the sender counts it.
        Raise a `MailboxError` (a reply that could not be sent) to have the message
        returned to the queue and given up on again later.
        """
        del message, letter

    @property
    def handles_async(self) -> bool:
        """Whether messages go to `handle_async` (tasks on one event loop) (default False)."""
        return False

    async def handle_async(self, message: Message[T, R], heartbeat: WorkerHeartbeat) -> None:
        """`handle` as a coroutine, used when `handles_async` is True.

        It runs on the worker's event loop thread, next to the other handlers: await
        what waits, and hand blocking work to `asyncio.to_thread` (the loop has a pool of
        `max_concurrent` threads for it). A shutdown that gives up on a running handler
        cancels it.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement handle_async()")

    # -- state -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The worker's name in logs and health reports."""
        return self._name

    @property
    def requests(self) -> Mailbox[T, R] | None:
        """The mailbox this worker receives from."""
        return self._requests

    @property
    def running(self) -> bool:
        """True while `run()` is executing."""
        return self._running

    @property
    def last_heartbeat(self) -> float | None:
        """Monotonic time of the latest loop iteration or handler heartbeat (None: never)."""
        return self._last_heartbeat

    @property
    def stats(self) -> WorkerStats:
        """Counts of what the worker did so far (a snapshot)."""
        with self._lock:
            return WorkerStats(**self._counts)

    def _count(self, counter: Counter, n: int = 1) -> None:
        with self._lock:
            self._counts[counter] += n

    def _beat(self, now: float | None = None) -> None:
        self._last_heartbeat = self._clock.monotonic() if now is None else now

    # -- the loop ----------------------------------------------------------------------

    def run(
        self,
        *,
        max_iterations: int | None = None,
        until_drained: bool = False,
        wait_time_seconds: float | None = None,
        visibility_timeout: float | None = None,
    ) -> None:
        """Receive and handle messages until stopped; wait for running handlers to end.

        Stops when `shutdown()` is called (also when it was called before `run()`
        started), when the mailbox is closed, after `max_iterations` receives (empty
        ones included), or, with `until_drained`, at the first empty receive while no
        handler is running.

        Args:
            max_iterations: Receives to make (None: no limit).
            until_drained: Stop once the mailbox has nothing visible and no handler runs.
            wait_time_seconds: Long poll of each receive (default: the worker's).
            visibility_timeout: Visibility timeout of each receive (default: the worker's).

        Raises:
            ConfigurationError: The worker has no mailbox, or is already running.
        """
        requests = self._requests
        if requests is None:
            raise ConfigurationError(
                f"{self._name} has no requests mailbox; pass requests= to run it as a worker",
            )
        wait = self._wait_time_seconds if wait_time_seconds is None else wait_time_seconds
        visibility = self._visibility_timeout if visibility_timeout is None else visibility_timeout
        check_timeout("wait_time_seconds", wait, maximum=MAX_WAIT_SECONDS)
        check_timeout("visibility_timeout", visibility)
        with self._lock:
            if self._running:
                raise ConfigurationError(f"{self._name} is already running")
            self._running = True
        self._beat()
        pool: WorkerThreads | LoopThread
        if self.handles_async:
            pool = LoopThread(self._name, max_workers=self._max_concurrent)
        else:
            pool = WorkerThreads(self._max_concurrent, name=self._name)
        if max_iterations is None:  # with a receive budget, only this loop receives
            self._refill = functools.partial(
                requests.receive, max_messages=1, visibility_timeout=visibility,
                wait_time_seconds=0,
            )  # fmt: skip
        try:
            self._loop(requests, pool, max_iterations, until_drained, wait, visibility)
        finally:
            self._refill = None  # the loop ended: handlers finish what they hold, no more
            with self._lock:
                # Handlers finish (or a shutdown abandons them) before run() returns.
                self._idle.wait_for(lambda: not self._inflight)
                self._running = False
                self._stop.clear()
                self._cond.notify_all()
            if isinstance(pool, LoopThread):
                pool.stop()  # abandoned handlers are cancelled
            else:
                pool.shutdown(wait=False)  # idle threads exit; abandoned handlers run on

    def _loop(
        self,
        requests: Mailbox[T, R],
        pool: WorkerThreads | LoopThread,
        max_iterations: int | None,
        until_drained: bool,
        wait: float,
        visibility: float,
    ) -> None:
        iterations = 0
        failures = 0  # consecutive failed receives
        while max_iterations is None or iterations < max_iterations:
            free = self._wait_for_slot()
            released = self._released  # slots freed before this receive
            if free == 0:
                return  # stopping
            iterations += 1
            try:
                messages = self._receive(
                    requests, free, visibility, min(wait, _POLL_SLICE),
                    gather=max_iterations is None,  # a receive budget counts single receives
                )  # fmt: skip
            except MailboxClosedError:
                return
            except MailboxError as error:
                failures += 1
                self._receive_failed(failures, error)
                continue
            failures = 0
            BACKEND_OUTAGE.succeeded()  # one attribute read unless an outage is ongoing
            self._beat()
            if messages:
                self._dispatch(pool, messages)
            elif until_drained:
                if self._wait_for_idle(released):  # waits for the handlers to end
                    return
            elif wait == 0:
                self._stop.wait(_IDLE_PAUSE)

    def _receive(
        self, requests: Mailbox[T, R], free: int, visibility: float, wait: float, *, gather: bool
    ) -> Sequence[Message[T, R]]:
        """Up to `free` messages: one receive that may wait, then more that do not.

        A receive returns at most `MAX_MESSAGES`; when it comes back full and more slots
        are free, the queue likely has more, so this takes them now rather than
        handing each batch to the pool and coming back: with 200 free slots (a run's
        start) that is one hand-over instead of twenty, which an event loop that is
        already busy with the first batches would otherwise answer late.
        """
        messages = requests.receive(
            max_messages=min(free, MAX_MESSAGES), visibility_timeout=visibility,
            wait_time_seconds=wait,
        )  # fmt: skip
        if not gather or len(messages) < min(free, MAX_MESSAGES):
            return messages
        gathered = list(messages)
        while len(gathered) < free and not self._stop.is_set():
            wanted = min(free - len(gathered), MAX_MESSAGES)
            try:
                more = requests.receive(
                    max_messages=wanted, visibility_timeout=visibility, wait_time_seconds=0
                )
            except MailboxError:
                break  # dispatch what we have; the next receive meets the error again
            gathered.extend(more)
            if len(more) < wanted:
                break
        return gathered

    def _receive_failed(self, failures: int, error: MailboxError) -> None:
        """Back off after a failed receive: the worker outlives a backend outage.

        The pause doubles with each consecutive failure (up to `_MAX_RECEIVE_BACKOFF`)
        and ends early on `shutdown()`. An unreachable backend is reported to
        `BACKEND_OUTAGE` (one warning per outage, one line when it is back); any other
        failure is logged with its traceback the first time only.
        """
        self._count("receive_errors")
        pause = min(_MAX_RECEIVE_BACKOFF, _IDLE_PAUSE * 2.0 ** min(failures - 1, 16))
        if isinstance(error, MailboxConnectionError):
            BACKEND_OUTAGE.failed(f"{self._name} was receiving", error)
        else:
            _log.warning(
                "%s: receive failed (%d in a row); retrying in %.2gs",
                self._name,
                failures,
                pause,
                exc_info=failures == 1,
            )
        self._stop.wait(pause)

    def _wait_for_slot(self) -> int:
        """Block until a handler slot is free; return the free slots (0: stopping)."""
        with self._lock:
            self._cond.wait_for(
                lambda: self._stop.is_set() or len(self._inflight) < self._max_concurrent
            )
            return 0 if self._stop.is_set() else self._max_concurrent - len(self._inflight)

    def _wait_for_idle(self, released: int) -> bool:
        """After an empty receive: True if no handler runs; else wait for that, a while.

        `released` is the count of freed slots before that receive: a slot freed since
        (its handler may have nacked a retry, visible now) means one more receive, not
        the end. Handlers that take their next message themselves (`_refill`) do not
        wake this wait as they end one by one (see `__init__`): a message that becomes
        visible meanwhile goes to the next of them that ends, or to the receive made here
        after `_POLL_SLICE` at the latest.
        """
        with self._lock:
            if not self._inflight:
                return self._released == released
            self._idle.wait(_POLL_SLICE)
            return False

    def _dispatch(
        self, pool: WorkerThreads | LoopThread, messages: Sequence[Message[T, R]]
    ) -> None:
        self._count("received", len(messages))
        started: list[Delivery] = []
        for index, message in enumerate(messages):
            if self._stop.is_set():
                for unstarted in messages[index:]:
                    self._settling.give_back(unstarted)
                    self._count("returned")
                break
            delivery = self._delivery(message)
            with self._lock:
                self._inflight[message.receipt_handle] = delivery
            if isinstance(pool, WorkerThreads):
                pool.submit(functools.partial(self._process, delivery))
            else:
                started.append(delivery)
        if started and isinstance(pool, LoopThread):  # one wake-up of the loop per batch
            pool.spawn([functools.partial(self._process_async, d) for d in started])

    def _delivery(self, message: Message[T, R]) -> Delivery:
        lease = None
        if self._lease is not None:
            lease = LeaseExtender(message, self._lease, clock=self._clock)
        heartbeat = WorkerHeartbeat(clock=self._clock, on_beat=self._beat, lease=lease)
        return Delivery(message, heartbeat)

    # -- one message -------------------------------------------------------------------

    def _process(self, delivery: Delivery | None) -> None:
        # A pool thread keeps its slot while the queue has work: after each message it
        # receives the next one itself (without waiting) instead of handing the slot back
        # to the receiving thread, which would cost two thread switches per message.
        while delivery is not None:
            self._process_one(delivery)
            delivery = self._next_delivery(delivery)

    def _process_one(self, delivery: Delivery) -> None:
        if self._settling.reject_undecodable(delivery):
            return
        try:
            self.handle(delivery.message, delivery.heartbeat)
        except Exception as error:
            self._settling.finish(delivery, error)
        else:
            self._settling.finish(delivery, None)

    async def _process_async(self, delivery: Delivery | None) -> None:
        # `_process` for async handlers: a task on the worker's loop.
        while delivery is not None:
            try:
                await self._process_one_async(delivery)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the worker's own cancel (a shutdown gave up on it)
                # A CancelledError the handler let out (an inner task was cancelled):
                # a failure like any other, or the slot would never be released.
                error = RuntimeError("the handler raised CancelledError")
                self._settling.finish(delivery, error)
            delivery = self._next_delivery(delivery)

    async def _process_one_async(self, delivery: Delivery) -> None:
        if self._settling.reject_undecodable(delivery):
            return
        try:
            await self.handle_async(delivery.message, delivery.heartbeat)
        except Exception as error:
            self._settling.finish(delivery, error)
        else:
            self._settling.finish(delivery, None)

    def _next_delivery(self, done: Delivery) -> Delivery | None:
        """Release `done`'s slot, or hand it to the next message when one is waiting."""
        nxt = self._take_next()
        self._beat()
        with self._lock:  # one decision under the lock: the slot is released or handed on
            self._inflight.pop(done.message.receipt_handle, None)
            keep = nxt is not None and not self._stop.is_set()
            if nxt is not None and keep:
                self._inflight[nxt.message.receipt_handle] = nxt
            else:
                # Only a released slot changes what the waiters wait for (a free slot,
                # no handler left). Waking the receiving thread for a slot handed on
                # would cost a GIL hand-over per message for nothing.
                self._released += 1
                self._cond.notify_all()
                if not self._inflight or self._refill is None:  # no one else receives
                    self._idle.notify_all()
        if nxt is not None and not keep:
            self._settling.give_back(nxt.message)  # stopping: back to the queue untouched
            self._count("returned")
            return None
        return nxt

    def _take_next(self) -> Delivery | None:
        refill = self._refill
        if refill is None or self._stop.is_set():
            return None
        try:
            got = refill()
        except MailboxError:
            return None  # the receiving loop meets the same failure and backs off
        if not got:
            return None
        self._count("received", len(got))
        try:
            return self._delivery(got[0])
        except Exception:  # the slot must be released whatever happens here
            _log.exception("%s: cannot start message %s", self._name, got[0].id)
            self._settling.give_back(got[0])
            self._count("returned")
            return None

    # -- stopping ----------------------------------------------------------------------

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Stop receiving, let running handlers finish, and wait up to `timeout` seconds.

        Messages received but not started are nacked back at once. Handlers still
        running when `timeout` passes are abandoned: their messages are nacked back to
        the queue (whatever those handlers do afterwards is not settled).

        Returns:
            True if the worker stopped within `timeout` with every handler finished.
        """
        self._stop.set()
        with self._lock:
            self._cond.notify_all()
            self._idle.notify_all()
            if self._cond.wait_for(lambda: not self._running, timeout):
                return True
            abandoned = list(self._inflight.values())
            self._inflight.clear()
            self._cond.notify_all()
            self._idle.notify_all()
        for delivery in abandoned:
            with delivery.lock:
                if delivery.message.settled:
                    continue
                delivery.abandoned = True
                self._settling.give_back(delivery.message)
                self._count("returned")
        return False
