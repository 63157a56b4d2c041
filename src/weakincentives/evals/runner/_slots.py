"""Slot threads that start narrow: one thread until a sample's call is seen to block.

`LocalRun` runs whole samples as blocking calls on long-lived slot threads when a run has
neither timeout nor environments (see `LocalRun._run_threads`). Python threads share one
GIL: for a target that never waits (an instant task function, a sync agent on a fast
model) more threads only add switches between them, and ten threads doing instant
samples cost about twice as much per sample as one. For a target that waits (a model
call, `time.sleep`), every slot must run at once.

`SlotPool` starts one slot thread; a monitor (`SlotPool.watch`, on a helper thread)
checks it every `STALL_TICK` seconds and starts the other slots as soon as that thread
has finished no sample for a tick while using less than half of that tick's CPU time: its
call is waiting, not computing. A call that computes for `BUSY_TICKS` ticks without
finishing also widens the pool (it may release the GIL, as numpy does). Once wide, the
pool stays wide and the monitor only waits. A target that waits from its first call
thus has every slot running a tick or two after the start; one that never waits runs on
one thread throughout.

While narrow, finished results are buffered and written in batches (`BATCH` results, or
whatever is buffered when the monitor ticks): one store write per batch instead of one
per sample. A wide pool's threads write each result as it finishes, as their calls take
long enough for a write per sample not to matter.

The monitor measures the narrow thread's CPU time with `time.pthread_getcpuclockid`
where the platform has it; elsewhere a stalled tick counts as a wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from weakincentives.runtime.threads import WorkerThreads

__all__ = ["BATCH", "BUSY_TICKS", "STALL_TICK", "ResultBuffer", "SlotPool", "stalled"]

R = TypeVar("R")

STALL_TICK = 0.001
"""Seconds between the monitor's checks while the pool is narrow."""

BUSY_TICKS = 20
"""Ticks a computing call may take before the pool widens anyway."""

BATCH = 64
"""Results a narrow pool buffers before its thread writes them itself."""

WIDE_POLL = 0.25
"""Seconds between the monitor's checks for a cancel once the pool is wide."""


def stalled(ticks: int, cpu_share: float | None) -> bool:
    """Whether a thread that finished nothing for `ticks` ticks is waiting.

    Args:
        ticks: Consecutive ticks without a finished sample.
        cpu_share: CPU time the thread used over the last tick, as a share of the tick
            (None when the platform cannot tell).

    Returns:
        True when more threads would help: the call waits (under half a tick of CPU in
        the last tick), or it has computed for `BUSY_TICKS` ticks.
    """
    if ticks < 1:
        return False
    return cpu_share is None or cpu_share < 0.5 or ticks >= BUSY_TICKS


class SlotPool:
    """Runs `task` on one slot thread, then on every slot once a call is seen to wait.

    Args:
        pool: The threads (its `max_workers` is the number of slots).
        task: What each slot thread runs: a loop over the run's work that calls
            `finished()` after every sample.
        tick: How often the monitor checks while narrow (seconds; `STALL_TICK` if None).
    """

    def __init__(
        self, pool: WorkerThreads, task: Callable[[], None], *, tick: float | None = None
    ) -> None:
        self._pool = pool
        self._task = task
        self._tick = STALL_TICK if tick is None else tick
        self._slots = pool.max_workers
        self._done = 0  # samples finished, counted by the narrow thread (one writer)
        self._started = threading.Event()
        self._cpu_clock: int | None = None
        self.wide = False
        """True once a call was seen to wait: every slot runs, results are written at once."""

    def start(self) -> None:
        """Start the first slot thread."""
        self._pool.submit(self._first)

    def finished(self) -> None:
        """Count one finished sample (called by the slot threads)."""
        self._done += 1

    def widen(self) -> None:
        """Start the other slots (idempotent; called by the monitor)."""
        if self.wide:
            return
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
        pool, tick = self._pool, self._tick
        last, idle, cpu_then = -1, 0, 0.0
        while not self.wide:
            if pool.join(timeout=tick) or stopped():
                return
            flush()
            if not self._started.is_set():
                continue  # the thread is not running yet: nothing to judge
            done, cpu_now = self._done, self._cpu_time()
            if done != last:
                last, idle = done, 0
            else:
                idle += 1
                share = None if cpu_now is None else (cpu_now - cpu_then) / tick
                if stalled(idle, share):
                    self.widen()
            cpu_then = cpu_now or 0.0
        while not pool.join(timeout=WIDE_POLL) and not stopped():
            pass

    def _first(self) -> None:
        clock = getattr(time, "pthread_getcpuclockid", None)
        if clock is not None:
            self._cpu_clock = clock(threading.get_ident())
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
        write: Records a batch of results (one store write); called under `lock`.
        lock: Orders the writes: the store, the report and the progress sink see the
            results in one order.
    """

    def __init__(self, write: Callable[[list[R]], None], lock: threading.Lock) -> None:
        self._write = write
        self._lock = lock
        self._results: list[R] = []
        self._closed = False

    def keep(self, result: R, wide: bool) -> None:
        """Buffer `result`; write the buffer when it holds `BATCH`, or at once if `wide`.

        A result kept after `flush(final=True)` (a slot thread finishing after its run
        ended) is discarded rather than written to a finished run.
        """
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
