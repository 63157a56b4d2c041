"""Slot threads that start narrow: one thread until a sample's call is seen to block.

`LocalRun` runs whole samples as blocking calls on long-lived slot threads when a run has
no environments (see `LocalRun._run_threads`). Python threads share one
GIL: for a target that never waits (an instant task function, a sync agent on a fast
model) more threads only add switches between them, and ten threads doing instant
samples cost about twice as much per sample as one. For a target that waits (a model
call, `time.sleep`), every slot must run at once.

`SlotPool` starts one slot thread; a monitor (`SlotPool.watch`, on a helper thread)
checks it every `STALL_TICK` seconds and starts the other slots as soon as that thread
has finished no sample for a tick and sleeps in the kernel (a model call, `time.sleep`,
a lock): its call is waiting, not computing. A thread that is merely runnable (the
machine is busy and the scheduler has not run it for a while) is left alone: widening
then would only add switches. A call that computes for `BUSY_TICKS` ticks without
finishing also widens the pool (it may release the GIL, as numpy does). Once wide, the
pool stays wide and the monitor only waits. A target that waits from its first call
thus has every slot running a tick or two after the start; one that never waits runs on
one thread throughout.

While narrow, finished results are buffered and written in batches (`BATCH` results, or
whatever is buffered when the monitor ticks): one store write per batch instead of one
per sample. A wide pool's threads write each result as it finishes, as their calls take
long enough for a write per sample not to matter.

With a per-sample timeout, the monitor also watches each call's deadline (waking for the
soonest): a call past it is recorded as timed out, its thread is given up (Python cannot
stop it; its late result is discarded) and a new slot thread takes its place. The pool's
threads are not waited for at interpreter exit (`WorkerThreads`): a hung call does not
keep the process alive.

The monitor reads the thread's state from `/proc/self/task/<id>/stat` (Linux), and only
on a tick that saw no progress. Where there is no such file, it measures the thread's CPU
time over the tick (`time.pthread_getcpuclockid`): under half the tick counts as a wait;
where neither is available, any stalled tick does.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from weakincentives.runtime.threads import WorkerThreads

__all__ = [
    "BATCH",
    "BUSY_TICKS",
    "STALL_TICK",
    "ResultBuffer",
    "SlotPool",
    "sleeps_in_kernel",
    "stalled",
]

R = TypeVar("R")

STALL_TICK = 0.001
"""Seconds between the monitor's checks while the pool is narrow."""

BUSY_TICKS = 20
"""Ticks a computing call may take before the pool widens anyway."""

BATCH = 64
"""Results a narrow pool buffers before its thread writes them itself."""

WIDE_POLL = 0.25
"""Seconds between the monitor's checks for a cancel once the pool is wide."""


def stalled(ticks: int, sleeping: bool | None, cpu_share: float | None) -> bool:
    """Whether a thread that finished nothing for `ticks` ticks is waiting.

    Args:
        ticks: Consecutive ticks without a finished sample.
        sleeping: Whether the thread sleeps in the kernel now (None: cannot tell).
        cpu_share: CPU time the thread used over the last tick, as a share of the tick
            (None: cannot tell); asked only when `sleeping` is None.

    Returns:
        True when more threads would help: the call waits, or it has computed for
        `BUSY_TICKS` ticks.
    """
    if ticks < 1:
        return False
    if ticks >= BUSY_TICKS:
        return True
    if sleeping is not None:
        return sleeping
    return cpu_share is None or cpu_share < 0.5


def sleeps_in_kernel(stat: str) -> bool | None:
    """Whether the thread of `/proc/self/task/<id>/stat` file `stat` sleeps (state S or D).

    None when the file cannot be read (no /proc: not Linux; the thread has exited) or
    does not look like one.
    """
    try:
        fd = os.open(stat, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 512)
    except OSError:  # pragma: no cover - a /proc file that opens reads
        return None
    finally:
        os.close(fd)
    # "tid (name) S ...": the name may hold spaces and parentheses; the state follows
    # the last ")".
    end = data.rfind(b")")
    return None if end < 0 else data[end + 2 : end + 3] in (b"S", b"D")


class SlotPool:
    """Runs `task` on one slot thread, then on every slot once a call is seen to wait.

    With a `timeout`, the slot threads note each call with `begin` and `end`; the
    monitor gives up a call past its deadline: `on_timeout` records it, the thread is
    abandoned (its call's late result is discarded, see `end`) and a new slot thread
    takes its place, so `slots` calls still run at once.

    Args:
        pool: The threads.
        task: What each slot thread runs: a loop over the run's work that calls
            `finished()` after every sample (and `begin`/`end` around each call, with a
            timeout).
        slots: Slot threads at most (`pool.max_workers` if None; with a timeout, the
            pool needs room for the abandoned threads too).
        timeout: Seconds a call may take (None: no limit).
        on_timeout: Called on the monitor's thread with the `info` of each call given up.
        tick: How often the monitor checks while narrow (seconds; `STALL_TICK` if None).
        now: The monitor's clock: real (monotonic) time, as the threads it watches run
            in it.
    """

    def __init__(
        self,
        pool: WorkerThreads,
        task: Callable[[], None],
        *,
        slots: int | None = None,
        timeout: float | None = None,
        on_timeout: Callable[[Any], None] | None = None,
        tick: float | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._now = now
        self._task = task
        self._tick = STALL_TICK if tick is None else tick
        self._slots = pool.max_workers if slots is None else slots
        self._timeout = timeout
        self._on_timeout = on_timeout
        self._running = 0  # slot loops started, neither finished nor abandoned
        self._cond = threading.Condition()
        self._calls: dict[int, tuple[float, Any]] = {}  # in flight: deadline, info
        self._tickets = itertools.count()
        self._local = threading.local()  # `abandoned`, per slot thread
        self._done = 0  # samples finished, counted by the narrow thread (one writer)
        self._started = threading.Event()
        self._cpu_clock: int | None = None
        self._stat = ""  # the first thread's state file (Linux)
        self.wide = False
        """True once a call was seen to wait: every slot runs, results are written at once."""

    def start(self) -> None:
        """Start the first slot thread."""
        self._add(1, self._first)

    def finished(self) -> None:
        """Count one finished sample (called by the slot threads)."""
        self._done += 1

    def widen(self) -> None:
        """Start the other slots (called by the monitor, once)."""
        self.wide = True
        self._add(self._slots - 1, self._slot)

    def begin(self, info: Any) -> int:
        """Note that the calling slot thread starts a call; returns its ticket for `end`.

        `info` is what `on_timeout` gets if the call is given up.
        """
        assert self._timeout is not None
        ticket = next(self._tickets)
        self._calls[ticket] = (self._now() + self._timeout, info)
        return ticket

    def end(self, ticket: int) -> bool:
        """Whether the call of `ticket` ended in time.

        False when the monitor gave it up meanwhile: its timeout is recorded, another
        slot thread runs in its place, and the caller (this thread's slot loop) must
        discard the result and return.
        """
        if self._calls.pop(ticket, None) is not None:  # atomic: the monitor pops too
            return True
        self._local.abandoned = True
        return False

    def watch(self, stopped: Callable[[], bool], flush: Callable[[], None]) -> None:
        """Wait for the slots to finish, widening the pool when its thread waits.

        Runs on a helper thread. Returns when every slot has finished, or soon after
        `stopped()` turns true (a hung call must not keep this thread). While narrow,
        calls `flush()` every tick: the narrow thread's buffered results are written
        within a tick however long its next call takes. With a timeout, it gives up the
        calls past their deadline as it finds them, waking for the soonest.
        """
        tick, now = self._tick, self._now
        last, idle = 0, 0
        then: tuple[float, float] | None = None  # wall and CPU time at the last tick
        while True:
            wait = WIDE_POLL if self.wide else tick
            if self._timeout is not None:
                soonest = self._expire()
                if soonest is not None:
                    wait = min(wait, max(soonest - now(), 0.0))
            if self._join(wait) or stopped():
                return
            if self.wide:
                continue
            flush()
            if not self._started.is_set():
                continue  # the thread is not running yet: nothing to judge
            done, cpu, wall = self._done, self._cpu_time(), now()
            if done != last:
                last, idle = done, 0
            else:
                idle += 1
                share = None
                if cpu is not None and then is not None and wall > then[0]:
                    share = (cpu - then[1]) / (wall - then[0])
                if stalled(idle, sleeps_in_kernel(self._stat), share):
                    self.widen()
            then = None if cpu is None else (wall, cpu)

    def _expire(self) -> float | None:
        """Give up the calls past their deadline; return the soonest deadline left."""
        now, soonest = self._now(), None
        for ticket, (deadline, info) in list(self._calls.items()):
            if deadline > now:
                soonest = deadline if soonest is None else min(soonest, deadline)
            elif self._calls.pop(ticket, None) is not None:  # not ended meanwhile
                assert self._on_timeout is not None
                self._on_timeout(info)
                self._pool.submit(self._slot)  # in place of the abandoned one
        return soonest

    def _join(self, wait: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._running == 0, wait)

    def _add(self, n: int, slot: Callable[[], None]) -> None:
        with self._cond:
            self._running += n
        for _ in range(n):
            self._pool.submit(slot)

    def _slot(self) -> None:
        local = self._local
        local.abandoned = False
        try:
            self._task()
        finally:
            if not local.abandoned:  # an abandoned slot's count went to its successor
                with self._cond:
                    self._running -= 1
                    if self._running == 0:
                        self._cond.notify_all()

    def _first(self) -> None:
        clock = getattr(time, "pthread_getcpuclockid", None)
        if clock is not None:
            self._cpu_clock = clock(threading.get_ident())
        self._stat = f"/proc/self/task/{threading.get_native_id()}/stat"
        self._started.set()
        self._slot()

    def _cpu_time(self) -> float | None:
        clock = self._cpu_clock
        if clock is None:
            return None
        try:
            return time.clock_gettime(clock)
        except OSError:  # the thread has exited meanwhile
            return None


class ResultBuffer(Generic[R]):
    """Slot threads' results on their way to the store: batched while the pool is narrow.

    Args:
        write: Records a batch of results (one store write).
        lock: Orders the writes: the store, the report and the progress sink see the
            results in one order.
        ordered: Whether every write must hold `lock` (a progress sink reads the
            results in order). When not, a wide pool's threads write their results
            without it (`write` is then thread-safe): two hundred threads waking
            together would otherwise queue on the lock.
    """

    def __init__(
        self, write: Callable[[list[R]], None], lock: threading.Lock, *, ordered: bool = True
    ) -> None:
        self._write = write
        self._lock = lock
        self._ordered = ordered
        self._results: list[R] = []
        self._closed = False

    def keep(self, result: R, wide: bool) -> None:
        """Buffer `result`; write the buffer when it holds `BATCH`, or at once if `wide`.

        A result kept after `flush(final=True)` (a slot thread finishing after its run
        ended) is discarded rather than written to a finished run.
        """
        if wide and not self._ordered and not self._results:
            if not self._closed:
                self._write([result])
            return
        with self._lock:
            if self._closed:
                return
            results = self._results
            results.append(result)
            if wide or len(results) >= BATCH:
                self._results = []
                self._write(results)

    def flush(self, *, final: bool = False) -> None:
        """Write what is buffered; with `final`, take no more results after it."""
        with self._lock:
            if self._closed:
                return
            self._closed = final
            results, self._results = self._results, []
            if results:
                self._write(results)
