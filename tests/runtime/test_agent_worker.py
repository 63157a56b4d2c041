"""AgentLoop.run / AgentLoopWorker: an AgentLoop served from a mailbox."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CalcParams, calculate, calculator_model
from tests.runtime.workers import wait_for
from weakincentives import serde
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.clock import FakeClock
from weakincentives.debug import DebugBundle
from weakincentives.errors import AdapterConnectionError, ConfigurationError
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.prompt import (
    MarkdownSection,
    Prompt,
    PromptTemplate,
    Tool,
    ToolContext,
    ToolResult,
)
from weakincentives.runtime import (
    AgentLoop,
    AgentLoopRequest,
    AgentLoopResult,
    AgentLoopWorker,
    Budget,
    DeadLetter,
    DLQPolicy,
    FunctionLoop,
    InMemoryMailbox,
    LoopGroup,
    RetryPolicy,
    TokenUsage,
    WorkerStats,
)
from weakincentives.runtime.bundle import DebugBundleConfig
from weakincentives.runtime.mailbox import InMemoryMailboxFactory


@dataclass(frozen=True, slots=True)
class Answer:
    value: float
    explanation: str


@dataclass(frozen=True, slots=True)
class Question:
    text: str


def rounding_calculate(params: CalcParams, context: ToolContext) -> ToolResult:
    """The calculator, rounding to the experiment's `digits` flag (default 6)."""
    value = calculate(params, context).value
    experiment = context.experiment
    digits = experiment.get_flag("digits", 6) if experiment is not None else 6
    return ToolResult(message=f"{round(value, digits):g}", value=value)


TEMPLATE = PromptTemplate[Answer](
    ns="tests",
    key="agent-worker",
    sections=(
        MarkdownSection("Rules", "rules", "Use the calculate tool."),
        MarkdownSection("Question", "question", "$text", Question, role="user"),
    ),
    tools=(
        Tool(
            name="calculate",
            description="a op b",
            params_type=CalcParams,
            handler=rounding_calculate,
        ),
    ),
    output_type=Answer,
)


class CalcLoop(AgentLoop[str, Answer]):
    def create_prompt(self, request: str) -> Prompt[Answer]:
        return Prompt(TEMPLATE).bind(Question(request))


Hook = Callable[[ModelRequest], "FunctionReply | str | None"]


class Model:
    """`calculator_model` behind an optional hook; counts first turns."""

    def __init__(self, hook: Hook | None = None) -> None:
        self.hook = hook
        self.runs = 0

    def __call__(self, request: ModelRequest) -> FunctionReply | str:
        if request.turn == 0:
            self.runs += 1
        reply = self.hook(request) if self.hook is not None else None
        return calculator_model(request) if reply is None else reply


def calc_loop(model: Model | None = None, clock: FakeClock | None = None) -> CalcLoop:
    model = model or Model()
    if clock is None:
        return CalcLoop(adapter=FunctionAdapter(model))
    return CalcLoop(adapter=FunctionAdapter(model, clock=clock), clock=clock)


def mailboxes() -> tuple[InMemoryMailbox[Any, Any], InMemoryMailbox[Any, Any]]:
    return InMemoryMailbox("agent-requests"), InMemoryMailbox("agent-replies")


def replies(mailbox: InMemoryMailbox[Any, Any]) -> list[AgentLoopResult[Any]]:
    out = []
    while batch := mailbox.receive(max_messages=10):
        for message in batch:
            out.append(message.body)
            message.acknowledge()
    return out


NO_WAIT = RetryPolicy(max_attempts=3, base_delay=0.0, jitter=0.0)


def test_run_answers_each_request_to_its_reply_to() -> None:
    requests, answers = mailboxes()
    first = AgentLoopRequest("What is 6 * 7?")
    second = AgentLoopRequest(
        "What is 10 / 4?", experiment=Experiment(name="coarse").with_flag("digits", 0)
    )
    for request in (first, second):
        requests.send(request, reply_to=answers)

    stats = calc_loop().run(requests, until_drained=True, wait_time_seconds=0)

    got = {r.request_id: r for r in replies(answers)}
    assert stats == WorkerStats(received=2, succeeded=2)
    assert got[first.request_id].output == Answer(42.0, "The calculator returned 42.")
    # The experiment's flag reached the tool, which rounded 2.5 to 2.
    assert got[second.request_id].output == Answer(2.0, "The calculator returned 2.")
    assert all(r.ok and r.text and r.usage.total_tokens > 0 for r in got.values())
    assert requests.approximate_count() == 0


@pytest.mark.parametrize("route", ["reply_to name", "results mailbox"])
def test_answers_reach_a_named_reply_to_or_the_results_mailbox(route: str) -> None:
    factory: InMemoryMailboxFactory[Any] = InMemoryMailboxFactory()
    requests, answers = factory.create("agent-requests"), factory.create("agent-replies")
    request = AgentLoopRequest("What is 1 + 2?")
    requests.send(request, reply_to="agent-replies" if route == "reply_to name" else None)
    worker = AgentLoopWorker(
        calc_loop(), requests=requests, results=answers if route == "results mailbox" else None
    )

    worker.run(until_drained=True, wait_time_seconds=0)

    assert [(r.request_id, r.output) for r in replies(answers)] == [
        (request.request_id, Answer(3.0, "The calculator returned 3."))
    ]


def test_an_answer_with_nowhere_to_go_is_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    requests, _ = mailboxes()
    requests.send(AgentLoopRequest("What is 1 + 2?"))
    with caplog.at_level(logging.WARNING, logger="weakincentives.runtime"):
        stats = calc_loop().run(requests, until_drained=True, wait_time_seconds=0)
    assert stats.succeeded == 1 and "its answer is dropped" in caplog.text


def test_failures_are_answered_with_their_kind() -> None:
    clock = FakeClock()

    def hook(request: ModelRequest) -> FunctionReply | None:
        text = request.last_user_text()
        if "explode" in text:
            raise RuntimeError("model exploded")
        if "slow" in text:
            clock.advance(10.0)
        if "verbose" in text:
            return FunctionReply(text="{}", usage=TokenUsage(input_tokens=500))
        return None

    requests, answers = mailboxes()
    sent = {
        "agent": AgentLoopRequest("explode 1 + 1"),
        "timeout": AgentLoopRequest("slow 1 + 1", deadline_seconds=5.0),
        "budget": AgentLoopRequest("verbose 1 + 1", budget=Budget(max_total_tokens=100)),
        None: AgentLoopRequest("slow 2 + 2", deadline_seconds=60.0),
    }
    for request in sent.values():
        requests.send(request, reply_to=answers)

    calc_loop(Model(hook), clock).run(requests, until_drained=True, wait_time_seconds=0)

    got = {r.request_id: r for r in replies(answers)}
    assert {kind: got[r.request_id].error_kind for kind, r in sent.items()} == {
        kind: kind for kind in sent
    }
    assert got[sent["agent"].request_id].error == "RuntimeError: model exploded"
    assert got[sent["agent"].request_id].output is None and not got[sent["agent"].request_id].ok
    assert got[sent[None].request_id].output == Answer(4.0, "The calculator returned 4.")


def test_transient_failures_are_retried_then_dead_lettered_and_answered() -> None:
    calls = Counter[str]()

    def hook(request: ModelRequest) -> None:
        if request.turn == 0:
            calls[request.last_user_text()] += 1
            if "always" in request.last_user_text() or calls[request.last_user_text()] == 1:
                raise AdapterConnectionError("connection refused")

    requests, answers = mailboxes()
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead")
    blip, always = AgentLoopRequest("blip 1 + 1"), AgentLoopRequest("always 1 + 1")
    for request in (blip, always):
        requests.send(request, reply_to=answers)

    stats = calc_loop(Model(hook)).run(
        requests,
        until_drained=True,
        wait_time_seconds=0,
        retry=NO_WAIT,
        dlq=DLQPolicy(dead, max_deliveries=5),
    )

    got = {r.request_id: r for r in replies(answers)}
    assert (got[blip.request_id].ok, got[blip.request_id].delivery_count) == (True, 2)
    failed = got[always.request_id]
    # RetryPolicy's limit (3) is below the DLQ's (5): given up on, dead-lettered, answered.
    assert (failed.error_kind, failed.delivery_count) == ("dead_letter", 3)
    assert failed.error == (
        "dead-lettered after 3 deliveries (exhausted): AdapterConnectionError: connection refused"
    )
    assert stats.retried == 3 and stats.dead_lettered == 1 and dead.approximate_count() == 1


def test_a_body_that_is_not_a_request_is_dead_lettered_at_once() -> None:
    requests, answers = mailboxes()
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead")
    requests.send("What is 1 + 1?", reply_to=answers)
    model = Model()

    stats = calc_loop(model).run(
        requests, until_drained=True, wait_time_seconds=0, dlq=DLQPolicy(dead), retry=NO_WAIT
    )

    ((letter,),) = [[m.body for m in dead.receive(max_messages=10)]]
    assert (letter.reason, letter.delivery_count, letter.body) == (
        "non_retryable",
        1,
        "What is 1 + 1?",
    )
    assert "expected an AgentLoopRequest, got str" in letter.error_message
    assert stats.dead_lettered == 1 and model.runs == 0 and answers.approximate_count() == 0


def test_each_request_can_write_a_debug_bundle(tmp_path: Path) -> None:
    requests, answers = mailboxes()
    request = AgentLoopRequest("What is 2 + 3?", experiment=Experiment(name="b"))
    requests.send(request, reply_to=answers)
    worker = AgentLoopWorker(
        calc_loop(), requests=requests, debug_bundle=DebugBundleConfig(directory=tmp_path)
    )

    worker.run(until_drained=True, wait_time_seconds=0)

    (path,) = tmp_path.glob(f"{request.request_id}/*.zip")
    bundle = DebugBundle.open(path)
    bundle.verify()
    assert (bundle.manifest.kind, bundle.manifest.status) == ("agent", "ok")
    assert bundle.manifest.ids.experiment == "b"
    assert bundle.session_before is not None and bundle.session_after is not None
    assert bundle.response["output"] == {"value": 5.0, "explanation": "The calculator returned 5."}


def test_closing_the_mailbox_stops_a_loop_run_in_a_thread() -> None:
    requests, answers = mailboxes()
    loop = calc_loop()
    done = threading.Event()

    def serve() -> None:
        loop.run(requests)  # the guide's production worker: blocks until stopped
        done.set()

    threading.Thread(target=serve, daemon=True).start()
    requests.send(AgentLoopRequest("What is 4 * 4?"), reply_to=answers)
    wait_for(lambda: answers.approximate_count() == 1)
    requests.close()

    assert done.wait(5)
    assert [r.output for r in replies(answers)] == [Answer(16.0, "The calculator returned 16.")]


def test_a_worker_runs_in_a_loop_group_and_shuts_down() -> None:
    requests, answers = mailboxes()
    worker = AgentLoopWorker(
        FunctionLoop(str.upper, name="upper"), requests=requests, max_concurrent=2
    )
    assert worker.name == "upper(agent-requests)"
    group = LoopGroup([worker], watchdog_timeout=30)
    group.start()
    try:
        requests.send(AgentLoopRequest("hello"), reply_to=answers)
        wait_for(lambda: answers.approximate_count() == 1)
        assert group.ready()
    finally:
        assert group.shutdown(timeout=5)
    assert [(r.output, r.text) for r in replies(answers)] == [("HELLO", "HELLO")]
    assert not worker.running


def test_requests_and_results_round_trip_through_json() -> None:
    request = AgentLoopRequest("q", experiment=BASELINE.with_flag("x", 1), deadline_seconds=3.0)
    assert serde.loads(AgentLoopRequest[str], serde.dumps(request)) == request
    answer: AgentLoopResult[Answer] = AgentLoopResult(
        request_id=request.request_id, output=Answer(1.0, "one"), text="{}", error=None
    )
    assert serde.loads(AgentLoopResult[Answer], serde.dumps(answer)) == answer


@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_a_request_deadline_must_be_positive(seconds: float) -> None:
    with pytest.raises(ConfigurationError, match="deadline_seconds"):
        AgentLoopRequest("q", deadline_seconds=seconds)


def test_serve_answers_one_request_without_a_mailbox() -> None:
    requests, _ = mailboxes()
    worker = AgentLoopWorker(calc_loop(), requests=requests)
    answer = worker.serve(AgentLoopRequest("What is 9 - 4?"))
    assert answer.output == Answer(5.0, "The calculator returned 5.") and answer.ok


class AsyncModel:
    """`Model` as an `async def` (an async adapter); counts requests in flight."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.in_flight = 0
        self.most = 0
        self.threads: set[int] = set()

    async def __call__(self, request: ModelRequest) -> FunctionReply | str:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        self.threads.add(threading.get_ident())
        try:
            await asyncio.sleep(0.02)
            return self.model(request)
        finally:
            self.in_flight -= 1


def test_an_async_loop_is_served_as_tasks_with_the_same_answers() -> None:
    def hook(request: ModelRequest) -> FunctionReply | None:
        if "explode" in request.last_user_text():
            raise RuntimeError("model exploded")
        return None

    model = AsyncModel(Model(hook))
    loop = CalcLoop(adapter=FunctionAdapter(model))
    requests, answers = mailboxes()
    good = [AgentLoopRequest(f"What is {i} + 1?") for i in range(8)]
    bad = AgentLoopRequest("explode 1 + 1")
    for request in (*good, bad):
        requests.send(request, reply_to=answers)
    worker = AgentLoopWorker(loop, requests=requests, max_concurrent=9)

    assert worker.handles_async
    worker.run(until_drained=True, wait_time_seconds=0)

    got = {r.request_id: r for r in replies(answers)}
    assert [got[r.request_id].output for r in good] == [
        Answer(float(i + 1), f"The calculator returned {i + 1}.") for i in range(8)
    ]
    assert (got[bad.request_id].error_kind, got[bad.request_id].error) == (
        "agent",
        "RuntimeError: model exploded",
    )
    assert model.most == 9 and len(model.threads) == 1  # tasks on one event loop


def test_an_async_loop_retries_transient_failures() -> None:
    calls = Counter[str]()

    def hook(request: ModelRequest) -> FunctionReply | None:
        calls[request.last_user_text()] += 1
        if request.turn == 0 and calls[request.last_user_text()] == 1:
            raise AdapterConnectionError("connection reset")
        return None

    loop = CalcLoop(adapter=FunctionAdapter(AsyncModel(Model(hook))))
    requests, answers = mailboxes()
    request = AgentLoopRequest("What is 2 + 2?")
    requests.send(request, reply_to=answers)
    worker = AgentLoopWorker(
        loop, requests=requests, retry=NO_WAIT, transient_errors=(AdapterConnectionError,)
    )

    worker.run(until_drained=True, wait_time_seconds=0)

    (answer,) = replies(answers)
    assert (answer.output, answer.delivery_count) == (Answer(4.0, "The calculator returned 4."), 2)
    assert worker.stats.retried == 1
