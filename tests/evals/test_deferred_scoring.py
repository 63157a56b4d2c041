"""Latency-bound samples: the next sample starts before the last one is scored.

With an async agent or task function and an inline evaluator, the local runner's
workers hand each finished run's scoring and recording to one finisher task and start
their next sample first (`DeferredScoring`): when many model waits end together, the
next calls start without queueing behind all the scoring. These tests pin what a user
can see of it: the order of starts and scores, every result recorded once and in the
order scored, early stops (`fail_fast`, `max_cost`) still deciding before more work
starts, and a cancel from an evaluator stopping the run, on asyncio and trio.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from weakincentives.evals import Sample, Score, evaluate, exact_match, inline_evaluator, run_eval

BACKENDS = ["asyncio", "trio"]


def samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"Q{i}") for i in range(n)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_worker_starts_its_next_sample_before_its_last_is_scored(
    backend: str, tmp_path: Path
) -> None:
    events: list[str] = []

    async def agent(question: str) -> str:
        events.append(f"start {question}")
        await anyio.sleep(0.01)  # the model call: all three in flight wake together
        return question.upper()

    @inline_evaluator
    def scored(output: str, expected: str) -> Score:
        events.append(f"score {output.lower()}")
        return exact_match(output, expected)

    async def main() -> None:
        await evaluate(samples(12), agent, scored, max_concurrent=3, store=tmp_path)

    anyio.run(main, backend=backend)

    assert sorted(e for e in events if e.startswith("score")) == sorted(
        f"score q{i}" for i in range(12)
    )
    # After the first result (which may stop a failing run, so it is scored at once),
    # the successor of a sample starts before the sample is scored.
    for i in range(3, 9):
        assert events.index(f"start q{i + 3}") < events.index(f"score q{i}")
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    recorded = [line["sample_id"] for line in lines]
    assert recorded == [e.split()[1].replace("q", "s") for e in events if e.startswith("score")]


def test_many_instant_samples_are_all_recorded_in_the_order_scored(tmp_path: Path) -> None:
    order: list[str] = []

    async def instant(question: str) -> str:
        return question.upper()  # never waits: the queue fills and workers score too

    @inline_evaluator
    def scored(output: str, expected: str) -> Score:
        order.append(output)
        return exact_match(output, expected)

    report = run_eval(samples(500), instant, scored, max_concurrent=4, store=tmp_path)

    assert report.pass_rate == 1.0 and len(report.results) == 500
    assert sorted(order) == sorted(f"Q{i}" for i in range(500))
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    lines = (run / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["output"] for line in lines] == order


def test_a_run_that_fails_systematically_still_stops_after_its_first_results() -> None:
    started: list[str] = []

    async def broken(question: str) -> str:
        started.append(question)
        await anyio.sleep(0)
        raise ConnectionError("model server down")

    report = run_eval(samples(200), broken, exact_match, max_concurrent=2, fail_fast=3)

    assert len(report.results) < 10
    assert len(started) < 10
    assert "stopped" in report.config


def test_a_cost_cap_is_checked_before_each_new_sample(tmp_path: Path) -> None:
    # With `max_cost`, each result's cost must be counted before the next sample starts:
    # such runs score as they go (no deferral), so the cap stops the run at once.
    from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
    from weakincentives.adapters.pricing import ModelPrice, PriceTable
    from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
    from weakincentives.runtime.agent_loop import AgentLoop
    from weakincentives.runtime.session import TokenUsage

    template = PromptTemplate[str](
        ns="t", key="cap", sections=(MarkdownSection("Q", "q", "$q", role="user"),)
    )

    class Loop(AgentLoop[str, str]):
        def create_prompt(self, request: str) -> Prompt[str]:
            return Prompt(template).bind(q=request)

    async def model(request: ModelRequest) -> FunctionReply:
        await anyio.sleep(0)
        return FunctionReply(text="x", usage=TokenUsage(input_tokens=1_000_000))

    loop = Loop(adapter=FunctionAdapter(model, model_name="m"))
    prices = PriceTable({"m": ModelPrice(input=1.0, output=1.0)})
    report = run_eval(
        [Sample(id=f"s{i}", input=f"q{i}", expected="x") for i in range(50)], loop,
        exact_match, max_concurrent=1, prices=prices, max_cost=3.0, store=tmp_path,
    )  # fmt: skip

    assert len(report.results) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_evaluator_that_cancels_the_run_stops_the_workers(backend: str) -> None:
    scored: list[str] = []

    async def waits(question: str) -> str:
        await anyio.sleep(0.001)
        return question.upper()

    async def main() -> None:
        with anyio.CancelScope() as scope:

            @inline_evaluator
            def cancel_at_twenty(output: str, expected: Any) -> Score:
                scored.append(output)
                if len(scored) == 20:
                    scope.cancel()
                return exact_match(output, expected)

            await evaluate(samples(500), waits, cancel_at_twenty, max_concurrent=8)

    anyio.run(main, backend=backend)

    assert 20 <= len(scored) < 40


def test_the_finisher_scores_a_bounded_batch_per_turn_oldest_first() -> None:
    # Between two yields the finisher scores at most `_PER_TURN` runs, so a model call
    # that returns meanwhile waits for a bounded amount of scoring.
    from weakincentives.evals import EvalResult
    from weakincentives.evals.runner._deferred import _PER_TURN, DeferredScoring
    from weakincentives.evals.runner._fail_fast import FailFast
    from weakincentives.evals.runner._sample import SampleOutcome

    recorded: list[list[str]] = []

    def finish(i: int) -> Any:
        result = EvalResult(
            sample_id=f"s{i}", experiment_name="e", score=Score(1.0, True), latency_ms=0
        )
        return lambda: SampleOutcome(result, None, None)

    async def never(request: Any) -> Any:
        raise AssertionError("no sample starts here")

    def no_request(item: Any) -> Any:
        raise AssertionError("no request is made here")

    deferred = DeferredScoring(
        never, no_request, lambda rs: recorded.append([r.sample_id for r in rs]),
        FailFast(), workers=0,
    )  # fmt: skip
    deferred._queue.extend(finish(i) for i in range(40))

    anyio.run(deferred.finisher)

    assert [len(batch) for batch in recorded] == [_PER_TURN, _PER_TURN, 40 - 2 * _PER_TURN]
    assert [s for batch in recorded for s in batch] == [f"s{i}" for i in range(40)]


class _Calls:
    """Model calls the test ends one at a time (in the order it chooses)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.waiting: dict[str, anyio.Event] = {}

    async def agent(self, question: str) -> str:
        self.events.append(f"start {question}")
        self.waiting[question] = anyio.Event()
        await self.waiting[question].wait()
        return question.upper()

    async def end(self, question: str) -> None:
        while question not in self.waiting:  # not started yet
            await anyio.sleep(0)
        self.events.append(f"end {question}")
        self.waiting[question].set()
        await anyio.sleep(0)  # its worker records it and starts its next sample

    def evaluator(self) -> Any:
        @inline_evaluator
        def scored(output: str, expected: str) -> Score:
            self.events.append(f"score {output.lower()}")
            return exact_match(output, expected)

        return scored


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_samples_remain_a_wave_of_ended_calls_starts_every_next_sample_first(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Model calls ending one after another, each a moment after the last (a wave: they
    # started together), are not scored in between: each worker starts its next sample
    # first, so the next calls are not spread out by the scoring.
    monkeypatch.setattr("weakincentives.evals.runner._deferred._QUIET", 0.5)
    calls = _Calls()
    wave: list[str] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: evaluate(samples(12), calls.agent, calls.evaluator(),
                                           max_concurrent=4))  # fmt: skip
            for i in range(4):  # the first wave ends, one call after another
                await calls.end(f"q{i}")
            wave.extend(calls.events)
            for i in range(4, 12):
                await calls.end(f"q{i}")

    anyio.run(main, backend=backend)

    # q0 is scored at once (the first results may stop a failing run); q1 to q3 end
    # while samples remain to start: none is scored before all four next samples start.
    assert wave[-1] == "start q7" and "score q0" in wave
    assert not {"score q1", "score q2", "score q3"} & set(wave)
    assert sorted(e for e in calls.events if e.startswith("score")) == sorted(
        f"score q{i}" for i in range(12)
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_once_every_sample_has_started_ended_calls_are_scored_alongside_the_rest(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No start waits behind the scoring any more, so the last wave is scored as it
    # comes in, not after a quiet moment.
    monkeypatch.setattr("weakincentives.evals.runner._deferred._QUIET", 5.0)
    calls = _Calls()

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: evaluate(samples(4), calls.agent, calls.evaluator(),
                                           max_concurrent=2))  # fmt: skip
            for i in range(3):
                await calls.end(f"q{i}")
            with anyio.fail_after(2.0):  # well before the quiet period
                while "score q2" not in calls.events:
                    await anyio.sleep(0.001)
            await calls.end("q3")

    anyio.run(main, backend=backend)

    assert calls.events.index("score q2") < calls.events.index("end q3")
