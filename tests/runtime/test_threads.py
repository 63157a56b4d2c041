"""`WorkerThreads`: bounded, reused, handshake-free threads."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from weakincentives.errors import ConfigurationError
from weakincentives.runtime import WorkerThreads


def test_runs_every_task_on_at_most_max_workers_threads() -> None:
    pool = WorkerThreads(3, name="t")
    lock = threading.Lock()
    state = {"running": 0, "peak": 0, "done": 0}
    gate = threading.Barrier(3, timeout=5)
    idents: set[int] = set()

    def task() -> None:
        with lock:
            state["running"] += 1
            state["peak"] = max(state["peak"], state["running"])
            idents.add(threading.get_ident())
        gate.wait()  # three tasks at a time, so the pool really runs three threads
        with lock:
            state["running"] -= 1
            state["done"] += 1

    for _ in range(9):
        pool.submit(task)

    assert pool.join(timeout=10)
    assert state == {"running": 0, "peak": 3, "done": 9}
    assert len(idents) == 3 and pool.threads == 3
    pool.shutdown()
    assert pool.threads == 0


def test_an_idle_thread_is_reused_instead_of_starting_another() -> None:
    pool = WorkerThreads(8)
    idents: list[int] = []
    for _ in range(5):
        pool.submit(lambda: idents.append(threading.get_ident()))
        assert pool.join(timeout=5)

    assert len(set(idents)) == 1 and pool.threads == 1
    pool.shutdown()


def test_a_task_that_raises_is_logged_and_the_thread_keeps_working(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool = WorkerThreads(1, name="pool-x")
    done: list[int] = []

    def boom() -> None:
        raise ValueError("broken task")

    with caplog.at_level(logging.ERROR, logger="weakincentives.runtime.threads"):
        pool.submit(boom)
        pool.submit(lambda: done.append(1))
        assert pool.join(timeout=5)

    assert done == [1]
    assert "pool-x: a task raised" in caplog.text and "broken task" in caplog.text
    pool.shutdown()


def test_join_times_out_while_a_task_runs() -> None:
    pool = WorkerThreads(1)
    release = threading.Event()
    pool.submit(lambda: release.wait(5))

    assert pool.join(timeout=0.01) is False
    release.set()
    assert pool.join(timeout=5) is True
    pool.shutdown()


def test_shutdown_runs_queued_tasks_then_refuses_new_ones() -> None:
    pool = WorkerThreads(1)
    release = threading.Event()
    done: list[str] = []
    pool.submit(lambda: release.wait(5))
    pool.submit(lambda: done.append("queued"))
    release.set()

    pool.shutdown(wait=True)

    assert done == ["queued"] and pool.threads == 0
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: None)
    pool.shutdown()  # twice is fine


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_max_workers_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="max_workers"):
        WorkerThreads(bad)  # type: ignore[arg-type]  # the check under test


def test_threads_install_the_threading_trace_hook_like_threading_thread() -> None:
    # Coverage and debuggers register through threading.settrace; pool threads honour it.
    seen: list[str] = []

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == "traced_task":
            seen.append(threading.current_thread().name)

    def traced_task() -> None:
        pass

    old = threading.gettrace()
    threading.settrace(tracer)
    try:
        pool = WorkerThreads(1)
        pool.submit(traced_task)
        assert pool.join(timeout=5)
        pool.shutdown()
    finally:
        threading.settrace(old)

    assert len(seen) == 1
