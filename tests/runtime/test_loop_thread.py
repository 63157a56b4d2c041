"""LoopThread: an asyncio loop in a daemon thread, its tasks, its blocking pool, its stop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from tests.runtime.workers import wait_for
from weakincentives.runtime._loop_thread import LoopThread


def threads_named(prefix: str) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(prefix)]


def recording(into: list[tuple[int, str]], n: int) -> Callable[[], Coroutine[Any, Any, None]]:
    async def task() -> None:
        await asyncio.sleep(0)
        into.append((n, threading.current_thread().name))

    return task


def test_spawn_runs_each_task_on_the_loops_own_thread() -> None:
    ran: list[tuple[int, str]] = []
    loop = LoopThread("lt-spawn", max_workers=1)
    try:
        loop.spawn([recording(ran, 0), recording(ran, 1)])
        loop.spawn([recording(ran, 2)])
        wait_for(lambda: len(ran) == 3)
    finally:
        loop.stop()

    assert sorted(ran) == [(0, "lt-spawn"), (1, "lt-spawn"), (2, "lt-spawn")]


def test_stop_cancels_a_pending_task_and_ends_the_thread() -> None:
    events: list[str] = []
    started = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        finally:
            events.append("finally")

    loop = LoopThread("lt-stop", max_workers=1)
    loop.spawn([forever])
    assert started.wait(5)
    assert threads_named("lt-stop") == ["lt-stop"]

    loop.stop()

    # The task was cancelled and awaited before stop() returned; the loop thread is gone.
    assert events == ["cancelled", "finally"]
    assert "lt-stop" not in threads_named("lt-stop")


def test_to_thread_uses_the_loops_pool_of_max_workers_named_threads() -> None:
    barrier = threading.Barrier(3, timeout=5)  # passes only if three calls run at once
    names: list[str] = []

    def blocking() -> str:
        barrier.wait()
        return threading.current_thread().name

    async def offload() -> None:
        names.append(await asyncio.to_thread(blocking))

    loop = LoopThread("lt-pool", max_workers=3)
    try:
        loop.spawn([offload, offload, offload])
        wait_for(lambda: len(names) == 3)
    finally:
        loop.stop()

    assert all(name.startswith("lt-pool-blocking") for name in names)
    assert len(set(names)) == 3
    wait_for(lambda: threads_named("lt-pool") == [], timeout=2)
