"""EvalLoop over a `FunctionLoop` around an `async def`: samples as tasks on one loop.

The async path gives the results the sync path gives for the same outputs (through the
mailbox and through `evaluate_async`), a per-sample timeout cancels the function, many
samples run at once (bounded by `max_concurrent`), bundles record each sample's own
logs, and a stopped loop whose samples were in flight restarts without double counting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.evals.bundles import open_checked_bundles
from tests.runtime.workers import run_in_thread, wait_for
from weakincentives.adapters import FunctionAdapter
from weakincentives.clock import SYSTEM_CLOCK, Clock, FakeClock
from weakincentives.debug import DebugBundle
from weakincentives.errors import AdapterConnectionError, ConfigurationError
from weakincentives.evals import (
    BASELINE,
    Dataset,
    EvalLoop,
    EvalLoopConfig,
    EvalRequest,
    EvalResult,
    Sample,
    Score,
    collect_results,
    exact_match,
    inline_evaluator,
    run_eval,
    submit_dataset,
)
from weakincentives.evals.runner._sample import SampleOutcome
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import (
    AgentLoop,
    DeadLetter,
    DLQPolicy,
    FunctionLoop,
    InMemoryMailbox,
    PromptExecuted,
    RetryPolicy,
    Session,
    SessionView,
)
from weakincentives.runtime.mailbox import Mailbox

FN_LOG = logging.getLogger("tests.evals.async_fn")


def mailboxes(clock: Clock = SYSTEM_CLOCK) -> tuple[InMemoryMailbox[Any, Any], ...]:
    return tuple(InMemoryMailbox(name, clock=clock) for name in ("eval-requests", "eval-results"))


def drain(loop: EvalLoop) -> None:
    loop.run(until_drained=True, wait_time_seconds=0)


def comparable(result: EvalResult) -> dict[str, Any]:
    """A result's fields, without those that differ between any two runs."""
    fields = dataclasses.asdict(result)
    for key in ("request_id", "latency_ms", "bundle_path"):
        del fields[key]
    fields["session_id"] = fields["session_id"] is not None  # a fresh id per run, if any
    return fields


# -- the same results as the sync path -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    n: int


def target(clock: FakeClock, *, with_session: bool) -> Callable[..., Any]:
    """The sync function under test: what it does depends on the input."""

    def answer(request: str) -> Any:
        if request == "raise":
            raise ValueError("bad input")
        if request == "none":
            return None
        if request == "own timeout":
            raise TimeoutError("the function's own timeout")
        if request == "late":
            clock.advance(60.0)  # past a 30 s per-sample timeout, on the run's clock
            return "late"
        if request.startswith("dict "):
            a, b = request.removeprefix("dict ").split("+")
            return {"sum": int(a) + int(b)}
        a, b = request.split("+")
        return str(int(a) + int(b))

    if not with_session:
        return answer

    def answer_in_session(request: str, session: Session) -> Any:
        session.dispatch(Step(len(request)))
        return answer(request)

    return answer_in_session


def async_twin(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as an `async def` (with the same `session` parameter, if it has one)."""
    if "session" in inspect.signature(fn).parameters:

        async def with_session(request: Any, session: Session) -> Any:
            await asyncio.sleep(0)
            return fn(request, session=session)

        return with_session

    async def plain(request: Any) -> Any:
        await asyncio.sleep(0)
        return fn(request)

    return plain


def user_check(output: Any, expected: Any) -> Score:
    """A plain user evaluator (not inline: scored in a worker thread on the async path)."""
    if expected == "evaluator raises":
        raise ValueError("evaluator exploded")
    return exact_match(output, expected)


@inline_evaluator
def inline_check(output: Any, expected: Any) -> Score:
    """An inline evaluator (scored on the event loop on the async path)."""
    return user_check(output, expected)


def session_check(output: Any, expected: Any, session: SessionView) -> Score:
    """A session-aware evaluator: reads what the run recorded."""
    if expected == "evaluator raises":
        raise ValueError("evaluator exploded")
    steps = [s.n for s in session[Step].all()]
    executed = len(session[PromptExecuted].all())
    passed = exact_match(output, expected).passed
    return Score(value=float(passed), passed=passed, reason=f"steps={steps} runs={executed}")


EVALUATORS: dict[str, Callable[..., Score]] = {
    "exact-match": exact_match,
    "user-function": user_check,
    "inline-function": inline_check,
    "session-aware": session_check,
}

CASES: Dataset[str, Any] = Dataset(
    samples=(
        Sample(id="pass", input="2+2", expected="4", metadata={"topic": "sum"}),
        Sample(id="fail", input="3+3", expected="7"),
        Sample(id="raises", input="raise", expected="x"),
        Sample(id="none", input="none", expected="x"),
        Sample(id="own-timeout", input="own timeout", expected="x"),
        Sample(id="late", input="late", expected="late"),
        Sample(id="dict", input="dict 1+2", expected={"sum": 3}),
        Sample(id="evaluator-raises", input="1+1", expected="evaluator raises"),
    )
)


def twin_loops(
    evaluator: str,
    with_session: bool,
    timeout: float | None,
    requests: tuple[Mailbox[Any, Any] | None, Mailbox[Any, Any] | None] = (None, None),
) -> tuple[EvalLoop, EvalLoop]:
    """EvalLoops over the sync function and over its async twin (same name, clock)."""
    clock = FakeClock()
    fn = target(clock, with_session=with_session)
    config = EvalLoopConfig(timeout=timeout)

    def build(loop: FunctionLoop[Any, Any], requests: Mailbox[Any, Any] | None) -> EvalLoop:
        return EvalLoop(
            loop=loop, evaluator=EVALUATORS[evaluator], requests=requests, config=config,
            clock=clock,
        )  # fmt: skip

    sync = build(FunctionLoop(fn, name="target", clock=clock), requests[0])
    asynchronous = build(FunctionLoop(async_twin(fn), name="target", clock=clock), requests[1])
    assert asynchronous.handles_async and not sync.handles_async
    return sync, asynchronous


def expected_kinds(evaluator: str, timeout: float | None) -> dict[str, str | None]:
    raising = None if evaluator == "exact-match" else "evaluator"
    return {
        "pass": None, "fail": None, "raises": "agent", "none": "no_output",
        "own-timeout": "timeout", "late": "timeout" if timeout else None, "dict": None,
        "evaluator-raises": raising,
    }  # fmt: skip


SETTINGS = pytest.mark.parametrize(
    ("evaluator", "with_session", "timeout"),
    [
        *((name, False, None) for name in EVALUATORS),
        ("exact-match", True, None),
        ("session-aware", True, None),
        ("exact-match", False, 30.0),
        ("session-aware", True, 30.0),
    ],
)


@SETTINGS
def test_the_async_path_gives_the_sync_results_through_the_mailbox(
    evaluator: str, with_session: bool, timeout: float | None
) -> None:
    sync_boxes, async_boxes = mailboxes(), mailboxes()
    loops = twin_loops(evaluator, with_session, timeout, (sync_boxes[0], async_boxes[0]))
    got: list[dict[str, EvalResult]] = []
    for loop, (requests, results) in zip(loops, (sync_boxes, async_boxes), strict=True):
        submit_dataset(CASES, requests, reply_to=results, run_id="run-1")
        drain(loop)
        assert results.approximate_count() == len(CASES)  # one reply per sample
        report = collect_results(results, len(CASES), timeout_seconds=5, wait_time_seconds=0)
        got.append({r.sample_id: r for r in report.results})
    sync, asynchronous = got

    assert {k: comparable(r) for k, r in asynchronous.items()} == {
        k: comparable(r) for k, r in sync.items()
    }
    assert {k: r.error_kind for k, r in asynchronous.items()} == expected_kinds(evaluator, timeout)
    assert asynchronous["pass"].passed and asynchronous["pass"].metadata == {"topic": "sum"}
    assert asynchronous["dict"].output == {"sum": 3}


@SETTINGS
def test_evaluate_async_gives_the_outcome_evaluate_gives(
    evaluator: str, with_session: bool, timeout: float | None
) -> None:
    sync, asynchronous = twin_loops(evaluator, with_session, timeout)
    requests = [EvalRequest(sample=s, experiment=BASELINE, run_id="r") for s in CASES]

    async def run_all() -> list[SampleOutcome]:
        # One at a time: the "late" sample moves the shared fake clock past the others'
        # deadlines if they are in flight then.
        return [await asynchronous.evaluate_async(r) for r in requests]

    expected = [sync.evaluate(r, delivery_count=1) for r in requests]
    outcomes = asyncio.run(run_all())

    for want, got in zip(expected, outcomes, strict=True):
        assert comparable(got.result) == comparable(want.result)
        assert got.result.request_id == want.result.request_id
        assert (got.failed_stage, type(got.exception)) == (want.failed_stage, type(want.exception))
        assert (got.session is None, got.response) == (want.session is None, want.response)
        if got.session is not None:
            assert got.result.session_id == got.session.session_id
        if got.session is not None and want.session is not None:
            assert steps_of(got.session) == steps_of(want.session)
    sessions = [o.session for o in outcomes if o.session is not None]
    assert bool(sessions) == (with_session or evaluator == "session-aware")


def steps_of(session: Session) -> list[tuple[str, Any]]:
    return [("step", s.n) for s in session[Step].all()] + [
        ("executed", e.output) for e in session[PromptExecuted].all()
    ]


def test_evaluate_async_keeps_the_delivery_count() -> None:
    _, asynchronous = twin_loops("exact-match", False, None)
    request = EvalRequest(sample=CASES.samples[0], experiment=BASELINE)

    outcome = asyncio.run(asynchronous.evaluate_async(request, delivery_count=3))

    assert outcome.result.delivery_count == 3 and outcome.result.passed


def test_evaluate_on_an_async_function_loop_awaits_the_function() -> None:
    sync, asynchronous = twin_loops("exact-match", False, None)
    request = EvalRequest(sample=CASES.samples[0], experiment=BASELINE)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = asynchronous.evaluate(request)

    assert [str(w.message) for w in caught] == []  # no "coroutine ... never awaited"
    assert comparable(got.result) == comparable(sync.evaluate(request).result)


@pytest.mark.parametrize(("failures", "passed"), [(1, True), (99, False)])
def test_transient_failures_of_an_async_function_are_retried(failures: int, passed: bool) -> None:
    calls: Counter[str] = Counter()

    async def flaky(request: str) -> str:
        calls[request] += 1
        if calls[request] <= failures:
            raise AdapterConnectionError("refused")
        return request

    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead")
    requests, results = mailboxes()
    submit_dataset([Sample(id="s", input="q", expected="q")], requests, reply_to=results)
    loop = EvalLoop(
        loop=FunctionLoop(flaky), evaluator=exact_match, requests=requests,
        retry=RetryPolicy(max_attempts=10, base_delay=0.0, jitter=0.0),
        dlq=DLQPolicy(dead, max_deliveries=3),
    )  # fmt: skip

    drain(loop)

    (result,) = collect_results(results, 1, timeout_seconds=5, wait_time_seconds=0).results
    runs = min(failures + 1, 3)
    assert (result.passed, result.delivery_count, calls["q"]) == (passed, runs, runs)
    assert passed or "AdapterConnectionError: refused" in (result.error or "")
    assert passed or result.error_kind == "dead_letter"
    assert loop.stats.retried == runs - 1
    assert dead.approximate_count() == (0 if passed else 1)
    assert requests.approximate_count() == 0


# -- timeouts cancel the function ------------------------------------------------------


def hanging(cancelled: list[str], *, with_session: bool) -> Callable[..., Any]:
    async def wait_forever(request: str) -> str:
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            cancelled.append(request)
            raise
        return request  # pragma: no cover - never reached

    if not with_session:
        return wait_forever

    async def in_session(request: str, session: Session) -> str:
        return await wait_forever(request)

    return in_session


@pytest.mark.parametrize("with_session", [False, True], ids=["plain", "session"])
@pytest.mark.parametrize("path", ["mailbox", "evaluate_async"])
def test_a_timeout_cancels_the_function_and_is_an_error_of_kind_timeout(
    path: str, with_session: bool
) -> None:
    cancelled: list[str] = []
    fn = hanging(cancelled, with_session=with_session)
    requests, results = mailboxes()
    loop = EvalLoop(
        loop=FunctionLoop(fn, name="hang"), evaluator=exact_match, requests=requests,
        config=EvalLoopConfig(timeout=0.05),
    )  # fmt: skip
    sample = Sample(id="s", input="q", expected="q")
    started = time.monotonic()
    if path == "mailbox":
        submit_dataset([sample], requests, reply_to=results)
        drain(loop)
        (result,) = collect_results(results, 1, timeout_seconds=5).results
    else:
        request = EvalRequest(sample=sample, experiment=BASELINE)
        result = asyncio.run(loop.evaluate_async(request)).result
    elapsed = time.monotonic() - started

    assert result.error_kind == "timeout" and not result.passed
    assert result.error == "function hang: cancelled after its timeout of 0.05s"
    assert cancelled == ["q"]  # the function saw the cancellation
    assert elapsed < 1.0


# -- many samples at once --------------------------------------------------------------


def test_two_hundred_samples_run_fifty_at_once_and_each_answers_once() -> None:
    runs: Counter[str] = Counter()
    active = [0, 0]  # now, most (touched on the loop thread only)
    all_in = asyncio.Event()  # used only on the EvalLoop's event loop

    async def echo(request: str) -> str:
        runs[request] += 1
        active[0] += 1
        active[1] = max(active)
        if active[0] == 50:
            all_in.set()
        try:
            # The first fifty samples can only pass together.
            await asyncio.wait_for(all_in.wait(), timeout=5)
            await asyncio.sleep(0)
        finally:
            active[0] -= 1
        return request

    dataset = Dataset(
        samples=tuple(Sample(id=f"s{i}", input=str(i), expected=str(i)) for i in range(200))
    )
    requests, results = mailboxes()
    submit_dataset(dataset, requests, reply_to=results)
    loop = EvalLoop(loop=FunctionLoop(echo), evaluator=exact_match, requests=requests,
                    max_concurrent=50)  # fmt: skip

    drain(loop)

    assert results.approximate_count() == 200  # exactly one reply per sample
    report = collect_results(results, 200, timeout_seconds=5, wait_time_seconds=0)
    assert report.complete and report.total == 200 and report.pass_rate == 1.0
    assert sorted(r.sample_id for r in report.results) == sorted(s.id for s in dataset)
    assert set(runs.values()) == {1} and len(runs) == 200
    assert active == [0, 50]
    assert loop.stats.succeeded == 200 and requests.approximate_count() == 0


# -- debug bundles ---------------------------------------------------------------------


def test_each_async_sample_gets_a_verified_bundle_with_its_own_logs(tmp_path: Path) -> None:
    started = [0]
    all_started = asyncio.Event()  # used only on the EvalLoop's event loop

    async def logged(request: str) -> str:
        FN_LOG.info("start %s", request)
        started[0] += 1
        if started[0] == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), timeout=5)  # the samples interleave
        await asyncio.to_thread(FN_LOG.info, "offloaded %s", request)
        if request == "explode":
            raise RuntimeError("function exploded")
        FN_LOG.info("end %s", request)
        return request

    bundles = tmp_path / "bundles"
    dataset = Dataset(
        samples=(
            Sample(id="a", input="alpha", expected="alpha"),
            Sample(id="b", input="beta", expected="other"),
            Sample(id="bad", input="explode", expected="explode"),
        )
    )
    requests, results = mailboxes()
    submit_dataset(dataset, requests, reply_to=results, run_id="run-1")
    loop = EvalLoop(loop=FunctionLoop(logged), evaluator=exact_match, requests=requests,
                    config=EvalLoopConfig(debug_bundle_dir=bundles), max_concurrent=3)  # fmt: skip

    drain(loop)

    collected = collect_results(results, 3, timeout_seconds=5).results
    got, opened = open_checked_bundles(collected, bundles, run_id="run-1")
    assert set(opened) == {"a", "b", "bad"}
    assert fn_logs(opened["a"]) == ["start alpha", "offloaded alpha", "end alpha"]
    assert fn_logs(opened["b"]) == ["start beta", "offloaded beta", "end beta"]
    assert fn_logs(opened["bad"]) == ["start explode", "offloaded explode"]
    assert (got["a"].passed, got["b"].passed) == (True, False)
    assert opened["a"].manifest.status == "ok" and opened["a"].session_after is not None
    bad = opened["bad"]
    assert bad.manifest.status == "error" and (bad.eval or {})["error_kind"] == "agent"
    assert bad.error is not None and "function exploded" in bad.error["message"]


def fn_logs(bundle: DebugBundle) -> list[str]:
    return [row["message"] for row in bundle.logs if row["logger"] == FN_LOG.name]


def test_a_timed_out_async_sample_has_an_error_bundle(tmp_path: Path) -> None:
    cancelled: list[str] = []
    loop = EvalLoop(
        loop=FunctionLoop(hanging(cancelled, with_session=False), name="hang"),
        evaluator=exact_match,
        config=EvalLoopConfig(timeout=0.05, debug_bundle_dir=tmp_path),
    )
    request = EvalRequest(sample=Sample(id="s", input="q", expected="q"), experiment=BASELINE)

    result = asyncio.run(loop.evaluate_async(request)).result

    assert result.error_kind == "timeout" and cancelled == ["q"]
    assert result.bundle_path is not None
    bundle = DebugBundle.open(result.bundle_path)
    bundle.verify()
    assert bundle.manifest.status == "error" and (bundle.eval or {})["error_kind"] == "timeout"
    assert bundle.error is not None and "cancelled after its timeout" in bundle.error["message"]


# -- not an async loop -----------------------------------------------------------------


TEMPLATE = PromptTemplate[str](
    ns="tests", key="async-eval", sections=(MarkdownSection("Q", "q", "$text", role="user"),)
)


class EchoLoop(AgentLoop[str, str]):
    def create_prompt(self, request: str) -> Prompt[str]:
        return Prompt(TEMPLATE).bind(text=request)


@pytest.mark.parametrize(
    "agent",
    [FunctionLoop(str.upper, name="upper"), EchoLoop(adapter=FunctionAdapter(lambda r: "x"))],
    ids=["sync-function", "agent-loop"],
)
def test_evaluate_async_needs_an_async_loop(agent: AgentLoop[Any, Any]) -> None:
    loop = EvalLoop(loop=agent, evaluator=exact_match)
    request = EvalRequest(sample=Sample(id="s", input="q", expected="Q"), experiment=BASELINE)

    assert not loop.handles_async
    with pytest.raises(ConfigurationError, match="evaluate_async needs an async loop"):
        asyncio.run(loop.evaluate_async(request))
    assert loop.evaluate(request).result.sample_id == "s"  # the sync path still works


# -- stop and restart ------------------------------------------------------------------


def test_a_stopped_loop_restarts_and_the_report_counts_each_sample_once() -> None:
    hold = threading.Event()  # while set, samples wait (until cancelled)
    hold.set()
    lock = threading.Lock()
    runs: Counter[str] = Counter()
    cancelled: list[str] = []

    async def answer(request: str) -> str:
        with lock:
            runs[request] += 1
        if hold.is_set():
            try:
                await asyncio.Event().wait()  # never set: only a cancellation ends it
            except asyncio.CancelledError:
                cancelled.append(request)
                raise
        return str(sum(int(x) for x in request.split(" + ")))

    dataset = Dataset(
        samples=tuple(Sample(id=f"s{i}", input=f"{i} + {i}", expected=f"{2 * i}") for i in range(5))
    )
    requests, results = mailboxes()
    submit_dataset(dataset, requests, reply_to=results)
    fn = FunctionLoop[str, str](answer)
    first = EvalLoop(loop=fn, evaluator=exact_match, requests=requests, max_concurrent=2,
                     name="first")  # fmt: skip
    thread = run_in_thread(first, wait_time_seconds=0)
    wait_for(lambda: sum(runs.values()) == 2)

    assert first.shutdown(timeout=0.05) is False  # two samples still in flight
    thread.join(5)
    assert not thread.is_alive() and first.stats.returned == 2
    # Unlike the thread pool path (where abandoned samples finish later and reply too),
    # the abandoned tasks were cancelled before run() returned: they never reply.
    assert sorted(cancelled) == sorted(runs)
    assert results.approximate_count() == 0
    hold.clear()
    second = EvalLoop(loop=fn, evaluator=exact_match, requests=requests, name="second")
    drain(second)

    assert results.approximate_count() == 5  # exactly one reply per sample
    report = collect_results(results, len(dataset), timeout_seconds=5, wait_time_seconds=0)
    assert report.complete and report.total == 5 and report.pass_rate == 1.0
    assert sorted(r.sample_id for r in report.results) == [s.id for s in dataset]
    assert sum(runs.values()) == 7 and max(runs.values()) == 2
    redelivered = sorted(r.delivery_count for r in report.results)
    assert redelivered == [1, 1, 1, 2, 2]
    assert second.stats.succeeded == 5 and requests.approximate_count() == 0


# -- the local runner --------------------------------------------------------------------


def test_the_runner_awaits_an_async_function_loop_on_its_event_loop() -> None:
    threads: set[str] = set()

    async def shout(text: str) -> str:
        threads.add(threading.current_thread().name)
        await asyncio.sleep(0)
        return text.upper()

    samples = [Sample(id=f"s{i}", input=f"q{i}", expected=f"Q{i}") for i in range(20)]
    report = run_eval(samples, FunctionLoop(shout), exact_match, max_concurrent=5)

    assert report.pass_rate == 1.0 and len(report.results) == 20
    assert threads == {threading.current_thread().name}  # no worker thread, no asyncio.run
