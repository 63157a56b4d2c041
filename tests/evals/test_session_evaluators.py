"""Session-aware evaluators: tool calls, trajectories, usage, requests, latency, slices."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers import ScriptedModel, calculator_tool
from weakincentives.adapters import FunctionAdapter, FunctionReply
from weakincentives.errors import ConfigurationError
from weakincentives.evals._records import Score
from weakincentives.evals.scoring._protocols import evaluator_name, is_session_aware, run_evaluator
from weakincentives.evals.scoring._session_checks import (
    all_tools_succeeded,
    latency_under,
    max_model_requests,
    slice_contains,
    token_usage_under,
    tool_args_match,
    tool_call_count,
    tool_called,
    tool_not_called,
    tool_sequence,
)
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate, Tool, ToolContext
from weakincentives.runtime.session import (
    PromptExecuted,
    Session,
    SessionView,
    TokenUsage,
    ToolInvoked,
    ToolResult,
)


def call(
    name: str, params: dict[str, Any] | None = None, *, ok: bool = True, error: str | None = None
) -> ToolInvoked:
    message = "done" if ok else f"{name} failed"
    return ToolInvoked(
        name=name,
        params=params or {},
        result=ToolResult(message, success=ok),
        success=ok,
        call_id=f"call-{name}",
        duration_ms=1.0,
        error=error,
    )


def run(
    input_tokens: int = 0, output_tokens: int = 0, *, requests: int = 1, ms: float = 0.0
) -> PromptExecuted:
    return PromptExecuted(
        prompt_ns="test",
        prompt_key="agent",
        prompt_name="agent",
        text="answer",
        usage=TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens),
        model_requests=requests,
        duration_ms=ms,
    )


def view(*events: object) -> SessionView:
    session = Session()
    for event in events:
        session.dispatch(event)
    return session.view()


def score(evaluator: Callable[..., Score], *events: object) -> Score:
    return run_evaluator(evaluator, "output", "expected", view(*events))


# -- tool_called / tool_not_called / tool_call_count ---------------------------------------


def test_tool_called() -> None:
    ok = score(tool_called("search"), call("search"), call("search"))
    assert (ok.passed, ok.value, ok.reason) == (True, 1.0, "search called 2 times; expected >= 1")
    missing = score(tool_called("search"), call("lookup"), call("lookup"), call("fetch"))
    assert (missing.passed, missing.value) == (False, 0.0)
    assert missing.reason == (
        "search called 0 times; expected >= 1 (tools called: lookup x2, fetch x1)"
    )
    assert score(tool_called("search")).reason == (
        "search called 0 times; expected >= 1 (no tools were called)"
    )


def test_tool_not_called() -> None:
    assert score(tool_not_called("fallback"), call("search")).reason == (
        "fallback called 0 times; expected 0"
    )
    used = score(tool_not_called("fallback"), call("fallback"))
    assert (used.passed, used.reason) == (False, "fallback called 1 time; expected 0")


@pytest.mark.parametrize(
    ("min_count", "max_count", "calls", "passed", "wanted"),
    [
        (1, 3, 0, False, "between 1 and 3"),
        (1, 3, 1, True, "between 1 and 3"),
        (1, 3, 3, True, "between 1 and 3"),
        (1, 3, 4, False, "between 1 and 3"),
        (2, None, 1, False, ">= 2"),
        (0, 2, 2, True, "<= 2"),
        (2, 2, 2, True, "exactly 2"),
        (0, None, 0, True, ">= 0"),
    ],
)
def test_tool_call_count_bounds_are_inclusive(
    min_count: int, max_count: int | None, calls: int, passed: bool, wanted: str
) -> None:
    evaluator = tool_call_count("research", min_count=min_count, max_count=max_count)
    result = score(evaluator, *[call("research")] * calls)
    assert result.passed is passed
    assert result.reason.startswith(f"research called {calls} time")
    assert f"; expected {wanted}" in result.reason
    assert result.metric("calls") is not None
    assert result.metric("calls").value == calls  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: tool_call_count("x", min_count=-1), "min_count must be an int >= 0"),
        (lambda: tool_call_count("x", 3, 1), r"max_count \(1\) is below min_count \(3\)"),
        (lambda: tool_call_count("x", max_count=1.5), "max_count must be an int"),  # type: ignore[arg-type]
        (lambda: tool_called(""), "needs a tool name"),
        (lambda: tool_not_called(None), "needs a tool name"),  # type: ignore[arg-type]
        (lambda: tool_args_match("x", ["q"]), "subset must be a mapping"),  # type: ignore[arg-type]
    ],
)
def test_bad_counts_fail_at_creation(factory: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        factory()


# -- all_tools_succeeded -------------------------------------------------------------------


def test_all_tools_succeeded_sees_every_failed_call() -> None:
    result = score(
        all_tools_succeeded(),
        call("search"),
        call("fetch", ok=False, error="RuntimeError: boom"),
        call("parse", ok=False),
    )
    assert result.passed is False
    assert result.reason == (
        "2 of 3 tool calls failed: fetch (RuntimeError: boom), parse (parse failed); "
        "expected no failures"
    )
    assert result.metric("failed_calls").value == 2  # type: ignore[union-attr]


def test_all_tools_succeeded_when_nothing_failed() -> None:
    assert score(all_tools_succeeded(), call("a"), call("b")).reason == (
        "all 2 tool calls succeeded"
    )
    assert score(all_tools_succeeded()).reason == "no tools were called; expected no failures"


def test_all_tools_succeeded_trusts_the_result_flag_too() -> None:
    inconsistent = ToolInvoked(
        name="odd",
        params={},
        result=ToolResult("bad", success=False),
        success=True,
        call_id="1",
        duration_ms=0.0,
    )
    assert not score(all_tools_succeeded(), inconsistent).passed


@dataclass(frozen=True)
class LookupParams:
    query: str


def failing_lookup(params: LookupParams, context: ToolContext) -> ToolResult:
    return ToolResult(message=f"nothing found for {params.query}", success=False)


def test_all_tools_succeeded_through_a_real_tool_loop() -> None:
    """A failed result, a raising handler, invalid arguments and an unknown tool all count."""
    template = PromptTemplate[str](
        ns="test",
        key="tools",
        sections=(MarkdownSection("Task", "task", "Compute.", role="user"),),
        tools=(
            calculator_tool(),
            Tool("lookup", "Look something up.", LookupParams, failing_lookup),
        ),
    )
    model = ScriptedModel(
        FunctionReply.calls(
            ("calculate", {"a": 1, "op": "+", "b": 2}),
            ("lookup", {"query": "x"}),
            ("calculate", {"a": 1, "op": "/", "b": 0}),
            ("calculate", {"a": 1, "op": "%", "b": 2}),
            ("missing", {}),
        ),
        "done",
    )
    session = Session()
    FunctionAdapter(model).evaluate(Prompt(template), session=session)
    result = run_evaluator(all_tools_succeeded(), "done", None, session.view())
    assert result.passed is False
    assert result.reason.startswith("4 of 5 tool calls failed: lookup (nothing found for x), ")
    assert "calculate (ZeroDivisionError: float division by zero)" in result.reason
    assert "calculate (ToolValidationError: invalid CalcParams: op: " in result.reason
    assert "missing (UnknownTool: missing)" in result.reason
    assert result.reason.endswith("; expected no failures")


# -- tool_sequence / tool_args_match --------------------------------------------------------

CALLS = ("search", "fetch", "search", "answer")


@pytest.mark.parametrize(
    ("names", "mode", "passed", "tail"),
    [
        (list(CALLS), "exact", True, "expected exactly [search, fetch, search, answer]"),
        (["search", "answer"], "exact", False, "expected exactly [search, answer]"),
        (["search", "answer"], "in_order", True, "expected [search, answer] in this order"),
        (
            ["fetch", "search", "fetch"],
            "in_order",
            False,
            "expected [fetch, search, fetch] in this order (matched fetch, search, "
            "then no fetch after it)",
        ),
        (
            ["summarize"],
            "in_order",
            False,
            "expected [summarize] in this order (no summarize call)",
        ),
        (["answer", "search", "search"], "any_order", True, "in any order"),
        (
            ["answer", "fetch", "fetch", "rank"],
            "any_order",
            False,
            "expected each of [answer, fetch, fetch, rank] in any order (missing: fetch, rank)",
        ),
    ],
)
def test_tool_sequence(names: list[str], mode: Any, passed: bool, tail: str) -> None:
    result = score(tool_sequence(names, mode), *[call(n) for n in CALLS])
    assert result.passed is passed
    assert result.reason.startswith("tool calls were [search, fetch, search, answer]; ")
    assert result.reason.endswith(tail)


@pytest.mark.parametrize(
    ("names", "mode", "message"),
    [
        ("search", "exact", "needs a list of tool names"),
        (["search", 3], "exact", "needs a list of tool names"),
        (["search"], "sorted", "mode must be 'exact', 'in_order' or 'any_order'"),
    ],
)
def test_tool_sequence_rejects_bad_arguments(names: Any, mode: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        tool_sequence(names, mode)


SEARCHES = (
    call("search", {"query": "london", "filters": {"lang": "en", "year": 2020}}),
    call("search", {"query": "paris", "filters": {"lang": "fr"}, "tags": ["a", "b"]}),
)


@pytest.mark.parametrize(
    ("subset", "passed"),
    [
        ({"query": "paris"}, True),
        ({"filters": {"lang": "en"}}, True),
        ({"query": "london", "filters": {"year": 2020}}, True),
        ({"query": "paris", "filters": {"lang": "en"}}, False),
        ({"tags": ["a", "b"]}, True),
        ({"tags": ["a"]}, False),
        ({"filters": "fr"}, False),
        ({"page": 1}, False),
    ],
)
def test_tool_args_match_compares_nested_subsets(subset: dict[str, Any], passed: bool) -> None:
    assert score(tool_args_match("search", subset), *SEARCHES).passed is passed


def test_tool_args_match_reasons() -> None:
    hit = score(tool_args_match("search", {"query": "paris"}), *SEARCHES)
    assert hit.reason == "search call 2 of 2 had arguments matching {'query': 'paris'}"
    miss = score(tool_args_match("search", {"query": "rome"}), *SEARCHES)
    assert miss.reason.startswith("search called 2 times, with arguments {'query': 'london', ")
    assert miss.reason.endswith("; expected a call with arguments matching {'query': 'rome'}")
    none = score(tool_args_match("fetch", {"url": "x"}), *SEARCHES)
    assert (
        none.reason == "fetch called 0 times; expected a call with arguments matching {'url': 'x'}"
    )


# -- tokens, model requests, latency -----------------------------------------------------


@pytest.mark.parametrize(("limit", "passed"), [(5200, True), (5199, False), (10_000, True)])
def test_token_usage_under_sums_every_prompt_run_inclusively(limit: int, passed: bool) -> None:
    result = score(token_usage_under(limit), run(3000, 800), run(1000, 400))
    assert result.passed is passed
    assert result.reason == (
        f"used 5200 tokens (4000 input + 1200 output) over 2 prompt runs; expected <= {limit}"
    )
    assert result.metric("tokens").value == 5200  # type: ignore[union-attr]


def test_token_usage_under_without_runs_passes() -> None:
    assert score(token_usage_under(0)).reason == (
        "used 0 tokens (0 input + 0 output) over 0 prompt runs; expected <= 0"
    )


@pytest.mark.parametrize(("limit", "passed"), [(7, True), (6, False)])
def test_max_model_requests(limit: int, passed: bool) -> None:
    result = score(max_model_requests(limit), run(requests=4), run(requests=3))
    assert result.passed is passed
    assert result.reason == f"made 7 model requests over 2 prompt runs; expected <= {limit}"


@pytest.mark.parametrize(("limit", "passed"), [(1500.0, True), (1000, False)])
def test_latency_under(limit: float, passed: bool) -> None:
    result = score(latency_under(limit), run(ms=1200.4), run(ms=299.6))
    assert result.passed is passed
    assert result.reason == f"took 1500 ms over 2 prompt runs; expected <= {limit:g} ms"


@pytest.mark.parametrize(
    "factory",
    [
        lambda: token_usage_under(-1),
        lambda: max_model_requests(True),
        lambda: latency_under(-5.0),
        lambda: slice_contains(Plan, min_count=-1),
    ],
)
def test_limits_must_be_non_negative_numbers(factory: Callable[[], object]) -> None:
    with pytest.raises(ConfigurationError, match=">= 0"):
        factory()


# -- slice_contains -----------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    steps: tuple[str, ...]


def has_steps(plan: Plan) -> bool:
    return len(plan.steps) >= 3


def test_slice_contains_counts_values() -> None:
    plans = (Plan(("a",)), Plan(("a", "b", "c")))
    assert (
        score(slice_contains(Plan), *plans).reason == "2 Plan values in the session; expected >= 1"
    )
    assert not score(slice_contains(Plan)).passed


@pytest.mark.parametrize(("min_count", "passed"), [(1, True), (2, False)])
def test_slice_contains_with_a_predicate(min_count: int, passed: bool) -> None:
    evaluator = slice_contains(Plan, has_steps, min_count=min_count)
    result = score(evaluator, Plan(("a",)), Plan(("a", "b", "c")), Plan(()))
    assert result.passed is passed
    assert result.reason == f"1 of 3 Plan values match has_steps; expected >= {min_count}"


def test_slice_contains_needs_a_type() -> None:
    with pytest.raises(ConfigurationError, match="slice_contains needs a type"):
        slice_contains("Plan")  # type: ignore[arg-type]  # the mistake under test


# -- every evaluator: session-aware, named, and found/expected in its reason ----------------

FAILING_CASES: list[tuple[Callable[..., Score], str, str]] = [
    (tool_called("search"), "tool_called('search')", "search called 0 times"),
    (tool_not_called("lookup"), "tool_not_called('lookup')", "lookup called 2 times"),
    (
        tool_call_count("lookup", 3, 4),
        "tool_call_count('lookup', min_count=3, max_count=4)",
        "lookup called 2 times",
    ),
    (all_tools_succeeded(), "all_tools_succeeded()", "1 of 2 tool calls failed"),
    (token_usage_under(10), "token_usage_under(10)", "used 60 tokens"),
    (
        slice_contains(Plan, has_steps, 2),
        "slice_contains(Plan, has_steps, min_count=2)",
        "0 of 1 Plan values match",
    ),
    (
        tool_sequence(["lookup"]),
        "tool_sequence(['lookup'], mode='exact')",
        "tool calls were [lookup, lookup]",
    ),
    (
        tool_args_match("lookup", {"q": "y"}),
        "tool_args_match('lookup', {'q': 'y'})",
        "lookup called 2 times, with arguments {'q': 'x'}",
    ),
    (max_model_requests(1), "max_model_requests(1)", "made 3 model requests"),
    (latency_under(10), "latency_under(10)", "took 25 ms"),
]
EVENTS = (
    call("lookup", {"q": "x"}),
    call("lookup", {"q": "x"}, ok=False, error="KeyError: 'x'"),
    run(40, 20, requests=3, ms=25.0),
    Plan(("a",)),
)


@pytest.mark.parametrize(
    ("evaluator", "name", "found"), FAILING_CASES, ids=[c[1] for c in FAILING_CASES]
)
def test_every_reason_states_what_was_found_and_expected(
    evaluator: Callable[..., Score], name: str, found: str
) -> None:
    assert is_session_aware(evaluator)
    assert evaluator_name(evaluator) == name
    result = score(evaluator, *EVENTS)
    assert result.passed is False
    assert result.value == 0.0
    seen, separator, wanted = result.reason.partition("; expected ")
    assert separator, result.reason
    assert seen.startswith(found), result.reason
    assert wanted


def test_session_evaluators_accept_a_session_or_a_view() -> None:
    session = Session()
    session.dispatch(call("search"))
    assert tool_called("search")("out", "exp", session).passed
    assert tool_called("search")("out", "exp", session.view()).passed
