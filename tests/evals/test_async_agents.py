"""Agents on async adapters: the runner and `EvalLoop` await `AgentLoop.aexecute`.

An `AgentLoop` whose adapter is async (`is_async_adapter`) runs each sample as a task on
one event loop, not a thread: the tests check the results equal the sync path's, that
C samples are in flight at once on the loop's own thread, that a timeout cancels the
sample, and that an `OpenAIAdapter` agent does the same over real HTTP.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from tests.helpers.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, completion
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.adapters.openai import OpenAIAdapter
from weakincentives.clock import FakeClock
from weakincentives.evals import (
    BASELINE,
    EvalLoop,
    EvalLoopConfig,
    EvalResult,
    Sample,
    collect_results,
    evaluate,
    exact_match,
    run_eval,
    submit_dataset,
)
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop, InMemoryMailbox


@dataclass(frozen=True)
class Question:
    text: str


@dataclass(frozen=True)
class Answer:
    text: str


TEMPLATE = PromptTemplate[Answer](
    ns="tests",
    key="async-agents",
    sections=(MarkdownSection("Question", "question", "$text", Question, role="user"),),
    output_type=Answer,
)


class Agent(AgentLoop[Question, Answer]):
    def create_prompt(self, request: Question) -> Prompt[Answer]:
        return Prompt(TEMPLATE).bind(request)


def reply_to(request: ModelRequest) -> FunctionReply:
    question = request.last_user_text().rsplit("\n", 1)[-1]
    wrong = question.endswith("7")  # some samples fail, so scores are not all equal
    return FunctionReply(output=Answer("x" if wrong else "a" + question[1:]))


class Tracking:
    """An async model that waits `delay` and records how many calls overlap, and where."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.in_flight = 0
        self.most = 0
        self.threads: set[int] = set()

    async def __call__(self, request: ModelRequest) -> FunctionReply:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        self.threads.add(threading.get_ident())
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            return reply_to(request)
        finally:
            self.in_flight -= 1


def samples(n: int) -> list[Sample[Question, Answer]]:
    return [Sample(id=f"s{i}", input=Question(f"q{i}"), expected=Answer(f"a{i}")) for i in range(n)]


def comparable(result: EvalResult) -> dict[str, Any]:
    fields = dataclasses.asdict(result)
    for key in ("request_id", "session_id", "latency_ms", "bundle_path", "run_id"):
        del fields[key]
    return fields


def test_the_runner_awaits_an_async_agent_with_the_sync_paths_results() -> None:
    model = Tracking(delay=0.05)
    sync_agent = Agent(adapter=FunctionAdapter(reply_to))
    async_agent = Agent(adapter=FunctionAdapter(model))
    assert async_agent.is_async and not sync_agent.is_async

    expected = run_eval(samples(40), sync_agent, exact_match, max_concurrent=40)
    got = run_eval(samples(40), async_agent, exact_match, max_concurrent=40)

    key = lambda r: r.sample_id  # noqa: E731
    assert [comparable(r) for r in sorted(got.results, key=key)] == [
        comparable(r) for r in sorted(expected.results, key=key)
    ]
    assert got.pass_rate == pytest.approx(36 / 40)
    assert all(r.session_id for r in got.results)  # each its own run's session
    assert len({r.session_id for r in got.results}) == 40
    assert model.most == 40  # every sample in flight at once ...
    assert len(model.threads) == 1  # ... as tasks on the event loop's thread


def test_the_runner_cancels_an_async_agent_at_its_timeout() -> None:
    slow = Tracking(delay=30.0)

    report = run_eval(
        samples(3), Agent(adapter=FunctionAdapter(slow)), exact_match, max_concurrent=3,
        timeout=0.2,
    )  # fmt: skip

    assert [r.error_kind for r in report.results] == ["timeout"] * 3
    assert slow.in_flight == 0  # cancelled, not left running


def test_the_runner_awaits_an_async_agent_under_trio() -> None:
    model = Tracking()

    async def main() -> float:
        report = await evaluate(samples(5), Agent(adapter=FunctionAdapter(model)), exact_match)
        return report.pass_rate

    assert trio.run(main) == pytest.approx(1.0)


def test_evalloop_runs_an_async_agent_as_tasks() -> None:
    model = Tracking(delay=0.05)
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox("requests")
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox("results")
    loop = EvalLoop(
        loop=Agent(adapter=FunctionAdapter(model)), evaluator=exact_match, requests=requests,
        max_concurrent=20,
    )  # fmt: skip
    assert loop.handles_async
    sent = submit_dataset(samples(20), BASELINE, requests, reply_to=results, run_id="r")

    loop.run(until_drained=True, wait_time_seconds=0)
    report = collect_results(results, expected_count=sent, run_id="r", timeout_seconds=5)

    assert report.complete and report.pass_rate == pytest.approx(18 / 20)
    assert model.most == 20 and len(model.threads) == 1


def test_evalloop_cancels_an_async_agent_at_its_timeout() -> None:
    loop = EvalLoop(
        loop=Agent(adapter=FunctionAdapter(Tracking(delay=30.0))), evaluator=exact_match,
        config=EvalLoopConfig(timeout=0.1),
    )  # fmt: skip
    request = next(iter(_requests(1)))

    outcome = asyncio.run(loop.evaluate_async(request))

    assert outcome.result.error_kind == "timeout"


def _requests(n: int) -> Iterator[Any]:
    box: InMemoryMailbox[Any, Any] = InMemoryMailbox("tmp")
    submit_dataset(samples(n), BASELINE, box, run_id="r")
    for message in box.receive(max_messages=10):
        yield message.body


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as s:
        yield s


def test_an_openai_agent_runs_its_samples_concurrently_over_http(server: FakeOpenAIServer) -> None:
    n = 16
    barrier = threading.Barrier(n, timeout=10)  # passes only if all n are in flight at once

    def answer(request: RecordedRequest) -> Reply:
        barrier.wait()
        question = request.json()["messages"][-1]["content"].rsplit("\n", 1)[-1]
        return completion(json.dumps({"text": "a" + question[1:]}))

    server.default = answer
    adapter = OpenAIAdapter(
        "m", base_url=server.base_url, api_key="sk-x", clock=FakeClock(), rng=random.Random(1)
    )

    report = run_eval(samples(n), Agent(adapter=adapter), exact_match, max_concurrent=n)

    assert report.pass_rate == pytest.approx(1.0)
    assert len(server.requests) == n
    adapter.close()
