"""`WorkerThreads`: a bounded pool of threads that start without a handshake.

Why not `concurrent.futures.ThreadPoolExecutor`: `threading.Thread.start()` waits until
the new thread is up and running before it returns. That handshake costs two thread
switches, and on a busy two-core machine starting 200 threads that way takes 30 to 60 ms,
during which the first samples of a run wait for their thread. The threads here are
started with `_thread.start_new_thread` (the documented low-level API under `threading`),
which returns as soon as the OS thread exists, so 200 threads start in about 10 ms and
each begins its work as soon as it gets the GIL.

What that gives up, and why it does not matter here: the threads are not
`threading.Thread` objects (`threading.current_thread()` in one returns a dummy thread),
and the interpreter does not wait for them at exit. Like `threading.Thread`, they install
the hooks of `threading.settrace` and `threading.setprofile`, so coverage, debuggers and
profilers see them. The pool's owner waits for its work
with `join()` or `shutdown(wait=True)`; a task still running at interpreter exit (a hung
agent whose sample was given up) does not keep the process alive.

Tasks are plain callables of no arguments; an exception escaping a task is logged (the
pool's users turn failures into results before that). Tasks run in the context (in the
`contextvars` sense) of the thread, not of the submitter: pass `copy_context().run` bound
to the task when the task needs the submitter's context variables.

Examples:
    >>> import threading
    >>> done = []
    >>> pool = WorkerThreads(4, name="example")
    >>> for i in range(8):
    ...     pool.submit(lambda i=i: done.append(i))
    >>> pool.join()
    True
    >>> sorted(done)
    [0, 1, 2, 3, 4, 5, 6, 7]
    >>> pool.shutdown()
"""

from __future__ import annotations

import _thread
import contextvars
import logging
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.lowlevel

from weakincentives.errors import ConfigurationError

__all__ = ["WorkerThreads", "call_abandonable", "run_abandonable"]

_log = logging.getLogger(__name__)

_STOP = None  # the queue item that tells one idle thread to exit

T = TypeVar("T")


class WorkerThreads:
    """Runs submitted callables on up to `max_workers` threads, started on demand.

    A task submitted while a thread is idle goes to that thread; otherwise a new thread
    starts, up to `max_workers`; beyond that, tasks queue. Threads stay alive, idle,
    until `shutdown()`.

    Args:
        max_workers: Threads at most (tasks running at once).
        name: Used in log messages.

    Raises:
        ConfigurationError: `max_workers` is not a positive integer.
    """

    def __init__(self, max_workers: int, *, name: str = "wink") -> None:
        if not isinstance(max_workers, int) or max_workers < 1:
            raise ConfigurationError(f"max_workers must be an integer >= 1, got {max_workers!r}")
        self._max = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # one permit per thread waiting for a task
        self._cond = threading.Condition()
        self._threads = 0  # started and not exited
        self._unfinished = 0  # submitted and not finished
        self._closed = False

    @property
    def max_workers(self) -> int:
        """Threads at most."""
        return self._max

    @property
    def threads(self) -> int:
        """Threads alive now (started and not exited)."""
        with self._cond:
            return self._threads

    def submit(self, task: Callable[[], object]) -> None:
        """Run `task()` on a pool thread.

        Raises:
            RuntimeError: The pool was shut down.
        """
        with self._cond:
            if self._closed:
                raise RuntimeError(f"{self._name}: cannot submit to a pool that was shut down")
            self._unfinished += 1
            self._queue.put(task)
            if self._idle.acquire(blocking=False):
                return  # an idle thread takes it
            if self._threads >= self._max:
                return  # queued until a thread is free
            self._threads += 1
        try:
            _thread.start_new_thread(self._work, ())
        except BaseException:
            with self._cond:
                self._threads -= 1
            raise

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every submitted task has finished; False if `timeout` ran out first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._unfinished == 0, timeout)

    def shutdown(self, *, wait: bool = True) -> None:
        """Refuse new tasks and let the threads exit once the queued tasks are done.

        Args:
            wait: Block until every thread has exited (queued tasks run first).
        """
        with self._cond:
            if not self._closed:
                self._closed = True
                for _ in range(self._threads):
                    self._queue.put(_STOP)
            if wait:
                self._cond.wait_for(lambda: self._threads == 0)

    def _work(self) -> None:
        # What `threading.Thread` does for its threads: install the trace and profile
        # hooks set with `threading.settrace`/`setprofile` (coverage, debuggers,
        # profilers), which a thread started through `_thread` would not get.
        trace, profile = threading.gettrace(), threading.getprofile()
        if trace is not None:
            sys.settrace(trace)
        if profile is not None:
            sys.setprofile(profile)
        try:
            while True:
                task = self._queue.get()
                if task is _STOP:
                    return
                try:
                    task()
                except BaseException:  # a pool thread must outlive any task
                    _log.exception("%s: a task raised", self._name)
                with self._cond:
                    self._unfinished -= 1
                    if self._unfinished == 0:
                        self._cond.notify_all()
                self._idle.release()
        finally:
            with self._cond:
                self._threads -= 1
                self._cond.notify_all()


_ABANDONABLE = WorkerThreads(2**20, name="wink-abandonable")
"""The threads of `run_abandonable`: as many as are busy (the callers' limiter bounds the
running ones; the rest are stuck calls that were given up on)."""


async def run_abandonable(fn: Callable[[], T], limiter: anyio.CapacityLimiter) -> T:
    """Run `fn` in a thread the caller may give up on without it holding the process.

    Like `anyio.to_thread.run_sync(fn, abandon_on_cancel=True, limiter=limiter)`, but
    anyio's worker threads are ordinary threads, which the interpreter waits for at exit:
    one stuck call (a hung agent whose sample timed out) would hold the process forever
    after its run ended. This runs `fn` on a `WorkerThreads` thread instead (not waited
    for at exit), in a copy of the caller's context, under `limiter`; the caller awaits
    an event the thread sets through the event loop's token when `fn` returns. When the
    caller is cancelled, it returns at once and the thread finishes (or not) on its own;
    its result is dropped.
    """
    async with limiter:
        token = anyio.lowlevel.current_token()
        done = anyio.Event()
        outcome: list[tuple[bool, Any]] = []
        context = contextvars.copy_context()

        def task() -> None:
            try:
                outcome.append((True, context.run(fn)))
            except BaseException as exc:  # handed to the caller, which raises it
                outcome.append((False, exc))
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except Exception:  # the run is over (the loop closed): nobody waits for this
                _log.debug("an abandoned call finished after its event loop closed")

        _ABANDONABLE.submit(task)
        await done.wait()
    ok, value = outcome[0]
    if ok:
        return cast(T, value)
    raise value


def call_abandonable(fn: Callable[[], T], timeout: float) -> T:
    """Call `fn` in a thread the caller gives up on after `timeout` seconds.

    The blocking counterpart of `run_abandonable`, for a caller that is a thread itself
    (a mailbox worker's handler): it waits for `fn` at most `timeout` seconds (wall
    clock), then raises `TimeoutError` and leaves the thread to finish, or not, on its
    own; the interpreter does not wait for that thread at exit. `fn` runs in a copy of
    the caller's context; what it raises is raised here.

    Raises:
        TimeoutError: `fn` did not return within `timeout` seconds.
    """
    done = threading.Event()
    outcome: list[tuple[bool, Any]] = []
    context = contextvars.copy_context()

    def task() -> None:
        try:
            outcome.append((True, context.run(fn)))
        except BaseException as exc:  # handed to the caller, which raises it
            outcome.append((False, exc))
        finally:
            done.set()

    _ABANDONABLE.submit(task)
    if not done.wait(timeout):
        raise TimeoutError(f"the call did not return within {timeout:g}s")
    ok, value = outcome[0]
    if ok:
        return cast(T, value)
    raise value
