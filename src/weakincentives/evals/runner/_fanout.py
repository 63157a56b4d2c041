"""Start the local runner's worker tasks cheaply: `fan_out`.

`LocalRun` runs `max_concurrent` worker tasks for targets awaited on the event loop. An
anyio task group's `start_soon` costs 20-35 microseconds a task on asyncio (about ten
times `asyncio.create_task`): at 200 workers, 4-7 ms pass before the last one starts
its first sample, and every later round of a latency-bound run starts that much later
too (about 1% of a 100 ms-per-sample run). On asyncio, `fan_out` starts the workers as
plain asyncio tasks and waits for them in the calling task, with a task group's
semantics kept where it matters: the first worker to raise cancels the others, a cancel
of the caller cancels them all, and `fan_out` returns or raises only once every worker
has ended. On another backend (trio) the workers are the task group's tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Coroutine
from typing import Any

import anyio
from anyio.abc import TaskGroup

__all__ = ["fan_out"]


async def fan_out(
    worker: Callable[[], Coroutine[Any, Any, None]], count: int, tg: TaskGroup
) -> None:
    """Run `count` calls of `worker` at once.

    On asyncio, returns when every call has returned (or raises the first exception,
    after the others were cancelled and have ended). Elsewhere, starts them in `tg` and
    returns at once: the task group waits for them.
    """
    if not _on_asyncio():
        for _ in range(count):
            tg.start_soon(worker)
        return
    tasks = [asyncio.ensure_future(worker()) for _ in range(count)]
    if not tasks:
        return
    try:
        # Not `gather`: anyio cancels a waiting task again on every turn until it
        # leaves the cancelled scope, and `gather` would pass each of those cancels on
        # (cutting the workers' clean-up short); `wait` passes none.
        _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:  # the caller was cancelled
        await _stop(tasks)
        raise
    if pending:  # one raised
        await _stop(pending)
    for task in tasks:  # the first failure in start order (each one read: none is logged)
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            raise failure


async def _stop(tasks: Collection[asyncio.Task[None]]) -> None:
    """Cancel `tasks` once each and wait until they have ended, shielded from cancels."""
    for task in tasks:
        task.cancel()
    with anyio.CancelScope(shield=True):
        await asyncio.wait(tasks)


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another backend (trio): no asyncio loop runs here
        return False
    return True
