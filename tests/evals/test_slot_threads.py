"""Sync targets on slot threads that start narrow (`runner._slots`).

A run without environments runs sync samples on long-lived slot threads: one thread
while the calls never wait (results written in batches), every slot as soon as a call is
seen waiting; a call past its timeout is recorded as such and its thread replaced. The
tests that need the pool to stay narrow set the monitor's tick to 30 seconds (it then
never checks during the run); the others use the real tick and targets that can only
finish when several calls run at once.
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

import weakincentives.evals.runner._scheduler as local_run
import weakincentives.evals.runner._slots as slots_module
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.evals import RunStore, Sample, evaluate, exact_match, run_eval
from weakincentives.evals.runner._slots import BATCH, BUSY_TICKS, sleeps_in_kernel, stalled
from weakincentives.evals.store import RunHandle
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop, WorkerThreads

SETTLE = 10.0  # seconds a condition that must come true may take on a loaded machine


def upper_samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"Q{i}") for i in range(n)]


def wait_until(condition: Callable[[], bool]) -> bool:
    for _ in range(int(SETTLE / 0.01)):
        if condition():
            return True
        threading.Event().wait(0.01)
    return condition()


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """The monitor never ticks during a test: the pool stays on one thread."""
    monkeypatch.setattr(slots_module, "STALL_TICK", 30.0)


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> list[WorkerThreads]:
    """Every slot pool the runner makes."""
    made: list[WorkerThreads] = []

    class Recording(WorkerThreads):
        def __init__(self, max_workers: int, *, name: str = "wink") -> None:
            super().__init__(max_workers, name=name)
            made.append(self)

    monkeypatch.setattr(local_run, "WorkerThreads", Recording)
    return made


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every batch a run handle writes."""
    sizes: list[int] = []
    extend = RunHandle.extend

    def recording(self: RunHandle, results: Any) -> None:
        batch = list(results)
        sizes.append(len(batch))
        extend(self, batch)

    monkeypatch.setattr(RunHandle, "extend", recording)
    return sizes


# -- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ticks", "sleeping", "cpu_share", "widen"),
    [
        (0, True, 0.0, False),  # just made progress
        (1, True, 0.9, True),  # sleeps in the kernel: its call waits, more threads help
        (1, False, 0.0, False),  # runnable: the machine is busy, more threads would not help
        (1, None, 0.1, True),  # no thread state: little CPU over the tick is a wait
        (1, None, 0.9, False),  # computing: more threads only share the GIL
        (1, None, None, True),  # the platform cannot tell: a stall counts as a wait
        (BUSY_TICKS - 1, False, 1.0, False),
        (BUSY_TICKS, False, 1.0, True),  # a long computation may release the GIL
    ],
)
def test_a_stalled_thread_widens_the_pool_when_it_waits(
    ticks: int, sleeping: bool | None, cpu_share: float | None, widen: bool
) -> None:
    assert stalled(ticks, sleeping, cpu_share) is widen


@pytest.mark.parametrize(
    ("content", "sleeping"),
    [
        (b"4242 (python3) S 1 4242 4242 0 -1", True),
        (b"4242 (wink (slot) 2) D 1 4242", True),  # a name with spaces and parentheses
        (b"4242 (python3) R 1 4242 4242 0 -1", False),
        (b"not a stat line", None),
        (None, None),  # no such file: not Linux, or the thread has exited
    ],
)
def test_the_thread_state_is_read_from_proc(
    tmp_path: Path, content: bytes | None, sleeping: bool | None
) -> None:
    stat = tmp_path / "stat"
    if content is not None:
        stat.write_bytes(content)
    assert sleeps_in_kernel(str(stat)) is sleeping


def test_the_state_of_a_sleeping_thread_is_s() -> None:
    ready, release = threading.Event(), threading.Event()
    native: list[int] = []

    def sleeper() -> None:
        native.append(threading.get_native_id())
        ready.set()
        release.wait(SETTLE)

    thread = threading.Thread(target=sleeper)
    thread.start()
    try:
        ready.wait(SETTLE)
        stat = f"/proc/self/task/{native[0]}/stat"
        if not Path(stat).exists():
            pytest.skip("no /proc here")
        assert wait_until(lambda: sleeps_in_kernel(stat) is True)
    finally:
        release.set()
        thread.join()


# -- narrow: calls that never wait --------------------------------------------------------------


class AnswerAgent(AgentLoop[str, str]):
    """A sync agent whose model answers at once."""

    def create_prompt(self, request: str) -> Prompt[str]:
        template = PromptTemplate[str](
            ns="tests", key="slot-threads",
            sections=(MarkdownSection("Question", "question", "$question", role="user"),),
        )  # fmt: skip
        return Prompt(template).bind(question=request)


def upper_function(seen: Callable[[], None]) -> Callable[[str], str]:
    def upper(text: str) -> str:
        seen()
        return text.upper()

    return upper


def upper_agent(seen: Callable[[], None]) -> AnswerAgent:
    def model(request: ModelRequest) -> FunctionReply:
        seen()
        return FunctionReply(text=request.last_user_text().rsplit("\n", 1)[-1].upper())

    return AnswerAgent(adapter=FunctionAdapter(model))


TARGETS: dict[str, Callable[[Callable[[], None]], Any]] = {
    "function": upper_function,
    "agent": upper_agent,
}


@pytest.mark.usefixtures("narrow")
@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_calls_that_never_wait_run_on_one_thread_with_batched_writes(
    tmp_path: Path, writes: list[int], kind: str
) -> None:
    threads: set[int] = set()
    target = TARGETS[kind](lambda: threads.add(threading.get_ident()))
    seen: list[str] = []

    report = run_eval(
        upper_samples(300), target, exact_match, max_concurrent=4, store=tmp_path,
        progress=lambda result: seen.append(result.sample_id),
    )  # fmt: skip

    assert report.total == 300 and report.pass_rate == 1.0
    assert len(threads) == 1
    # One write per batch, not one per sample; the sink and the store agree on the order.
    assert writes == [BATCH] * (300 // BATCH) + [300 % BATCH]
    assert seen == [r.sample_id for r in report.results]
    assert sorted(seen) == sorted(f"s{i}" for i in range(300))


@pytest.mark.usefixtures("narrow")
def test_failures_on_the_narrow_thread_are_error_results(tmp_path: Path) -> None:
    def agent(text: str) -> str:
        if int(text[1:]) % 3 == 0:
            raise ValueError(f"no answer to {text}")
        return text.upper()

    report = run_eval(upper_samples(200), agent, exact_match, store=tmp_path, run_id="r")

    stored = {r.sample_id: r for r in RunStore(tmp_path).open("r").iter_results()}
    assert len(stored) == 200 == report.total
    assert stored["s3"].error_kind == "agent" and "no answer to q3" in (stored["s3"].error or "")
    assert stored["s4"].passed and stored["s4"].error is None
    assert report.error_count == len(range(0, 200, 3))


def test_buffered_results_reach_the_store_while_the_next_call_waits(
    tmp_path: Path, writes: list[int]
) -> None:
    # The 20th call returns only once the 19 results before it are in the store: the
    # monitor writes what the narrow thread buffered within a tick.
    written: list[bool] = []

    def agent(text: str) -> str:
        if text == "q19":
            written.append(wait_until(lambda: sum(writes) == 19))
        return text.upper()

    report = run_eval(upper_samples(30), agent, exact_match, max_concurrent=1, store=tmp_path)

    assert report.pass_rate == 1.0
    assert written == [True]
    assert sum(writes) == 30


def test_each_call_runs_in_its_own_copy_of_the_callers_context(narrow: None) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("slot_test", default="unset")
    entered: list[str] = []

    def agent(text: str) -> str:
        entered.append(var.get())
        var.set(text)  # local to this call: the next sample on the thread must not see it
        return text.upper()

    var.set("caller")
    report = run_eval(upper_samples(100), agent, exact_match, max_concurrent=3)

    assert report.pass_rate == 1.0
    assert entered == ["caller"] * 100
    assert var.get() == "caller"


# -- wide: calls that wait ----------------------------------------------------------------------


@pytest.mark.parametrize("tells", ["thread state", "cpu time", "nothing"])
def test_calls_that_wait_all_run_at_once(
    pools: list[WorkerThreads], monkeypatch: pytest.MonkeyPatch, tells: str, tmp_path: Path
) -> None:
    # However the monitor tells a wait (see `stalled`): the thread's state (Linux), its
    # CPU time, or nothing at all (any stall widens).
    if tells != "thread state":
        monkeypatch.setattr(slots_module, "sleeps_in_kernel", lambda stat: None)
    if tells == "nothing":
        monkeypatch.delattr(time, "pthread_getcpuclockid", raising=False)
    # Each call returns only once four calls are in flight together.
    barrier = threading.Barrier(4, timeout=SETTLE)
    var: contextvars.ContextVar[str] = contextvars.ContextVar("slot_wait", default="unset")
    threads: set[int] = set()
    entered: list[str] = []

    def agent(text: str) -> str:
        threads.add(threading.get_ident())
        entered.append(var.get())
        var.set(text)
        barrier.wait()
        return text.upper()

    var.set("caller")
    seen: list[str] = []
    report = run_eval(
        upper_samples(12), agent, exact_match, max_concurrent=4, store=tmp_path,
        progress=lambda result: seen.append(result.sample_id),
    )  # fmt: skip

    assert report.pass_rate == 1.0, [r.error for r in report.results if r.error]
    assert len(threads) == 4
    assert entered == ["caller"] * 12
    assert seen == [r.sample_id for r in report.results]  # the sink sees the store's order
    assert wait_until(lambda: pools[0].threads == 0)  # every slot thread has exited


def test_a_long_computation_widens_the_pool_too(pools: list[WorkerThreads]) -> None:
    # The first call computes (holding the GIL between checks) until the second one runs.
    second = threading.Event()

    def agent(text: str) -> str:
        if text == "q1":
            second.set()
            return text.upper()
        for _ in range(int(SETTLE * 1e7)):
            if second.is_set():
                return text.upper()
        return "gave up"

    report = run_eval(upper_samples(2), agent, exact_match, max_concurrent=2)

    assert report.pass_rate == 1.0
    assert wait_until(lambda: pools[0].threads == 0)


def test_the_wait_of_the_last_call_leaves_no_thread_behind(pools: list[WorkerThreads]) -> None:
    def agent(text: str) -> str:
        threading.Event().wait(0.02 if text == "q4" else 0)
        return text.upper()

    report = run_eval(upper_samples(5), agent, exact_match, max_concurrent=8)

    assert report.pass_rate == 1.0
    assert wait_until(lambda: pools[0].threads == 0)


# -- cancelling ---------------------------------------------------------------------------------


def _cancel_when(started: threading.Event, run: Callable[[], Any]) -> None:
    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await anyio.to_thread.run_sync(started.wait)
            tg.cancel_scope.cancel()

    anyio.run(main)


@pytest.mark.usefixtures("narrow")
def test_cancelling_a_narrow_run_keeps_what_it_buffered(
    tmp_path: Path, pools: list[WorkerThreads]
) -> None:
    # The 530th call hangs until the run was cancelled: by then 529 results are done, 512
    # written in batches of 64 and 17 buffered; the hung call's late result is discarded.
    started, release = threading.Event(), threading.Event()
    calls = {"n": 0}

    def agent(text: str) -> str:
        calls["n"] += 1
        if calls["n"] == 530:
            started.set()
            release.wait(SETTLE)
        return text.upper()

    def samples() -> Iterator[Sample[str, str]]:
        for i in range(10**9):
            yield Sample(id=f"s{i}", input=f"q{i}", expected=f"Q{i}")

    run = functools.partial(
        evaluate, samples(), agent, exact_match, store=tmp_path, run_id="cut", max_concurrent=4
    )
    try:
        _cancel_when(started, run)
    finally:
        release.set()

    assert wait_until(lambda: pools[0].threads == 0)
    assert calls["n"] == 530  # nothing ran after the cancel
    stored = RunStore(tmp_path).open("cut")
    assert stored.status == "interrupted"
    results = list(stored.iter_results())
    assert [r.sample_id for r in results] == [f"s{i}" for i in range(529)]
    assert all(r.passed for r in results)


# -- timeouts -----------------------------------------------------------------------------------


def test_a_timeout_is_kept_on_slot_threads_without_a_hop_per_sample(
    monkeypatch: pytest.MonkeyPatch, pools: list[WorkerThreads]
) -> None:
    hops = {"n": 0}
    run_sync = anyio.to_thread.run_sync

    async def counting(*args: Any, **kwargs: Any) -> Any:
        hops["n"] += 1
        return await run_sync(*args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    release = threading.Event()

    def agent(text: str) -> str:
        if text == "q1":
            release.wait(SETTLE)  # stuck well past the timeout
        return text.upper()

    try:
        report = run_eval(upper_samples(30), agent, exact_match, timeout=0.5, max_concurrent=3)
    finally:
        release.set()

    by_id = {r.sample_id: r for r in report.results}
    assert len(by_id) == 30 == report.total
    assert by_id["s1"].error_kind == "timeout"
    assert by_id["s1"].error == (
        "TimeoutError: the sample did not finish within its timeout of 0.5s"
    )
    assert all(r.passed for r in report.results if r.sample_id != "s1")
    assert hops["n"] == 1  # the run waited in one hop; the samples ran on slot threads
    assert wait_until(lambda: pools[0].threads == 0)  # the stuck thread too, once released


def test_a_timed_out_call_is_replaced_so_max_concurrent_samples_still_run() -> None:
    # One slot is stuck in s0 past its timeout; two of the other samples can only run at
    # once if the runner starts a slot in place of the abandoned one.
    release = threading.Event()
    lock = threading.Lock()
    inside = {"now": 0, "peak": 0}

    def agent(text: str) -> str:
        if text == "q0":
            release.wait(SETTLE)
            return text.upper()
        with lock:
            inside["now"] += 1
            inside["peak"] = max(inside["peak"], inside["now"])
        threading.Event().wait(0.02)
        with lock:
            inside["now"] -= 1
        return text.upper()

    try:
        report = run_eval(upper_samples(60), agent, exact_match, timeout=0.4, max_concurrent=2)
    finally:
        release.set()

    assert report.total == 60
    assert [r.sample_id for r in report.results if not r.passed] == ["s0"]
    assert inside["peak"] == 2


def test_a_late_result_of_a_timed_out_call_is_discarded(tmp_path: Path) -> None:
    release, returned = threading.Event(), threading.Event()

    def agent(text: str) -> str:
        if text == "q2":
            release.wait(SETTLE)
            returned.set()
        return text.upper()

    try:
        run_eval(
            upper_samples(5), agent, exact_match, timeout=0.3, store=tmp_path, run_id="r",
            max_concurrent=2,
        )  # fmt: skip
    finally:
        release.set()
    assert returned.wait(SETTLE)
    threading.Event().wait(0.05)  # the abandoned thread has time to (wrongly) record it

    results = list(RunStore(tmp_path).open("r").iter_results())
    assert sorted(r.sample_id for r in results) == [f"s{i}" for i in range(5)]
    assert next(r for r in results if r.sample_id == "s2").error_kind == "timeout"


def test_timeouts_count_for_fail_fast(tmp_path: Path) -> None:
    release = threading.Event()

    def agent(text: str) -> str:
        release.wait(SETTLE)
        return text.upper()

    try:
        report = run_eval(
            upper_samples(100), agent, exact_match, timeout=0.2, max_concurrent=10,
            store=tmp_path, run_id="r",
        )  # fmt: skip
    finally:
        release.set()

    assert not report.complete
    assert (
        "the first 10 results all failed with the same error (timeout)"
        in (report.config["stopped"])
    )
    assert 10 <= report.total < 100
    assert RunStore(tmp_path).open("r").manifest.status == "interrupted"
