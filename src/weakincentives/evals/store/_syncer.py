"""When a run's results file is fsynced, and by which thread (policy in `_handle.py`).

A `Syncer` serves one writable `RunHandle`. The handle marks it dirty after each write
lands; `sync()` fsyncs (blocking) when something landed since the last fsync; with a
positive interval, `start()` runs a daemon thread that does that at most once per
interval, so that no appender ever waits on the disk, and `stop()` ends it.

One thread per handle, not one per process: its life is the handle's (started by the
first append, joined by `finish`), a slow disk under one run never delays another's
syncs, and a process seldom writes more than a run or two at a time.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from weakincentives.clock import Clock

from ._files import sync_file_and_dir

__all__ = ["Syncer"]

_log = logging.getLogger(__name__)


class Syncer:
    """Keeps one file synced: an fsync at most every `interval` seconds while it is dirty.

    Args:
        fd: Returns the file descriptor to fsync (-1 once the file is closed). Whoever
            closes it holds `lock` meanwhile, so an fsync never sees it closed.
        name: The run's id, for the thread's name and log messages.
        clock: Measures the interval.
        interval: Seconds between background fsyncs (`start` needs it > 0).
        pending: A file (and its directory entry) to make durable with the first fsync:
            the manifest written, without fsync, when the run was created.
    """

    def __init__(
        self,
        fd: Callable[[], int],
        *,
        name: str,
        clock: Clock,
        interval: float,
        pending: Path | None = None,
    ) -> None:
        self._fd = fd
        self._name = name
        self._clock = clock
        self._interval = interval
        self._pending = pending
        self.lock = threading.Lock()
        """Held during an fsync; hold it to close the file."""
        self.dirty = threading.Event()
        """Set once a write has landed, cleared just before the fsync that covers it."""
        self.synced_size = -1
        """The file's size at the start of the latest fsync that succeeded (-1: none)."""
        self._stop = threading.Event()
        self._wake = threading.Event()  # ends the wait for the interval (stop, hurry)
        self._hurry = False
        self._thread: threading.Thread | None = None
        self._life = threading.Lock()  # orders `start` and `stop`
        self._failure: OSError | None = None  # guarded by `lock`
        self._last = clock.monotonic()

    def sync(self) -> None:
        """Force what landed so far to disk, if anything, and wait for it.

        Raises:
            OSError: the fsync failed; the file stays dirty.
        """
        with self.lock:
            fd = self._fd()
            if fd < 0 or not self.dirty.is_set():
                return
            # Cleared before the fsync: a write that lands later sets it again, and one
            # that landed before is covered by this fsync.
            self.dirty.clear()
            self._last = self._clock.monotonic()
            try:
                size = os.fstat(fd).st_size  # what this fsync is sure to cover
                os.fsync(fd)
                if self._pending is not None:
                    sync_file_and_dir(self._pending)
                    self._pending = None
                self.synced_size = size
            except BaseException:
                self.dirty.set()  # not durable: the next sync tries again
                raise

    def sync_with_next(self, path: Path) -> None:
        """Make `path` (and its directory entry) durable with the next fsync (see `pending`)."""
        with self.lock:
            self._pending = path

    def start(self) -> None:
        """Start the background thread (once, and never after `stop`)."""
        with self._life:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._loop, name=f"wink-run-sync-{self._name}", daemon=True
                )
                self._thread.start()

    def hurry(self) -> None:
        """Have the background thread sync now, not at the interval's end.

        A run calls it once its last expected result has landed: the fsync then runs
        while the caller winds down, and `finish` finds the file already synced.
        """
        self._hurry = True
        self._wake.set()

    def stop(self) -> None:
        """Stop the background thread, if any, and wait for it to end."""
        with self._life:
            self._stop.set()
            self._wake.set()
            thread = self._thread
        if thread is not None:
            self.dirty.set()  # wake it up (the owner syncs what is left anyway)
            thread.join()

    def take_failure(self) -> OSError | None:
        """The first background fsync error not reported yet, if any (then forgotten)."""
        with self.lock:
            failure, self._failure = self._failure, None
        return failure

    def _due(self) -> float:
        return self._last + self._interval

    def _loop(self) -> None:
        clock, dirty, stop = self._clock, self.dirty, self._stop
        while True:
            dirty.wait()  # until a write lands (or `stop` wakes us)
            # The interval is measured on the clock; the wait between two looks at it is
            # real time (a fake clock is looked at again after that long).
            wake = self._wake
            while (
                not stop.is_set()
                and not self._hurry
                and (left := self._due() - clock.monotonic()) > 0
            ):
                wake.wait(left)
                wake.clear()
            if stop.is_set():
                return
            self._hurry = False
            try:
                self.sync()
            except OSError as exc:
                with self.lock:
                    first, self._failure = self._failure is None, self._failure or exc
                if first:
                    _log.error(
                        "cannot fsync the results of run %s: %s; appends go on, and the "
                        "run's next sync() or finish() reports it", self._name, exc,
                    )  # fmt: skip
