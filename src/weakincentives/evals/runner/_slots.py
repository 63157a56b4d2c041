"""Slot threads that start narrow: one thread until a sample's call is seen to block.

`LocalRun` runs whole samples as blocking calls on long-lived slot threads when a run has
neither timeout nor environments (see `LocalRun._run_threads`). Python threads share one
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

The monitor reads the thread's state from `/proc/self/task/<id>/stat` (Linux), and only
on a tick that saw no progress. Where there is no such file, it measures the thread's CPU
time over the tick (`time.pthread_getcpuclockid`): under half the tick counts as a wait;
where neither is available, any stalled tick does.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

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

    Args:
        pool: The threads (its `max_workers` is the number of slots).
        task: What each slot thread runs: a loop over the run's work that calls
            `finished()` after every sample.
        tick: How often the monitor checks while narrow (seconds; `STALL_TICK` if None).
        now: The monitor's clock: real (monotonic) time, as the threads it watches run
            in it.
    """

    def __init__(
        self,
        pool: WorkerThreads,
        task: Callable[[], None],
        *,
        tick: float | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._now = now
        self._task = task
        self._tick = STALL_TICK if tick is None else tick
        self._slots = pool.max_workers
        self._done = 0  # samples finished, counted by the narrow thread (one writer)
        self._started = threading.Event()
        self._cpu_clock: int | None = None
        self._stat = ""  # the first thread's state file (Linux)
        self.wide = False
        """True once a call was seen to wait: every slot runs, results are written at once."""

    def start(self) -> None:
        """Start the first slot thread."""
        self._pool.submit(self._first)

    def finished(self) -> None:
        """Count one finished sample (called by the slot threads)."""
        self._done += 1

    def widen(self) -> None:
        """Start the other slots (called by the monitor, once)."""
        self.wide = True
        for _ in range(self._slots - 1):
            self._pool.submit(self._task)

    def watch(self, stopped: Callable[[], bool], flush: Callable[[], None]) -> None:
        """Wait for the slots to finish, widening the pool when its thread waits.

        Runs on a helper thread. Returns when every slot has finished, or soon after
        `stopped()` turns true (a hung call must not keep this thread). While narrow,
        calls `flush()` every tick: the narrow thread's buffered results are written
        within a tick however long its next call takes.
        """
        pool, tick, now = self._pool, self._tick, self._now
        last, idle = 0, 0
        then: tuple[float, float] | None = None  # wall and CPU time at the last tick
        while not self.wide:
            if pool.join(timeout=tick) or stopped():
                return
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
        while not pool.join(timeout=WIDE_POLL) and not stopped():
            pass

    def _first(self) -> None:
        clock = getattr(time, "pthread_getcpuclockid", None)
        if clock is not None:
            self._cpu_clock = clock(threading.get_ident())
        self._stat = f"/proc/self/task/{threading.get_native_id()}/stat"
        self._started.set()
        self._task()

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
