from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers import ScriptedModel, calculator_model, calculator_tool
from weakincentives.adapters import (
    DescribedAdapter,
    FunctionAdapter,
    FunctionReply,
    ModelRequest,
    ProviderAdapter,
)
from weakincentives.clock import FakeClock
from weakincentives.errors import (
    AdapterResponseError,
    BudgetExceededError,
    DeadlineExceededError,
    TurnLimitExceededError,
)
from weakincentives.prompt import (
    MarkdownSection,
    Prompt,
    PromptTemplate,
    Tool,
    ToolContext,
    ToolResult,
)
from weakincentives.runtime import Budget, Deadline
from weakincentives.runtime.session import (
    ChatMessage,
    PromptExecuted,
    PromptFailed,
    PromptRendered,
    Session,
    TokenUsage,
    ToolCall,
    ToolInvoked,
)


@dataclass(frozen=True, slots=True)
class Answer:
    value: float
    unit: str = ""


def _prompt(output_type: type[Any] | None = None, *, tools: bool = True) -> Prompt[Any]:
    template = PromptTemplate[Any](
        ns="tests",
        key="calc",
        sections=(
            MarkdownSection("Rules", "rules", "Use the calculator."),
            MarkdownSection("Question", "question", "$question", role="user"),
        ),
        tools=(calculator_tool(),) if tools else (),
        output_type=output_type,
    )
    return Prompt(template).bind(question="What is 6 * 7?")


def test_text_answer_records_rendered_and_executed_events() -> None:
    clock = FakeClock()
    session = Session(clock=clock)
    adapter = FunctionAdapter(lambda req: "forty-two", model_name="fn", clock=clock)

    response = adapter.evaluate(_prompt(tools=False), session=session)

    assert response.text == "forty-two"
    assert response.output == "forty-two"  # a text prompt's output is its text
    assert response.model == "fn"
    assert response.model_requests == 1
    assert response.tool_calls == 0
    assert [m.role for m in response.messages] == ["system", "user", "assistant"]
    rendered = session[PromptRendered].latest()
    assert rendered is not None
    assert rendered.prompt_name == "tests/calc"
    assert rendered.overrides_tag is None
    assert rendered.rendered_at == clock.now()
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert (executed.text, executed.model, executed.usage) == ("forty-two", "fn", response.usage)
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0


def test_request_describes_tools_and_output() -> None:
    model = ScriptedModel('{"value": 1}')
    FunctionAdapter(model).evaluate(_prompt(Answer), session=Session())
    request = model.requests[0]
    assert [t.name for t in request.tools] == ["calculate"]
    assert request.output_type is Answer
    assert request.output_schema is not None
    assert request.output_schema["required"] == ["value"]
    assert request.prompt_name == "tests/calc"
    assert request.last_user_text() == "## Question\n\nWhat is 6 * 7?"
    assert request.timeout is None


def test_tool_results_reach_the_model_in_the_next_turn() -> None:
    model = ScriptedModel(calculator_model, calculator_model)
    session = Session()

    response = FunctionAdapter(model).evaluate(_prompt(), session=session)

    assert response.text == "42"
    assert response.tool_calls == 1
    assert response.model_requests == 2
    second = model.requests[1]
    assert second.turn == 1
    assert second.tool_messages() == (
        ChatMessage(role="tool", content="42", tool_call_id="call_0_0", name="calculate"),
    )
    invoked = session[ToolInvoked].all()
    assert len(invoked) == 1
    assert invoked[0].success
    assert invoked[0].result.value == 42.0
    assert invoked[0].prompt_name == "tests/calc"


@pytest.mark.parametrize(
    ("arguments", "error_prefix", "message_part"),
    [
        (
            {"a": "six", "op": "*", "b": 7},
            "ToolValidationError:",
            "Invalid arguments for tool 'calculate'",
        ),
        ({"a": 6, "op": "^", "b": 7}, "ToolValidationError:", "op:"),
        ({"a": 6, "op": "/", "b": 0}, "ZeroDivisionError:", "Tool 'calculate' failed"),
    ],
    ids=["invalid-number", "invalid-literal", "handler-raises"],
)
def test_failed_tool_calls_are_sent_back_and_recorded(
    arguments: dict[str, Any], error_prefix: str, message_part: str
) -> None:
    model = ScriptedModel(FunctionReply.call("calculate", **arguments), "gave up")
    session = Session()

    response = FunctionAdapter(model).evaluate(_prompt(), session=session)

    assert response.text == "gave up"
    (tool_message,) = model.requests[1].tool_messages()
    assert message_part in (tool_message.content or "")
    (event,) = session[ToolInvoked].all()
    assert not event.success
    assert not event.result.success
    assert event.error is not None
    assert event.error.startswith(error_prefix)
    assert event.result.message == tool_message.content


def test_unknown_tool_is_reported_to_the_model_and_recorded() -> None:
    model = ScriptedModel(FunctionReply.call("search", q="x"), "ok")
    session = Session()
    FunctionAdapter(model).evaluate(_prompt(), session=session)

    (tool_message,) = model.requests[1].tool_messages()
    assert tool_message.content == "Unknown tool 'search'. Available: calculate."
    (event,) = session[ToolInvoked].all()
    assert (event.name, event.success, event.error) == ("search", False, "UnknownTool: search")


def test_several_calls_in_one_turn_run_in_order_with_their_ids() -> None:
    reply = FunctionReply(
        tool_calls=(
            ToolCall(id="mine", name="calculate", arguments='{"a": 1, "op": "+", "b": 1}'),
            ToolCall(id="", name="calculate", arguments='{"a": 2, "op": "*", "b": 3}'),
        )
    )
    model = ScriptedModel(reply, "done")
    session = Session()
    response = FunctionAdapter(model).evaluate(_prompt(), session=session)

    assert [(e.call_id, e.result.message) for e in session[ToolInvoked].all()] == [
        ("mine", "2"),
        ("call_0_1", "6"),
    ]
    assert [m.tool_call_id for m in model.requests[1].tool_messages()] == ["mine", "call_0_1"]
    assert response.tool_calls == 2


def test_turn_limit() -> None:
    session = Session()
    adapter = FunctionAdapter(
        lambda req: FunctionReply.call("calculate", a=1, op="+", b=1), max_turns=3
    )
    with pytest.raises(TurnLimitExceededError, match="still calling tools after 3 turns"):
        adapter.evaluate(_prompt(), session=session)
    assert len(session[ToolInvoked].all()) == 3
    assert session[PromptExecuted].all() == ()


# -- structured output --------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        FunctionReply(output=Answer(42.0, "units")),
        '{"value": 42, "unit": "units"}',
        '```json\n{"value": 42, "unit": "units"}\n```',
        '  ```\n{"value": "42", "unit": "units"}\n```  ',
    ],
    ids=["output", "json", "fenced-json", "fenced-plain"],
)
def test_structured_output_is_parsed(reply: FunctionReply | str) -> None:
    session = Session()
    response = FunctionAdapter(ScriptedModel(reply)).evaluate(_prompt(Answer), session=session)
    assert response.output == Answer(42.0, "units")
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert executed.output == Answer(42.0, "units")


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        ('{"unit": "x"}', "value: Field required"),
        ('{"value": "many"}', "value:"),
        ("forty-two", "does not parse"),
        ('Here it is: ```json\n{"value": 1}\n```', "does not parse"),
        ("", "got no text"),
    ],
    ids=["missing-field", "wrong-type", "not-json", "prose-around-fence", "empty"],
)
def test_structured_output_that_does_not_validate(reply: str, match: str) -> None:
    session = Session()
    adapter = FunctionAdapter(ScriptedModel(reply), output_retries=0)
    with pytest.raises(AdapterResponseError, match=match):
        adapter.evaluate(_prompt(Answer), session=session)
    assert session[PromptExecuted].all() == ()
    failed = session[PromptFailed].latest()
    assert failed is not None
    assert failed.stage == "output_parsing"
    assert failed.error_type == "AdapterResponseError"
    assert failed.model_requests == 1
    assert failed.messages[-1] == ChatMessage(role="assistant", content=reply)


def test_a_reply_that_does_not_parse_is_retried_with_the_parse_error() -> None:
    model = ScriptedModel("forty-two", '{"value": 42}')
    session = Session()

    response = FunctionAdapter(model).evaluate(_prompt(Answer, tools=False), session=session)

    assert response.output == Answer(42.0)
    assert response.model_requests == 2
    # The failed answer and the correction are in the transcript, in order.
    roles = [m.role for m in response.messages]
    assert roles[-3:] == ["assistant", "user", "assistant"]
    correction = response.messages[-2].content or ""
    assert "does not parse" in correction
    assert "forty-two" in correction
    assert model.requests[1].messages[-1].content == correction
    # Both calls' tokens are counted.
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert executed.usage.output_tokens == 3 + 4  # estimates of "forty-two" then '{"value": 42}'
    assert session[PromptFailed].all() == ()


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_parse_retries_are_bounded(retries: int) -> None:
    model = ScriptedModel(*(["not json"] * (retries + 1)))
    session = Session()
    adapter = FunctionAdapter(model, output_retries=retries)

    with pytest.raises(AdapterResponseError, match="does not parse"):
        adapter.evaluate(_prompt(Answer, tools=False), session=session)

    assert len(model.requests) == retries + 1
    failed = session[PromptFailed].latest()
    assert failed is not None
    assert failed.stage == "output_parsing"
    assert failed.model_requests == retries + 1
    assert [m.role for m in failed.messages].count("assistant") == retries + 1
    assert failed.usage.output_tokens == 3 * (retries + 1)


def test_a_failed_run_keeps_its_transcript_tool_calls_and_tokens() -> None:
    def broken(request: ModelRequest) -> FunctionReply | str:
        if request.turn == 0:
            return FunctionReply(
                tool_calls=(
                    ToolCall(id="", name="calculate", arguments='{"a": 6, "op": "*", "b": 7}'),
                ),
                usage=TokenUsage(input_tokens=10, output_tokens=5),
            )
        raise RuntimeError("provider went away")

    session = Session()
    with pytest.raises(RuntimeError, match="provider went away"):
        FunctionAdapter(broken).evaluate(_prompt(), session=session)

    failed = session[PromptFailed].latest()
    assert failed is not None
    assert failed.stage == "agent"
    assert failed.error == "provider went away"
    assert failed.usage == TokenUsage(input_tokens=10, output_tokens=5)
    assert failed.tool_calls == 1
    assert [m.role for m in failed.messages][-2:] == ["assistant", "tool"]
    assert failed.messages[-1].content == "42"
    assert len(session[ToolInvoked].all()) == 1


def test_describe_names_the_function_and_the_limits() -> None:
    info = FunctionAdapter(calculator_model, model_name="calc", max_turns=4).describe()

    assert info.provider == "function"
    assert info.model == "tests.helpers.calculator_model"
    assert info.base_url is None
    assert dict(info.parameters) == {"model_name": "calc", "max_turns": 4, "output_retries": 1}
    assert info.adapter == "weakincentives.adapters.function.FunctionAdapter"
    assert info.version
    assert isinstance(FunctionAdapter(calculator_model), DescribedAdapter)
    other = FunctionAdapter(calculator_model, model_name="calc", max_turns=4, output_retries=2)
    assert other.describe().behaviour() != info.behaviour()


# -- limits and heartbeats -------------------------------------------------------------------


def test_deadline_passes_while_the_model_works() -> None:
    clock = FakeClock()
    deadline = Deadline.after(10, clock=clock)

    def slow(request: ModelRequest) -> FunctionReply | str:
        assert request.timeout == 10 - 6 * request.turn
        clock.advance(6)
        return FunctionReply.call("calculate", a=1, op="+", b=1)

    session = Session(clock=clock)
    with pytest.raises(DeadlineExceededError, match="prompt tests/calc passed its deadline"):
        FunctionAdapter(slow, clock=clock).evaluate(_prompt(), session=session, deadline=deadline)
    # Turn 0 ends at t=6 (in time); turn 1 ends at t=12, past the deadline, so its tool
    # calls never run: a late answer is a timeout.
    assert len(session[ToolInvoked].all()) == 1


def test_budget_is_enforced_after_each_model_call() -> None:
    usage = TokenUsage(input_tokens=40, output_tokens=10)
    model = ScriptedModel(
        FunctionReply(
            tool_calls=FunctionReply.call("calculate", a=1, op="+", b=1).tool_calls, usage=usage
        ),
        FunctionReply(text="done", usage=usage),
    )
    with pytest.raises(BudgetExceededError, match="100 total tokens used, limit 99"):
        FunctionAdapter(model).evaluate(
            _prompt(), session=Session(), budget=Budget(max_total_tokens=99)
        )


def test_budget_not_exceeded_reports_the_explicit_usage() -> None:
    usage = TokenUsage(input_tokens=40, output_tokens=10, cached_tokens=5)
    model = ScriptedModel(FunctionReply(text="done", usage=usage))
    response = FunctionAdapter(model).evaluate(
        _prompt(), session=Session(), budget=Budget(max_total_tokens=50)
    )
    assert response.usage == usage


@dataclass(frozen=True, slots=True)
class NoParams:
    pass


def test_heartbeat_runs_every_turn_and_reaches_tools() -> None:
    beats: list[str] = []

    def model(request: ModelRequest) -> FunctionReply | str:
        return "done" if request.turn else FunctionReply.call("probe")

    def probe(params: NoParams, context: ToolContext) -> ToolResult:
        assert context.heartbeat is not None
        context.heartbeat()
        return ToolResult(message="ok")

    template = PromptTemplate[str](
        ns="tests",
        key="beat",
        sections=(MarkdownSection("", "s", "go", role="user"),),
        tools=(Tool(name="probe", description="p", params_type=NoParams, handler=probe),),
    )
    session = Session()
    FunctionAdapter(model).evaluate(
        Prompt(template), session=session, heartbeat=lambda: beats.append("beat")
    )
    assert len(beats) == 3  # one per turn (two) and one from the tool
    assert [e.success for e in session[ToolInvoked].all()] == [True]


def test_function_adapter_is_a_provider_adapter() -> None:
    adapter: ProviderAdapter = FunctionAdapter(lambda req: "ok")
    assert adapter.evaluate(_prompt(tools=False), session=Session()).text == "ok"


def _usage(tokens: int) -> TokenUsage:
    return TokenUsage(input_tokens=tokens, output_tokens=1, cached_tokens=tokens // 2)


@pytest.mark.parametrize("budget", [None, Budget(max_total_tokens=1_000)])
def test_usage_adds_up_over_turns_with_or_without_a_budget(budget: Budget | None) -> None:
    call = FunctionReply.call("calculate", a=1, op="+", b=1).tool_calls
    model = ScriptedModel(
        FunctionReply(tool_calls=call, usage=_usage(10)),
        FunctionReply(tool_calls=call, usage=_usage(20)),
        FunctionReply(text="done", usage=_usage(30)),
    )
    session = Session()

    response = FunctionAdapter(model).evaluate(_prompt(), session=session, budget=budget)

    total = TokenUsage(input_tokens=60, output_tokens=3, cached_tokens=30)
    assert response.usage == total
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert executed.usage == total
    assert executed.turn_usage == (_usage(10), _usage(20), _usage(30))
    assert executed.model_requests == 3
    assert executed.tool_calls == 2


@dataclass(frozen=True)
class Unschematic:
    """Params pydantic makes no JSON schema of (a field that holds a function)."""

    callback: Callable[[], None]


@pytest.mark.parametrize("where", ["tool", "output"])
def test_a_schema_that_cannot_be_made_fails_the_run_with_its_evidence(where: str) -> None:
    def never(params: Unschematic, context: ToolContext) -> ToolResult:
        raise AssertionError("not called")

    template = PromptTemplate[Any](
        ns="tests",
        key="schema",
        sections=(MarkdownSection("", "s", "go", role="user"),),
        tools=(Tool(name="odd", description="o", params_type=Unschematic, handler=never),)
        if where == "tool"
        else (),
        output_type=Unschematic if where == "output" else None,
    )
    model = ScriptedModel()  # never asked: the run fails before its first request
    session = Session()

    with pytest.raises(Exception) as info:
        FunctionAdapter(model).evaluate(Prompt(template), session=session)

    assert model.requests == []
    failed = session[PromptFailed].latest()
    assert failed is not None  # as when the loop was a generator: recorded, then raised
    assert failed.stage == "agent"
    assert failed.error_type == type(info.value).__name__
    assert [m.role for m in failed.messages] == ["user"]
    assert session[PromptRendered].latest() is not None
