"""The evaluator, session evaluator and judge examples of the spec guides, run for real.

Sources: `spec/guide-evals.md` and `spec/guide-evaluation-chapter.md` (sections "Core
Types", "Built-in Evaluators", "LLM-as-Judge", "Session Evaluators", "Best Practices").
The code is kept as the guides write it, imports from `weakincentives.evals` included;
`FunctionAdapter` stands in for `OpenAIAdapter(model="gpt-4o-mini")`, and a scripted
agent run provides the session that session evaluators inspect.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import cast

from tests.helpers import ScriptedModel
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.evals import (
    Evaluator,
    Score,
    adapt,
    all_of,
    all_tools_succeeded,
    any_of,
    contains,
    exact_match,
    is_session_aware,
    llm_judge,
    slice_contains,
    token_usage_under,
    tool_call_count,
    tool_called,
    tool_not_called,
)
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate, Tool, ToolResult
from weakincentives.runtime import ToolInvoked
from weakincentives.runtime.session import Session, SessionView

# -- stand-ins: an agent run to inspect, and a judge model ---------------------------------


@dataclass(frozen=True)
class Query:
    query: str


def _tool(name: str) -> Tool[Query]:
    return Tool(name, f"The {name} tool.", Query, lambda p, ctx: ToolResult(f"{name}: {p.query}"))


AGENT = PromptTemplate[str](
    ns="guide",
    key="agent",
    sections=(MarkdownSection("Task", "task", "What is the capital of France?", role="user"),),
    tools=tuple(_tool(n) for n in ("search", "research", "fallback", "expensive_api")),
)


def agent_run(*tool_calls: str, answer: str = "Paris") -> Session:
    """Run the agent: one turn calling `tool_calls`, then `answer`; return its session."""
    turns = [FunctionReply.calls(*((n, {"query": "capital"}) for n in tool_calls))]
    model = ScriptedModel(*(turns if tool_calls else []), answer)
    session = Session()
    FunctionAdapter(model).evaluate(Prompt(AGENT), session=session)
    return session


def judge_model(request: ModelRequest) -> str:
    """Stands in for gpt-4o-mini: excellent when the response holds the reference answer."""
    text = request.last_user_text()
    reference = re.search(r"<reference>\n(.*?)\n</reference>", text, re.DOTALL)
    response = re.search(r"<response>\n(.*?)\n</response>", text, re.DOTALL)
    assert reference is not None and response is not None
    found = reference.group(1) in response.group(1)
    return json.dumps(
        {
            "justification": f"The response {'gives' if found else 'lacks'} the reference.",
            "rating": "excellent" if found else "poor",
        }
    )


judge_adapter = FunctionAdapter(judge_model)  # OpenAIAdapter(model="gpt-4o-mini") in the guides


# -- Core Types: Score and Evaluator --------------------------------------------------------


def my_evaluator(output: str, expected: str) -> Score:
    passed = expected.lower() in output.lower()
    return Score(
        value=1.0 if passed else 0.0,
        passed=passed,
        reason="Found expected answer" if passed else "Missing expected answer",
    )


def test_score_and_a_custom_evaluator() -> None:
    score = Score(
        value=1.0,  # Numeric score (0.0-1.0 typical)
        passed=True,  # Binary pass/fail
        reason="Correct answer found",  # Human-readable explanation
    )
    assert score.passed
    evaluator: Evaluator[str, str] = my_evaluator
    assert evaluator("The answer is PARIS", "paris").reason == "Found expected answer"
    assert evaluator("Lyon", "paris").reason == "Missing expected answer"


# -- Built-in Evaluators --------------------------------------------------------------------


def my_custom_check(output: object, expected: object) -> Score:
    return Score(value=1.0, passed=True)


def fuzzy_match(output: object, expected: object) -> Score:
    return Score(value=0.9, passed=True)


def test_built_in_evaluators() -> None:
    assert exact_match("hello", "hello").passed is True
    assert exact_match("hello", "Hello").passed is False
    assert contains("The answer is 42.", "42").passed is True
    assert contains("The answer is 42.", "43").passed is False

    evaluator = all_of(contains, my_custom_check)  # All must pass
    assert evaluator("The answer is 42.", "42").passed
    assert not evaluator("The answer is 42.", "43").passed

    evaluator = any_of(exact_match, fuzzy_match)  # At least one must pass
    score = evaluator("hello", "Hello")
    assert (score.passed, score.value) == (True, 0.9)


# -- LLM-as-Judge ---------------------------------------------------------------------------


def test_llm_judge_combined_with_objective_checks() -> None:
    evaluator = all_of(
        contains,
        llm_judge(judge_adapter, "Response is helpful"),
        llm_judge(judge_adapter, "No hallucinated info"),
    )
    good = evaluator("The capital of France is Paris.", "Paris")
    assert good.passed
    assert "llm_judge('Response is helpful'): excellent: The response gives" in good.reason
    bad = evaluator("The capital of France is Lyon.", "Paris")
    assert not bad.passed
    assert bad.value == (0.0 + 0.25 + 0.25) / 3
    assert "llm_judge('No hallucinated info'): poor: The response lacks" in bad.reason


def test_the_chapter_version_with_a_cast_also_works() -> None:
    evaluator = all_of(
        # The chapter writes `cast(Evaluator, contains)`; strict mypy wants the arguments.
        cast(Evaluator[str, str], contains),
        llm_judge(judge_adapter, "Response is helpful"),
        llm_judge(judge_adapter, "No hallucinated info"),
    )
    assert evaluator("Paris", "Paris").passed


# -- Session Evaluators ---------------------------------------------------------------------


def test_session_evaluators_mixed_with_a_plain_one() -> None:
    """guide-evals.md: `exact_match` sits beside session evaluators without `adapt`."""
    evaluator = all_of(
        exact_match,  # Output must match expected
        tool_called("search"),  # Agent must have used search
        tool_not_called("fallback"),  # Should not have used fallback
        all_tools_succeeded(),  # No tool failures
        token_usage_under(max_tokens=5000),  # Stay within budget
    )
    assert is_session_aware(evaluator)
    assert evaluator("Paris", "Paris", agent_run("search").view()).passed
    failed = evaluator("Paris", "Paris", agent_run("search", "fallback").view())
    assert not failed.passed
    assert "tool_not_called('fallback'): fallback called 1 time; expected 0" in failed.reason


def test_session_evaluators_with_adapt() -> None:
    """guide-evaluation-chapter.md: the same check, with `adapt(exact_match)`."""
    evaluator = all_of(
        adapt(exact_match),  # Output must match expected
        tool_called("search"),  # Agent must have used search
        tool_not_called("fallback"),  # Should not have used fallback
        all_tools_succeeded(),  # No tool failures
        token_usage_under(max_tokens=5000),  # Stay within budget
    )
    assert evaluator("Paris", "Paris", agent_run("search").view()).passed
    failed = evaluator("Lyon", "Paris", agent_run().view())
    assert failed.reason.startswith("exact_match: expected 'Paris', got 'Lyon'; ")
    assert "tool_called('search'): search called 0 times; expected >= 1" in failed.reason


def test_converting_standard_evaluators() -> None:
    # adapt() wraps a standard evaluator to ignore the session
    evaluator = all_of(
        adapt(exact_match),  # Now works with session evaluators
        tool_called("search"),
    )
    assert evaluator("Paris", "Paris", agent_run("search").view()).passed


@dataclass(frozen=True)
class Plan:
    steps: tuple[str, ...]


def custom_session_check(
    output: str,
    expected: str,
    session: SessionView,
) -> Score:
    # Check how many tools were called
    tool_events = session[ToolInvoked].all()

    if len(tool_events) > 10:
        return Score(
            value=0.0,
            passed=False,
            reason=f"Too many tool calls: {len(tool_events)} (max 10)",
        )

    # Check for specific patterns
    plan = session[Plan].latest()
    if plan and len(plan.steps) < 3:
        return Score(
            value=0.5,
            passed=False,
            reason="Plan too simple (fewer than 3 steps)",
        )

    return Score(value=1.0, passed=True, reason="Behavioral checks passed")


def test_custom_session_check() -> None:
    assert is_session_aware(custom_session_check)
    busy = agent_run(*["search"] * 11)
    assert custom_session_check("Paris", "Paris", busy.view()).reason == (
        "Too many tool calls: 11 (max 10)"
    )
    planned = agent_run("search")
    planned.dispatch(Plan(steps=("look up", "answer")))
    combined = all_of(exact_match, custom_session_check, slice_contains(Plan))
    score = combined("Paris", "Paris", planned.view())
    assert (score.passed, score.value) == (False, (1.0 + 0.5 + 1.0) / 3)
    assert "custom_session_check: Plan too simple (fewer than 3 steps)" in score.reason
    planned.dispatch(Plan(steps=("search", "read", "answer")))
    assert combined("Paris", "Paris", planned.view()).passed


def test_multi_criteria_evaluation() -> None:
    # Combine output, tool usage, and efficiency checks
    evaluator = all_of(
        # Output must contain expected answer
        adapt(contains),
        # Must use the research tool
        tool_called("research"),
        # Should not need the fallback tool
        tool_not_called("fallback"),
        # All tools should succeed (no errors)
        all_tools_succeeded(),
        # Stay under token budget
        token_usage_under(max_tokens=10_000),
        # Call research at most 3 times
        tool_call_count("research", min_count=1, max_count=3),
    )
    assert evaluator("It is Paris.", "Paris", agent_run("research", "research").view()).passed
    failed = evaluator("It is Paris.", "Paris", agent_run(*["research"] * 4).view())
    assert failed.reason.endswith(
        "tool_call_count('research', min_count=1, max_count=3): research called 4 times; "
        "expected between 1 and 3"
    )


# -- Best Practices -------------------------------------------------------------------------


def test_best_practices() -> None:
    # 1. Use exact match for objective criteria (the judge works too, slower)
    evaluator: Evaluator[object, object] = exact_match
    assert evaluator("4", "4").passed
    evaluator = llm_judge(judge_adapter, "Output matches expected")
    assert evaluator("4", "4").passed

    # 2. Combine evaluators for multi-criteria assessment
    multi = all_of(
        adapt(contains),  # Output correctness
        tool_called("research"),  # Required tool usage
        all_tools_succeeded(),  # No failures
        token_usage_under(10_000),  # Efficiency
    )
    assert multi("Paris!", "Paris", agent_run("research").view()).passed

    # 3. Use session evaluators for behavioral regression
    regression = all_of(
        adapt(exact_match),
        tool_call_count("expensive_api", min_count=0, max_count=2),  # Limit API calls
    )
    assert regression("Paris", "Paris", agent_run("expensive_api", "expensive_api").view()).passed
    costly = regression("Paris", "Paris", agent_run(*["expensive_api"] * 3).view())
    assert not costly.passed
    assert "expensive_api called 3 times; expected <= 2" in costly.reason
