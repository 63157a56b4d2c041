"""`InMemoryMailbox`: a thread-safe mailbox for one process, and a factory of them."""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import secrets
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import (
    MailboxArgumentError,
    MailboxClosedError,
    MailboxFullError,
    ReceiptHandleExpiredError,
)
from weakincentives.runtime.mailbox._limits import check_receive_arguments, check_timeout
from weakincentives.runtime.mailbox._types import Mailbox, MailboxResolver, Message

__all__ = ["InMemoryMailbox", "InMemoryMailboxFactory"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(slots=True)
class _Record:
    """A message held by the mailbox, pending or in flight."""

    id: str
    body: Any
    seq: int
    enqueued_at: datetime
    reply_to: Any
    deliveries: int = 0
    handle: str | None = None
    deadline: float = 0.0


class InMemoryMailbox(Generic[T, R]):
    """A mailbox held in this process's memory.

    Thread-safe and FIFO, with delayed sends and visibility timeouts. Time comes from the
    injected clock: expired visibility timeouts and delays are noticed lazily, on each
    call, against `clock.monotonic()`, so a test advances a `FakeClock` instead of
    sleeping. A long poll waits on a condition variable and returns as soon as a
    message arrives; it waits in real time, so tests that use a `FakeClock` poll with
    `wait_time_seconds=0`.

    Args:
        name: The mailbox's name (reply-to addresses and resolvers use it).
        clock: Source of time for delays and visibility timeouts.
        reply_resolver: Resolves reply-to names given to `send` (None: only mailbox
            objects can be replied to).
        max_size: The most messages held at once (None: unbounded); `send` beyond it
            raises `MailboxFullError`.

    Examples:
        ```python
        requests: InMemoryMailbox[str, int] = InMemoryMailbox(name="requests")
        ```
    """

    def __init__(
        self,
        name: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        reply_resolver: MailboxResolver[R] | None = None,
        max_size: int | None = None,
    ) -> None:
        if not name:
            raise MailboxArgumentError("a mailbox needs a non-empty name")
        if max_size is not None and max_size < 1:
            raise MailboxArgumentError(f"max_size must be at least 1 or None, got {max_size}")
        self._name = name
        self._clock = clock
        self._resolver = reply_resolver
        self._max_size = max_size
        # Held with `with self._lock` (a C-level enter, unlike the Condition's own);
        # `_cond` waits and notifies on the same lock. `_waiting` counts long polls in
        # `_cond.wait`, so a send with no one waiting skips the notify.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0
        self._settler = _Settler(self)
        self._closed = False
        self._seq = itertools.count()
        # Ids and receipt handles are a per-mailbox random prefix plus a counter: unique
        # without a uuid4 per message, whose os.urandom call releases the GIL and, made
        # under the mailbox lock, would make every other thread queue behind its return.
        self._prefix = secrets.token_hex(8)
        self._handles = itertools.count()
        self._records: dict[str, _Record] = {}
        # Pending messages by (visible-at, send order, id): FIFO among the visible ones.
        # Sends without a delay arrive in that order already, so they queue in `_fresh`
        # (O(1) each way); delayed sends, nacks and expired deliveries go to the heap
        # `_ready`. A receive takes the smaller head of the two.
        self._fresh: deque[tuple[float, int, str]] = deque()
        self._ready: list[tuple[float, int, str]] = []
        # In-flight deliveries by receipt handle, and their deadlines (lazily invalidated:
        # a settled delivery's entry stays until it surfaces, or until the heap, grown
        # past twice the deliveries in flight, is rebuilt from them).
        self._inflight: dict[str, _Record] = {}
        self._expiries: list[tuple[float, int, str]] = []

    def __repr__(self) -> str:
        return f"InMemoryMailbox(name={self._name!r})"

    @property
    def name(self) -> str:
        """The mailbox's name."""
        return self._name

    @property
    def closed(self) -> bool:
        """True once `close()` was called."""
        return self._closed

    def send(
        self,
        body: T,
        *,
        reply_to: Mailbox[R, Any] | str | None = None,
        delay: float = 0.0,
    ) -> str:
        """Enqueue `body`, visible after `delay` seconds; return its message id.

        Raises:
            MailboxArgumentError: `delay` is out of range or `reply_to` is an empty name.
            MailboxClosedError: The mailbox was closed.
            MailboxFullError: The mailbox holds `max_size` messages.
        """
        if delay != 0.0:  # 0.0 (the usual) is in range; anything else is checked
            check_timeout("delay", delay)
        if isinstance(reply_to, str) and not reply_to:
            raise MailboxArgumentError("reply_to must be a mailbox, a non-empty name, or None")
        with self._lock:
            self._check_open()
            seq = next(self._seq)
            if self._max_size is not None and len(self._records) >= self._max_size:
                raise MailboxFullError(
                    f"mailbox {self._name!r} holds its max_size of {self._max_size} "
                    "messages; receive and acknowledge some before sending more",
                )
            record = _Record(
                id=f"{self._prefix}-{seq}",
                body=body,
                seq=seq,
                enqueued_at=self._clock.now(),
                reply_to=reply_to,
            )
            self._records[record.id] = record
            entry = (self._clock.monotonic() + delay, record.seq, record.id)
            if delay:
                heapq.heappush(self._ready, entry)
            else:
                self._fresh.append(entry)
            if self._waiting:
                self._cond.notify_all()
            return record.id

    def send_many(
        self,
        bodies: Iterable[T],
        *,
        reply_to: Mailbox[R, Any] | str | None = None,
        delay: float = 0.0,
    ) -> list[str]:
        """Enqueue every body of `bodies` in order, under one lock; return their ids.

        The same as `send` for each body, at about half the cost per message (one lock,
        one timestamp for the batch). With `max_size`, a full mailbox stops the batch at
        the first body it refuses: `MailboxFullError`, the bodies before it were sent.

        Raises:
            MailboxArgumentError: `delay` is out of range or `reply_to` is an empty name.
            MailboxClosedError: The mailbox was closed.
            MailboxFullError: The mailbox holds `max_size` messages.
        """
        if delay != 0.0:
            check_timeout("delay", delay)
        if isinstance(reply_to, str) and not reply_to:
            raise MailboxArgumentError("reply_to must be a mailbox, a non-empty name, or None")
        batch = list(bodies)
        ids: list[str] = []
        with self._lock:
            self._check_open()
            enqueued_at = self._clock.now()
            visible_at = self._clock.monotonic() + delay
            records, prefix, seqs = self._records, self._prefix, self._seq
            push = functools.partial(heapq.heappush, self._ready) if delay else self._fresh.append
            try:
                for body in batch:
                    if self._max_size is not None and len(records) >= self._max_size:
                        raise MailboxFullError(
                            f"mailbox {self._name!r} holds its max_size of {self._max_size} "
                            f"messages ({len(ids)} of a batch of {len(batch)} were sent); "
                            "receive and acknowledge some before sending more",
                        )
                    seq = next(seqs)
                    record = _Record(
                        id=f"{prefix}-{seq}", body=body, seq=seq, enqueued_at=enqueued_at,
                        reply_to=reply_to,
                    )  # fmt: skip
                    records[record.id] = record
                    push((visible_at, seq, record.id))
                    ids.append(record.id)
            finally:
                if ids and self._waiting:
                    self._cond.notify_all()
        return ids

    def receive(
        self,
        *,
        max_messages: int = 1,
        visibility_timeout: float = 30.0,
        wait_time_seconds: float = 0.0,
    ) -> Sequence[Message[T, R]]:
        """Return up to `max_messages` visible messages, hidden for `visibility_timeout`.

        With `wait_time_seconds > 0`, waits for the first message and returns as soon
        as there is one. A poll in progress when the mailbox closes returns nothing.

        Raises:
            MailboxArgumentError: An argument is out of range.
            MailboxClosedError: The mailbox was closed before the call.
        """
        check_receive_arguments(max_messages, visibility_timeout, wait_time_seconds)
        with self._lock:
            self._check_open()
            deadline = self._clock.monotonic() + wait_time_seconds
            # Real time spent in timed-out waits: ends the poll even under a FakeClock,
            # whose monotonic time does not move while we wait.
            budget = wait_time_seconds
            while not self._closed:
                now = self._clock.monotonic()
                batch = self._take(now, max_messages, visibility_timeout)
                if batch:
                    return batch
                wait = min(deadline - now, budget, self._next_change(now))
                if wait <= 0:
                    return []
                self._waiting += 1
                try:
                    woken = self._cond.wait(wait)
                finally:
                    self._waiting -= 1
                if not woken:
                    budget -= wait
            return []

    def approximate_count(self) -> int:
        """Return the number of messages held, visible or not (exact here)."""
        with self._lock:
            self._check_open()
            return len(self._records)

    def purge(self) -> int:
        """Delete every message; their receipt handles become stale. Return the count."""
        with self._lock:
            self._check_open()
            count = len(self._records)
            self._records.clear()
            self._fresh.clear()
            self._ready.clear()
            self._inflight.clear()
            self._expiries.clear()
            return count

    def close(self) -> None:
        """Close the mailbox and wake any long poll. Idempotent."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    # -- settling (called by messages through `_Settler`) ------------------------------

    def _acknowledge(self, handle: str) -> None:
        with self._lock:
            record = self._owner(handle)
            del self._inflight[handle]
            del self._records[record.id]

    def _nack(self, handle: str, visibility_timeout: float) -> None:
        with self._lock:
            record = self._owner(handle)
            del self._inflight[handle]
            record.handle = None
            visible_at = self._clock.monotonic() + visibility_timeout
            heapq.heappush(self._ready, (visible_at, record.seq, record.id))
            if self._waiting:
                self._cond.notify_all()

    def _extend(self, handle: str, timeout: float) -> None:
        with self._lock:
            record = self._owner(handle)
            record.deadline = self._clock.monotonic() + timeout
            self._expire_at(record.deadline, record.seq, handle)

    # -- internals (called with the lock held) -----------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise MailboxClosedError(
                f"mailbox {self._name!r} is closed; create a new one to keep going",
            )

    def _owner(self, handle: str) -> _Record:
        """Return the record `handle` still owns, after requeueing expired deliveries."""
        self._check_open()
        self._requeue_expired(self._clock.monotonic())
        record = self._inflight.get(handle)
        if record is None:
            raise ReceiptHandleExpiredError(
                f"receipt handle {handle!r} of mailbox {self._name!r} is stale: the "
                "message was acknowledged, nacked, purged, or its visibility timeout "
                "passed; receive it again to settle it",
            )
        return record

    def _requeue_expired(self, now: float) -> None:
        while self._expiries and self._expiries[0][0] <= now:
            deadline, seq, handle = heapq.heappop(self._expiries)
            record = self._inflight.get(handle)
            if record is None or record.deadline != deadline:
                continue  # settled, or extended (a newer entry stands for it)
            del self._inflight[handle]
            record.handle = None
            heapq.heappush(self._ready, (deadline, seq, record.id))

    def _take(self, now: float, limit: int, visibility_timeout: float) -> list[Message[T, R]]:
        self._requeue_expired(now)
        batch: list[Message[T, R]] = []
        fresh, ready = self._fresh, self._ready
        while len(batch) < limit:
            if fresh and (not ready or fresh[0] < ready[0]):
                if fresh[0][0] > now:
                    break
                _, seq, message_id = fresh.popleft()
            elif ready and ready[0][0] <= now:
                _, seq, message_id = heapq.heappop(ready)
            else:
                break
            record = self._records[message_id]
            record.deliveries += 1
            record.handle = f"{self._prefix}.{next(self._handles)}"
            record.deadline = now + visibility_timeout
            self._inflight[record.handle] = record
            self._expire_at(record.deadline, seq, record.handle)
            batch.append(self._deliver(record, record.handle))
        return batch

    def _expire_at(self, deadline: float, seq: int, handle: str) -> None:
        expiries = self._expiries
        heapq.heappush(expiries, (deadline, seq, handle))
        if len(expiries) > 2 * len(self._inflight) + 64:  # mostly settled deliveries
            expiries[:] = [(r.deadline, r.seq, h) for h, r in self._inflight.items()]
            heapq.heapify(expiries)

    def _deliver(self, record: _Record, handle: str) -> Message[T, R]:
        return Message(
            id=record.id,
            body=record.body,
            receipt_handle=handle,
            delivery_count=record.deliveries,
            enqueued_at=record.enqueued_at,
            settler=self._settler,
            reply_to=record.reply_to,
            resolver=self._resolver,
        )

    def _next_change(self, now: float) -> float:
        """Seconds until a pending or in-flight message may become visible (inf: never)."""
        heads = self._ready[:1] + self._expiries[:1] + list(itertools.islice(self._fresh, 1))
        times = [entry[0] for entry in heads]
        return max(0.0, min(times) - now) if times else math.inf


class _Settler:
    """Settles deliveries of one `InMemoryMailbox` (a `ReceiptSettler`)."""

    __slots__ = ("_mailbox",)

    def __init__(self, mailbox: InMemoryMailbox[Any, Any]) -> None:
        self._mailbox = mailbox

    def acknowledge(self, receipt_handle: str) -> None:
        self._mailbox._acknowledge(receipt_handle)

    def nack(self, receipt_handle: str, visibility_timeout: float) -> None:
        self._mailbox._nack(receipt_handle, visibility_timeout)

    def extend_visibility(self, receipt_handle: str, timeout: float) -> None:
        self._mailbox._extend(receipt_handle, timeout)


class InMemoryMailboxFactory(Generic[T]):
    """Creates named in-memory mailboxes that share one registry, so names resolve.

    The factory is also a `MailboxResolver`: mailboxes it creates use it to resolve
    reply-to names, so `send(..., reply_to="results")` reaches the factory's "results".

    Args:
        clock: Clock given to every mailbox created.
        max_size: `max_size` given to every mailbox created.
    """

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK, max_size: int | None = None) -> None:
        self._clock = clock
        self._max_size = max_size
        self._lock = threading.Lock()
        self._mailboxes: dict[str, InMemoryMailbox[T, Any]] = {}

    def create(self, name: str) -> InMemoryMailbox[T, Any]:
        """Return the mailbox called `name`, creating it on first use."""
        with self._lock:
            mailbox = self._mailboxes.get(name)
            if mailbox is None:
                mailbox = InMemoryMailbox(
                    name, clock=self._clock, reply_resolver=self, max_size=self._max_size
                )
                self._mailboxes[name] = mailbox
            return mailbox

    def resolve(self, name: str) -> InMemoryMailbox[T, Any]:
        """Same as `create`: a reply-to name always resolves to the shared mailbox."""
        return self.create(name)

    def names(self) -> list[str]:
        """Return the names of the mailboxes created so far, sorted."""
        with self._lock:
            return sorted(self._mailboxes)
