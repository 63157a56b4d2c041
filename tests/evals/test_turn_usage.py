"""Tokens and cost per turn: each result records every model call's usage and its price.

Over real HTTP against the scripted OpenAI-compatible server: the adapter's loop keeps each
call's usage (`PromptExecuted.turn_usage`, `PromptFailed.turn_usage`), and the runner records
one compact `TurnUsage` per model call on the result, priced at the call's model, also for a
sample that errored (up to the failure). The turns add up to the result's usage and cost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.fake_openai_server import FakeOpenAIServer, completion, error, usage
from weakincentives import serde
from weakincentives.adapters.openai import OpenAIAdapter
from weakincentives.adapters.pricing import ModelPrice, PriceTable
from weakincentives.clock import FakeClock
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Sample,
    Score,
    TurnUsage,
    exact_match,
    run_eval,
)
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate, Tool, ToolContext
from weakincentives.prompt import ToolResult as PromptToolResult
from weakincentives.runtime.agent_loop import AgentLoop
from weakincentives.runtime.session import (
    PromptExecuted,
    PromptFailed,
    Session,
    TokenUsage,
)

PRICES = PriceTable({"fake-model": ModelPrice(input=2.0, output=8.0, cached_input=0.5)})


def price(input_tokens: int, output_tokens: int, cached: int = 0) -> float:
    return ((input_tokens - cached) * 2.0 + cached * 0.5 + output_tokens * 8.0) / 1e6


@dataclass(frozen=True)
class Question:
    text: str


@dataclass(frozen=True)
class Numbers:
    a: int
    b: int


def _add(params: Numbers, ctx: ToolContext) -> PromptToolResult:
    return PromptToolResult(message=str(params.a + params.b), value=params.a + params.b)


ADD = Tool(name="add", description="Add two numbers.", params_type=Numbers, handler=_add)


class AddLoop(AgentLoop[str, Any]):
    def create_prompt(self, request: str) -> Prompt[Any]:
        template = PromptTemplate[Any](
            ns="tests", key="add",
            sections=(MarkdownSection("Q", "q", "$text", Question, role="user"),), tools=(ADD,),
        )  # fmt: skip
        return Prompt(template).bind(Question(request))


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as s:
        yield s


def loop_for(server: FakeOpenAIServer) -> AddLoop:
    adapter = OpenAIAdapter(
        "fake-model", base_url=server.base_url, api_key="k", clock=FakeClock(), max_retries=0
    )
    return AddLoop(adapter=adapter)


def one_sample() -> list[Sample[str, str]]:
    return [Sample(id="s1", input="What is 2 + 3?", expected="5")]


def test_each_model_call_is_recorded_with_its_tokens_and_cost(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    server.enqueue(
        completion(tool_calls=[("add", {"a": 2, "b": 3})], usage=usage(40, 10)),
        completion("5", usage=usage(60, 2, cached_tokens=32)),
    )

    report = run_eval(one_sample(), loop_for(server), exact_match, prices=PRICES, store=tmp_path)

    (result,) = EvalReport.load(tmp_path / str(report.run_id)).results
    assert result.passed
    assert [t[:2] for t in result.turns] == [(40, 10), (60, 2)]
    assert [t.cost for t in result.turns] == pytest.approx([price(40, 10), price(60, 2, 32)])
    assert sum(t.input_tokens for t in result.turns) == result.usage.input_tokens == 100
    assert sum(t.output_tokens for t in result.turns) == result.usage.output_tokens == 12
    assert sum(t.cost or 0.0 for t in result.turns) == pytest.approx(result.cost)
    # One turn per assistant message of the transcript, in order.
    assistant = [m for m in result.messages if m.role == "assistant"]
    assert len(assistant) == len(result.turns) == 2


def test_an_errored_sample_keeps_the_turns_before_its_failure(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    server.enqueue(
        completion(tool_calls=[("add", {"a": 2, "b": 3})], usage=usage(40, 10)),
        error(400, message="context length exceeded"),
    )

    report = run_eval(one_sample(), loop_for(server), exact_match, prices=PRICES, store=tmp_path)

    (result,) = EvalReport.load(tmp_path / str(report.run_id)).results
    assert result.error_kind == "agent"
    (turn,) = result.turns
    assert (turn.input_tokens, turn.output_tokens) == (40, 10)
    assert turn.cost == pytest.approx(price(40, 10))
    assert result.cost == pytest.approx(price(40, 10))
    assert [m.role for m in result.messages][-2:] == ["assistant", "tool"]


def test_an_unpriced_model_records_its_turns_without_a_cost(server: FakeOpenAIServer) -> None:
    server.enqueue(
        completion(tool_calls=[("add", {"a": 2, "b": 3})], usage=usage(40, 10)),
        completion("5", usage=usage(60, 2)),
    )

    report = run_eval(one_sample(), loop_for(server), exact_match, prices=PriceTable({}))

    (result,) = report.results
    assert result.cost is None
    assert [(t.input_tokens, t.output_tokens, t.cost) for t in result.turns] == [
        (40, 10, None),
        (60, 2, None),
    ]


def test_the_adapter_reports_each_calls_usage_in_its_events(server: FakeOpenAIServer) -> None:
    server.enqueue(
        completion(tool_calls=[("add", {"a": 2, "b": 3})], usage=usage(40, 10)),
        completion("5", usage=usage(60, 2, cached_tokens=32)),
        completion(tool_calls=[("add", {"a": 1, "b": 1})], usage=usage(7, 3)),
        error(400, message="no"),
    )
    loop = loop_for(server)
    _, session = loop.execute("What is 2 + 3?")
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert executed.turn_usage == (
        TokenUsage(input_tokens=40, output_tokens=10),
        TokenUsage(input_tokens=60, output_tokens=2, cached_tokens=32),
    )
    failed_session = Session()
    with pytest.raises(Exception, match="no"):
        loop.adapter.evaluate(loop.create_prompt("What is 1 + 1?"), session=failed_session)
    failed = failed_session[PromptFailed].latest()
    assert failed is not None
    assert failed.turn_usage == (TokenUsage(input_tokens=7, output_tokens=3),)


def test_turns_are_stored_compactly_and_read_back() -> None:
    result = EvalResult(
        sample_id="s", experiment_name="e", latency_ms=1, score=Score(value=1.0),
        turns=(TurnUsage(40, 10, 0.00016), TurnUsage(60, 2, None)),
    )  # fmt: skip

    line = serde.dumps(result)

    assert b'"turns":[[40,10,0.00016],[60,2,null]]' in line
    assert serde.loads(EvalResult, line) == result
    old = json.loads(line)
    del old["turns"]  # a result written before turns were recorded
    assert serde.load(EvalResult, old).turns == ()
