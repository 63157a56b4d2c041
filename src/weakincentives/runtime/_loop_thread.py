"""`LoopThread`: an asyncio event loop in a thread of its own, fed from other threads.

A `MailboxWorker` with async handlers receives messages in its calling thread (mailbox
calls block) and runs the handlers as tasks here: hundreds of samples that wait on I/O
then share one thread instead of a thread each, which on CPython means far fewer GIL
handoffs (see `worker.py`).

`spawn` hands a batch of coroutine factories over with one `call_soon_threadsafe` (one
wake-up of the loop per batch, not per task). `stop` ends the loop; tasks still running
then are cancelled and awaited, so nothing of theirs runs after `stop` returns. Blocking
work a task hands to `asyncio.to_thread` runs on the loop's own pool of `max_workers`
threads (the default pool would cap it at a few threads).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["LoopThread"]

_log = logging.getLogger(__name__)

TaskFactory = Callable[[], Coroutine[Any, Any, None]]
"""Makes one task's coroutine; called on the loop's thread."""


class LoopThread:
    """An event loop running in a daemon thread named `name` (see the module docstring).

    Args:
        name: Name of the thread (and prefix of its blocking-work threads).
        max_workers: Threads for `asyncio.to_thread` calls made by its tasks.
    """

    def __init__(self, name: str, *, max_workers: int) -> None:
        self._loop = asyncio.new_event_loop()
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix=f"{name}-blocking")
        self._loop.set_default_executor(self._executor)
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def spawn(self, factories: Sequence[TaskFactory]) -> None:
        """Start one task per factory on the loop (thread-safe; returns at once)."""
        self._loop.call_soon_threadsafe(self._start, factories)

    def stop(self) -> None:
        """Stop the loop, cancel the tasks still running, wait for them and close.

        Call it from another thread, once; the loop cannot be restarted.
        """
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()

    def _start(self, factories: Sequence[TaskFactory]) -> None:
        for factory in factories:
            task = self._loop.create_task(factory())
            self._tasks.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(self._tasks.discard)

    def _serve(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                leftovers = [task for task in self._tasks if not task.done()]
                for task in leftovers:
                    task.cancel()
                if leftovers:
                    loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            except Exception:  # pragma: no cover - a broken task must not hide the others
                _log.exception("%s: error while stopping", self._thread.name)
            finally:
                asyncio.set_event_loop(None)
                loop.close()
                self._executor.shutdown(wait=False, cancel_futures=True)
