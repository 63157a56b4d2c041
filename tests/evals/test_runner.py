"""The local runner under asyncio: targets, concurrency, timeouts, epochs, scoring, cache."""

from __future__ import annotations

import functools
import itertools
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

import weakincentives.evals.runner._scheduler as local_run
from tests.helpers import calculator_model, calculator_tool
from weakincentives.adapters import FunctionAdapter, ModelRequest, SQLiteResponseCache
from weakincentives.clock import FakeClock
from weakincentives.errors import ConfigurationError, InvalidDatasetError
from weakincentives.evals import (
    BASELINE,
    CallbackProgress,
    Dataset,
    EvalReport,
    Experiment,
    Metric,
    RunStore,
    Sample,
    Score,
    Trajectory,
    evaluate,
    exact_match,
    run_eval,
    trajectory_scorer,
)
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import (
    AgentLoop,
    PromptExecuted,
    Session,
    SessionView,
    ToolInvoked,
    WorkerThreads,
)

CALC = PromptTemplate[str](
    ns="tests",
    key="runner-calc",
    sections=(MarkdownSection("Question", "question", "$question", role="user"),),
    tools=(calculator_tool(),),
)


class CalcLoop(AgentLoop[str, str]):
    """Answers `a op b` questions with one calculator call."""

    def create_prompt(self, request: str) -> Prompt[str]:
        return Prompt(CALC).bind(question=request)


def calc_samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"c{i}", input=f"{i} + 1", expected=f"{i + 1}") for i in range(n)]


def upper_samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"Q{i}") for i in range(n)]


def keys(report: EvalReport) -> list[tuple[str, str, int]]:
    return [r.key for r in report.results]


class Gauge:
    """Counts how many callers are inside at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.calls = 0

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


# -- targets ------------------------------------------------------------------------------


def test_sync_function_target_scores_every_sample() -> None:
    report = run_eval(upper_samples(30), str.upper, exact_match, max_concurrent=4)

    assert report.total == 30
    assert report.pass_rate == 1.0
    assert report.complete and report.expected_count == 30
    assert sorted(keys(report)) == sorted((f"s{i}", "baseline", 0) for i in range(30))
    assert report.config["target"] == "str.upper"
    assert report.config["evaluator"] == "exact_match"
    first = report.results[0]
    assert first.output == first.sample_id.replace("s", "Q")  # no store: kept in full
    assert first.messages[-1].content == first.output


def test_older_positional_order_with_an_agent_loop() -> None:
    loop = CalcLoop(adapter=FunctionAdapter(calculator_model))

    report = run_eval(loop, Dataset(samples=tuple(calc_samples(5))), exact_match)

    assert report.pass_rate == 1.0
    result = report.results[0]
    assert [t.name for t in result.tool_calls] == ["calculate"]
    assert result.usage.total_tokens > 0
    assert report.config["target"].endswith("CalcLoop")


def test_async_function_gets_a_session_and_is_timed_on_the_clock() -> None:
    clock = FakeClock()

    async def answer(question: str, session: Session) -> str:
        await anyio.sleep(0)
        clock.advance(0.25)
        session.dispatch(BASELINE.with_flag("seen", question))
        return question.upper()

    def recorded(output: str, expected: str, session: SessionView) -> Score:
        executed = session[PromptExecuted].latest()
        ok = executed is not None and executed.output == output == expected
        return Score(value=float(ok), passed=ok)

    report = run_eval(upper_samples(3), answer, recorded, clock=clock, max_concurrent=1)

    assert report.pass_rate == 1.0
    assert [r.latency_ms for r in report.results] == [250.0] * 3
    assert report.results[0].messages[0].content == report.results[0].output


def test_failures_are_results_with_their_kind() -> None:
    def agent(question: str) -> str | None:
        if question == "q1":
            raise RuntimeError("agent broke")
        return None if question == "q2" else question.upper()

    def evaluator(output: str, expected: str) -> Score:
        if output == "Q3":
            raise KeyError("evaluator broke")
        return exact_match(output, expected)

    report = run_eval(upper_samples(5), agent, evaluator)

    by_id = {r.sample_id: r for r in report.results}
    assert by_id["s1"].error_kind == "agent" and "agent broke" in (by_id["s1"].error or "")
    assert by_id["s2"].error_kind == "no_output"
    assert by_id["s3"].error_kind == "evaluator"
    assert by_id["s0"].passed and by_id["s4"].passed
    assert report.pass_rate == 0.4


# -- concurrency ----------------------------------------------------------------------------


def _gauged_sync(gauge: Gauge) -> Callable[[str], str]:
    def fn(question: str) -> str:
        gauge.enter()
        try:
            threading.Event().wait(0.01)
            return question.upper()
        finally:
            gauge.leave()

    return fn


def _gauged_async(gauge: Gauge) -> Callable[[str], Any]:
    async def fn(question: str) -> str:
        gauge.enter()
        try:
            await anyio.sleep(0.01)
            return question.upper()
        finally:
            gauge.leave()

    return fn


@pytest.mark.parametrize("make", [_gauged_sync, _gauged_async], ids=["sync", "async"])
def test_max_concurrent_bounds_samples_in_flight(make: Callable[[Gauge], Any]) -> None:
    gauge = Gauge()

    report = run_eval(upper_samples(40), make(gauge), exact_match, max_concurrent=4)

    assert report.pass_rate == 1.0
    assert gauge.calls == 40
    assert gauge.peak == 4


def test_sync_targets_run_on_long_lived_threads_one_hop_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hops = {"n": 0}
    run_sync = anyio.to_thread.run_sync
    threads: set[int] = set()

    async def counting(*args: Any, **kwargs: Any) -> Any:
        hops["n"] += 1
        return await run_sync(*args, **kwargs)

    def upper(text: str) -> str:
        threads.add(threading.get_ident())
        return text.upper()

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)

    report = run_eval(
        iter(upper_samples(300)), upper, exact_match, max_concurrent=3, store=tmp_path
    )

    assert report.total == 300 and report.pass_rate == 1.0
    assert sorted(keys(report)) == sorted((f"s{i}", "baseline", 0) for i in range(300))
    # Three slot threads loop over the shared samples; the event loop waits in one hop.
    assert hops["n"] == 1
    assert 1 <= len(threads) <= 3
    assert threading.main_thread().ident not in threads


def test_progress_from_slot_threads_arrives_in_order_on_the_event_loop(tmp_path: Path) -> None:
    seen: list[tuple[str, int | None]] = []
    loop_thread = threading.get_ident()

    report = run_eval(
        upper_samples(250), str.upper, exact_match, max_concurrent=4, store=tmp_path,
        progress=lambda r: seen.append((r.sample_id, threading.get_ident())),
    )  # fmt: skip

    assert [sample_id for sample_id, _ in seen] == [r.sample_id for r in report.results]
    assert len(seen) == 250
    assert {ident for _, ident in seen} == {loop_thread}


def test_cancelling_stops_the_worker_threads(tmp_path: Path) -> None:
    started = threading.Event()
    calls = {"n": 0}

    def fn(question: str) -> str:
        calls["n"] += 1
        started.set()
        threading.Event().wait(0.002)
        return question.upper()

    async def main() -> None:
        with anyio.move_on_after(5) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(
                    evaluate, upper_samples(10_000), fn, exact_match, store=tmp_path,
                    run_id="cut", max_concurrent=2,
                ))  # fmt: skip
                await anyio.to_thread.run_sync(started.wait)
                tg.cancel_scope.cancel()
        assert not scope.cancelled_caught

    anyio.run(main)
    threading.Event().wait(0.05)  # an abandoned thread finishes its sample, then stops
    stopped_at = calls["n"]
    threading.Event().wait(0.05)

    assert calls["n"] == stopped_at < 10_000
    run = RunStore(tmp_path).open("cut")
    assert run.status == "interrupted"
    assert run.counts.results <= stopped_at


def test_judge_concurrency_bounds_evaluator_calls() -> None:
    gauge = Gauge()

    def judge(output: str, expected: str) -> Score:
        gauge.enter()
        try:
            threading.Event().wait(0.01)
            return exact_match(output, expected)
        finally:
            gauge.leave()

    report = run_eval(upper_samples(20), str.upper, judge, max_concurrent=8, judge_concurrency=2)

    assert report.pass_rate == 1.0
    assert gauge.calls == 20
    assert gauge.peak == 2


def test_work_is_sample_major_across_experiments_and_epochs() -> None:
    concise = Experiment(name="concise")

    report = run_eval(
        upper_samples(2), str.upper, exact_match, experiments=[BASELINE, concise], epochs=2,
        max_concurrent=1,
    )  # fmt: skip

    assert keys(report) == [
        (s, e, k) for s in ("s0", "s1") for e in ("baseline", "concise") for k in (0, 1)
    ]
    assert report.config["experiments"] == ["baseline", "concise"]


def test_streamed_generator_is_pulled_lazily_with_bounded_memory() -> None:
    n, limit, width = 20_000, 8, 4096
    state = {"pulled": 0, "done": 0, "ahead": 0}

    def samples() -> Iterator[Sample[str, str]]:
        for i in range(n):
            state["pulled"] += 1
            state["ahead"] = max(state["ahead"], state["pulled"] - state["done"])
            yield Sample(id=f"s{i}", input=f"{i:0{width}d}", expected=str(i))

    lock = threading.Lock()

    def task(text: str) -> str:
        with lock:  # counted inside the sample: one more is no longer in flight
            state["done"] += 1
        return str(int(text))

    tracemalloc.start()
    try:
        report = run_eval(
            samples(),
            task,
            exact_match,
            max_concurrent=limit,
            record_transcript=False,
            record_inputs=False,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert report.total == n and report.pass_rate == 1.0
    # Never more than the in-flight samples (plus the one being pulled) read ahead.
    assert state["ahead"] <= limit + 1
    # Holding the dataset would take n inputs of 4 KiB (~80 MiB); the run keeps only the
    # results (well under 1 KiB each).
    dataset_bytes = n * sys.getsizeof("0" * width)
    assert peak < dataset_bytes / 3, f"peak {peak / 2**20:.1f} MiB"


# -- timeouts -------------------------------------------------------------------------------


def test_timeout_abandons_a_stuck_sync_target() -> None:
    release = threading.Event()

    def agent(question: str) -> str:
        if question == "q1":
            release.wait(30)
        return question.upper()

    try:  # a timeout the quick samples meet even on a loaded machine
        report = run_eval(upper_samples(3), agent, exact_match, timeout=1.0)
    finally:
        release.set()

    by_id = {r.sample_id: r for r in report.results}
    assert by_id["s1"].error_kind == "timeout"
    assert "timeout of 1s" in (by_id["s1"].error or "")
    assert by_id["s0"].passed and by_id["s2"].passed


def test_timeout_cancels_an_async_target() -> None:
    cancelled: list[str] = []

    async def agent(question: str) -> str:
        try:
            await anyio.sleep(30 if question == "q0" else 0)
        except anyio.get_cancelled_exc_class():
            cancelled.append(question)
            raise
        return question.upper()

    report = run_eval(upper_samples(2), agent, exact_match, timeout=1.0)

    assert [r.error_kind for r in sorted(report.results, key=lambda r: r.sample_id)] == [
        "timeout",
        None,
    ]
    assert cancelled == ["q0"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_agent_gets_a_deadline_on_the_runs_clock(kind: str) -> None:
    clock = FakeClock()

    def slow(question: str) -> str:
        clock.advance(30.0)  # "takes" 30 s on the fake clock; no real waiting
        return question.upper()

    async def slow_async(question: str) -> str:
        return slow(question)

    target = slow if kind == "sync" else slow_async
    report = run_eval(upper_samples(1), target, exact_match, timeout=5.0, clock=clock)

    assert report.results[0].error_kind == "timeout"
    assert "passed its deadline" in (report.results[0].error or "")
    assert report.results[0].latency_ms == 30_000.0


# -- epochs, progress, trajectories ------------------------------------------------------


def test_epochs_feed_pass_at_k_and_flaky_samples() -> None:
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def flaky(question: str) -> str:
        with lock:  # the first attempt of every odd sample fails
            seen[question] = seen.get(question, 0) + 1
            first = seen[question] == 1
        odd = int(question[1:]) % 2 == 1
        return "wrong" if odd and first else question.upper()

    report = run_eval(upper_samples(4), flaky, exact_match, epochs=3)

    assert report.total == 12 and report.expected_count == 12
    assert {r.epoch for r in report.results} == {0, 1, 2}
    assert report.pass_at_k(3) == 1.0
    assert report.pass_hat_k(3) == 0.5
    assert sorted(f.sample_id for f in report.flaky_samples()) == ["s1", "s3"]


def test_progress_sink_sees_the_run() -> None:
    events: list[Any] = []
    sink = CallbackProgress(
        lambda r: events.append(r.sample_id),
        on_start=lambda total, done: events.append(("start", total, done)),
        on_finish=lambda: events.append("finish"),
    )

    run_eval(upper_samples(3), str.upper, exact_match, progress=sink, epochs=2)

    assert events[0] == ("start", 6, 0)
    assert events[-1] == "finish"
    assert sorted(events[1:-1]) == ["s0", "s0", "s1", "s1", "s2", "s2"]


def test_progress_is_unknown_for_a_stream() -> None:
    starts: list[Any] = []
    sink = CallbackProgress(lambda r: None, on_start=lambda total, done: starts.append(total))

    run_eval(iter(upper_samples(3)), str.upper, exact_match, progress=sink)

    assert starts == [None]


def score_by_trajectory(trajectory: Trajectory, sample: Sample[str, str]) -> Score:
    last = trajectory.messages[-1].content
    tools = [t.name for t in trajectory.tool_calls]
    assert trajectory.session is not None
    invoked = len(trajectory.session[ToolInvoked].all())
    return Score(
        metrics=(
            Metric("correct", float(last == sample.expected), weight=3.0),
            Metric("used_tool", float(tools == ["calculate"] and invoked == 1), weight=1.0),
            Metric("turns", float(len(trajectory.messages))),
        )
    )


@trajectory_scorer
def score_marked(trajectory, sample):  # type: ignore[no-untyped-def]  # detected by marker
    return score_by_trajectory(trajectory, sample)


@pytest.mark.parametrize("scorer", [score_by_trajectory, score_marked], ids=["annotated", "marked"])
def test_trajectory_scorer_sees_the_whole_run(scorer: Callable[..., Score]) -> None:
    loop = CalcLoop(adapter=FunctionAdapter(calculator_model))
    samples = [*calc_samples(2), Sample(id="bad", input="2 + 2", expected="5")]

    report = run_eval(samples, loop, scorer)

    by_id = {r.sample_id: r for r in report.results}
    assert by_id["c0"].score.reward == 1.0 and by_id["c0"].passed
    assert by_id["bad"].score.reward == 0.25 and not by_id["bad"].passed
    turns = by_id["c0"].score.metric("turns")
    assert turns is not None and turns.value == 4.0  # user, tool call, tool answer, answer


def test_rewards_for_an_rl_batch() -> None:
    # The RL loop of spec/evaluation-abstractions.md: roll out a batch, score each
    # trajectory, turn rewards into group-relative advantages.
    def policy(prompt: dict[str, int]) -> str:
        return str(prompt["a"] * 2 if prompt["a"] % 3 else prompt["a"])

    @trajectory_scorer
    def reward_fn(trajectory: Trajectory, sample: Sample[dict[str, int], int]) -> Score:
        correct = trajectory.output == str(sample.expected)
        short = len(trajectory.output) <= 1
        return Score(
            metrics=(
                Metric("correct", float(correct), weight=0.75),
                Metric("short", float(short), weight=0.25),
                Metric("length", float(len(trajectory.output))),
            )
        )

    batch = [Sample(id=f"step0_{i}", input={"a": i}, expected=i * 2) for i in range(6)]
    report = run_eval(batch, policy, reward_fn)

    by_id = {r.sample_id: r.score for r in report.results}
    rewards = [by_id[s.id].reward for s in batch]
    # "3" is wrong but short (0.25); "10" is right but long (0.75); the rest are both.
    assert rewards == [1.0, 1.0, 1.0, 0.25, 1.0, 0.75]
    mean = sum(rewards) / len(rewards)
    advantages = [r - mean for r in rewards]
    assert sum(advantages) == pytest.approx(0.0)
    assert advantages[3] == pytest.approx(0.25 - 5 / 6)


# -- cache ------------------------------------------------------------------------------------


def test_second_run_hits_the_adapters_response_cache(tmp_path: Path) -> None:
    calls = itertools.count()

    def model(request: ModelRequest) -> Any:
        next(calls)
        return calculator_model(request)

    with SQLiteResponseCache(tmp_path / "cache.sqlite") as cache:
        loop = CalcLoop(adapter=FunctionAdapter(model, cache=cache))
        first = run_eval(calc_samples(4), loop, exact_match)
        model_calls = next(calls)
        second = run_eval(calc_samples(4), loop, exact_match)

        assert model_calls == 8  # two turns per sample
        assert next(calls) == model_calls + 1  # none since: all eight turns were hits
        assert cache.stats.hits == 8
    assert first.pass_rate == second.pass_rate == 1.0
    assert [r.usage for r in first.results] == [r.usage for r in second.results]


def test_cache_option_gives_the_loop_a_cache_without_touching_it(tmp_path: Path) -> None:
    adapter = FunctionAdapter(calculator_model)
    loop = CalcLoop(adapter=adapter)
    path = tmp_path / "cache.sqlite"

    first = run_eval(calc_samples(3), loop, exact_match, cache=path)
    second = run_eval(calc_samples(3), loop, exact_match, cache=path)

    assert first.config["cache"] == {"hits": 0, "misses": 6, "writes": 6}
    assert second.config["cache"] == {"hits": 6, "misses": 0, "writes": 0}
    assert loop.adapter is adapter and adapter.cache is None


# -- configuration ----------------------------------------------------------------------------


def _sync(q: str) -> str:
    return q


def _needs_env(q: str, env: object) -> str:
    return q


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epochs": 0}, "epochs must be an integer >= 1"),
        ({"max_concurrent": 0}, "max_concurrent must be"),
        ({"judge_concurrency": 0}, "judge_concurrency must be"),
        ({"timeout": 0}, "timeout must be a positive"),
        ({"experiments": [BASELINE, BASELINE]}, "unique names"),
        ({"experiments": []}, "one or more Experiments"),
        ({"resume": "some-run"}, "needs store="),
        ({"resume": "a", "run_id": "b", "store": "unused"}, "pass one"),
        ({"target": 42}, "must be an AgentLoop or a function"),
        ({"target": _needs_env}, "no environment_factory"),
        ({"cache": ":memory:"}, "plain function"),
        ({"dataset": Path("data.jsonl")}, "Dataset.load or Dataset.stream"),
        ({"evaluator": "exact"}, "evaluator must be callable"),
    ],
)
def test_configuration_errors_fail_before_any_sample_runs(
    kwargs: dict[str, Any], message: str
) -> None:
    args: dict[str, Any] = {"dataset": upper_samples(2), "target": _sync, "evaluator": exact_match}
    for name in ("dataset", "target", "evaluator"):
        if name in kwargs:
            args[name] = kwargs.pop(name)

    with pytest.raises(ConfigurationError, match=message):
        run_eval(args["dataset"], args["target"], args["evaluator"], **kwargs)


def test_cache_needs_an_adapter_with_a_cache_field() -> None:
    class Bare:
        def evaluate(self, prompt: Any, **_: Any) -> Any:
            raise NotImplementedError

    with pytest.raises(ConfigurationError, match="has no `with_cache"):
        run_eval(calc_samples(1), CalcLoop(adapter=Bare()), exact_match, cache=":memory:")


def test_a_non_sample_in_a_stream_fails_fast() -> None:
    with pytest.raises(InvalidDatasetError, match="dataset item 1 is a dict"):
        run_eval(iter([*upper_samples(1), {"id": "x"}]), str.upper, exact_match)  # type: ignore[arg-type]  # the mistake under test


def test_run_eval_refuses_to_block_an_event_loop() -> None:
    async def main() -> None:
        run_eval(upper_samples(1), str.upper, exact_match)

    with pytest.raises(ConfigurationError, match="await evaluate"):
        anyio.run(main)


def test_evaluate_under_asyncio_with_partial() -> None:
    report = anyio.run(functools.partial(evaluate, upper_samples(4), str.upper, exact_match))
    assert report.pass_rate == 1.0


@pytest.mark.parametrize(("samples", "concurrency", "expected"), [(3, 100, 3), (40, 8, 8)])
def test_no_more_slot_threads_start_than_there_is_work(
    monkeypatch: pytest.MonkeyPatch, samples: int, concurrency: int, expected: int
) -> None:
    sizes: list[int] = []

    class Recording(WorkerThreads):
        def __init__(self, max_workers: int, *, name: str = "wink") -> None:
            sizes.append(max_workers)
            super().__init__(max_workers, name=name)

    monkeypatch.setattr(local_run, "WorkerThreads", Recording)

    report = run_eval(upper_samples(samples), str.upper, exact_match, max_concurrent=concurrency)

    assert report.total == samples
    assert sizes == [expected]
