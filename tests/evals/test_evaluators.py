"""Built-in output evaluators and the combinators `all_of`, `any_of`, `not_`, `threshold`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from weakincentives.errors import ConfigurationError, InvalidScoreError, JudgeError
from weakincentives.evals._records import Score
from weakincentives.evals.scoring._builtins import (
    adapt,
    all_of,
    any_of,
    contains,
    contains_ci,
    exact_match,
    not_,
    threshold,
)
from weakincentives.evals.scoring._matchers import numeric_close
from weakincentives.evals.scoring._protocols import classify_error, evaluator_name, is_session_aware
from weakincentives.evals.scoring._session_checks import tool_called
from weakincentives.runtime.session import (
    Session,
    SessionView,
    SessionViewProtocol,
    ToolInvoked,
    ToolResult,
)


def fixed(name: str, value: float, passed: bool, calls: list[str] | None = None) -> Any:
    """A plain evaluator called `name` that returns a fixed score and logs its calls."""

    def evaluate(output: object, expected: object) -> Score:
        if calls is not None:
            calls.append(name)
        return Score(value=value, passed=passed, reason=f"{name} says {value}")

    evaluate.__name__ = name
    return evaluate


def raising(name: str, exc: Exception, calls: list[str]) -> Any:
    def evaluate(output: object, expected: object) -> Score:
        calls.append(name)
        raise exc

    evaluate.__name__ = name
    return evaluate


def session_with_tools(*names: str) -> SessionView:
    session = Session()
    for i, name in enumerate(names):
        session.dispatch(
            ToolInvoked(
                name=name,
                params={},
                result=ToolResult("ok"),
                success=True,
                call_id=str(i),
                duration_ms=1.0,
            )
        )
    return session.view()


# -- exact_match, contains --------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected", "passed", "reason"),
    [
        ("hello", "hello", True, "output equals expected 'hello'"),
        ("hello", "Hello", False, "expected 'Hello', got 'hello'"),
        ("4", 4, False, "expected 4 (int), got '4' (str)"),
        ({"a": 1}, {"a": 1}, True, "output equals expected {'a': 1}"),
    ],
)
def test_exact_match(output: object, expected: object, passed: bool, reason: str) -> None:
    score = exact_match(output, expected)
    assert (score.passed, score.value, score.reason) == (passed, float(passed), reason)


def test_exact_match_shortens_long_values_in_reasons() -> None:
    score = exact_match("x" * 500, "y")
    assert len(score.reason) < 150
    assert score.reason.endswith("...")


@pytest.mark.parametrize(
    ("evaluator", "output", "expected", "passed", "reason"),
    [
        (contains, "The answer is 42.", "42", True, "'42' found in output"),
        (
            contains,
            "The answer is 42.",
            "43",
            False,
            "'43' not found in output 'The answer is 42.'",
        ),
        (contains, "The answer is 42.", 42, True, "42 found in output"),
        (contains, "PARIS", "paris", False, "'paris' not found in output 'PARIS'"),
        (contains_ci, "PARIS", "paris", True, "'paris' found (case-insensitive) in output"),
        (
            functools.partial(contains, case_sensitive=False),
            "Straße",
            "STRASSE",
            True,
            "'STRASSE' found (case-insensitive) in output",
        ),
        (contains, ["a", "b"], "b", True, "'b' found among output items"),
        (contains, ("a", "b"), "c", False, "'c' not found among output items ('a', 'b')"),
        (
            contains_ci,
            ["Alpha"],
            "alpha",
            True,
            "'alpha' found (case-insensitive) among output items",
        ),
        (contains, {"k": 1}, "k", True, "'k' found among output items"),
    ],
)
def test_contains(
    evaluator: Callable[..., Score], output: object, expected: object, passed: bool, reason: str
) -> None:
    score = evaluator(output, expected)
    assert (score.passed, score.reason) == (passed, reason)


@dataclass(frozen=True)
class Solved:
    answer: str
    work: str = ""


def test_an_output_a_builtin_cannot_read_fails_with_a_reason_that_says_so() -> None:
    for score in (contains(42, "4"), contains(Solved("4"), "4")):
        assert not score.passed
        assert "contains needs text or a collection" in score.reason
        assert "contains(field=...)" in score.reason
    score = numeric_close()(Solved("4"), "4")
    assert not score.passed
    assert "numeric_close needs a number or text but the output is a Solved" in score.reason
    assert "--evaluator numeric_close:FIELD" in score.reason
    assert "exact_match(field=...)" in exact_match(Solved("4"), "4").reason


@pytest.mark.parametrize(
    "evaluator",
    [exact_match(field="answer"), contains(field="answer"), numeric_close(field="answer")],
    ids=["exact_match", "contains", "numeric_close"],
)
def test_builtins_can_be_pointed_at_a_field(evaluator: Any) -> None:
    assert evaluator(Solved("4", "2 + 2"), "4").passed
    assert evaluator({"answer": "4"}, "4").passed
    assert evaluator('{"answer": "4"}', {"answer": "4", "note": "x"}).passed  # JSON text too
    assert not evaluator(Solved("5"), "4").passed
    missing = evaluator({"result": "4"}, "4")
    assert not missing.passed and "has no field 'answer' (it has: result)" in missing.reason


def test_a_field_is_needed_when_no_output_is_given() -> None:
    with pytest.raises(ConfigurationError, match="field='NAME'"):
        exact_match()  # type: ignore[call-overload]  # the mistake under test


# -- all_of / any_of --------------------------------------------------------------------


def test_all_of_runs_every_child_even_after_a_failure() -> None:
    calls: list[str] = []
    combined = all_of(
        fixed("first", 0.0, False, calls),
        fixed("second", 1.0, True, calls),
        fixed("third", 0.5, True, calls),
    )
    score = combined("out", "exp")
    assert calls == ["first", "second", "third"]
    assert score.passed is False
    assert score.value == pytest.approx(0.5)
    assert score.reason == "first: first says 0.0; second: second says 1.0; third: third says 0.5"
    assert [(m.name, m.value, m.weight) for m in score.metrics] == [
        ("first", 0.0, 0.0),
        ("second", 1.0, 0.0),
        ("third", 0.5, 0.0),
    ]


def test_all_of_passes_only_when_every_child_passes() -> None:
    assert all_of(fixed("a", 1.0, True), fixed("b", 0.8, True))("o", "e").passed
    assert not all_of(fixed("a", 1.0, True), fixed("b", 0.8, False))("o", "e").passed


def test_any_of_passes_when_one_child_passes_and_takes_the_max() -> None:
    calls: list[str] = []
    score = any_of(fixed("a", 0.2, False, calls), fixed("b", 0.9, True, calls))("o", "e")
    assert calls == ["a", "b"]
    assert (score.passed, score.value) == (True, 0.9)
    assert score.reason == "a: a says 0.2; b: b says 0.9"
    failing = any_of(fixed("a", 0.2, False), fixed("b", 0.4, False))("o", "e")
    assert (failing.passed, failing.value) == (False, 0.4)


@pytest.mark.parametrize("combinator", [all_of, any_of])
def test_children_after_a_raise_still_run_then_the_first_error_is_raised(
    combinator: Callable[..., Any],
) -> None:
    calls: list[str] = []
    first = JudgeError("judge answered garbage")
    second = KeyError("later")
    combined = combinator(
        fixed("before", 1.0, True, calls),
        raising("judge", first, calls),
        fixed("middle", 0.0, False, calls),
        raising("other", second, calls),
    )
    with pytest.raises(JudgeError) as info:
        combined("o", "e")
    assert info.value is first
    assert calls == ["before", "judge", "middle", "other"]
    assert classify_error(info.value) == "judge"
    (note,) = info.value.__notes__
    assert note.startswith(f"raised by judge inside {combinator.__name__}(before, judge")
    assert "before passed, judge raised JudgeError, middle failed, other raised KeyError" in note


def test_a_plain_error_inside_all_of_classifies_as_an_evaluator_error() -> None:
    calls: list[str] = []
    combined = all_of(raising("broken", RuntimeError("boom"), calls), fixed("ok", 1, True))
    with pytest.raises(RuntimeError) as info:
        combined("o", "e")
    assert classify_error(info.value) == "evaluator"


def test_a_child_returning_a_non_score_is_an_invalid_score_error() -> None:
    calls: list[str] = []

    def sloppy(output: object, expected: object) -> Any:
        return True

    combined = all_of(sloppy, fixed("after", 1.0, True, calls))
    with pytest.raises(InvalidScoreError, match="evaluator sloppy returned bool"):
        combined("o", "e")
    assert calls == ["after"]


def test_combinators_name_themselves_after_their_children() -> None:
    combined = all_of(exact_match, any_of(contains, tool_called("search")))
    assert (
        evaluator_name(combined) == "all_of(exact_match, any_of(contains, tool_called('search')))"
    )


def test_nested_metrics_are_prefixed_and_duplicate_children_numbered() -> None:
    inner = all_of(fixed("a", 1.0, True), fixed("b", 0.0, False))
    score = all_of(inner, fixed("a", 1.0, True), fixed("a", 0.5, True))("o", "e")
    assert [m.name for m in score.metrics] == [
        "all_of(a, b)",
        "all_of(a, b).a",
        "all_of(a, b).b",
        "a",
        "a#2",
    ]
    assert score.reason.startswith("all_of(a, b): a: a says 1.0; b: b says 0.0; a: a says 1.0;")
    assert score.reason.endswith("a#2: a says 0.5")


def test_a_child_without_a_reason_reads_as_passed_or_failed() -> None:
    def silent(output: object, expected: object) -> Score:
        return Score(value=0.0, passed=False)

    assert all_of(silent)("o", "e").reason == "silent: failed"


@pytest.mark.parametrize("combinator", [all_of, any_of])
def test_combinators_reject_bad_children(combinator: Callable[..., Any]) -> None:
    with pytest.raises(ConfigurationError, match="needs at least one evaluator"):
        combinator()
    with pytest.raises(ConfigurationError, match="did you forget to call a factory"):
        combinator(exact_match, "search")


# -- mixing plain and session-aware children ---------------------------------------------


def test_plain_children_make_a_plain_combinator() -> None:
    combined = all_of(exact_match, contains)
    assert is_session_aware(combined) is False
    assert combined("4", "4").passed


def test_one_session_aware_child_makes_a_session_aware_combinator() -> None:
    combined = all_of(exact_match, tool_called("search"))
    assert is_session_aware(combined) is True
    score = combined("4", "4", session_with_tools("search"))
    assert score.passed
    assert score.reason == (
        "exact_match: output equals expected '4'; tool_called('search'): search called 1 time; "
        "expected >= 1"
    )
    failing = combined("5", "4", session_with_tools())
    assert failing.reason == (
        "exact_match: expected '4', got '5'; tool_called('search'): search called 0 times; "
        "expected >= 1 (no tools were called)"
    )


def test_adapt_still_works_inside_combinators() -> None:
    combined = any_of(adapt(exact_match), tool_called("search"))
    assert is_session_aware(combined) is True
    assert combined("4", "4", session_with_tools()).passed


def test_custom_session_evaluators_mix_with_plain_ones() -> None:
    def few_tools(output: str, expected: str, session: SessionViewProtocol) -> Score:
        n = len(session[ToolInvoked].all())
        return Score(value=float(n <= 2), passed=n <= 2, reason=f"{n} tool calls; expected <= 2")

    combined = all_of(contains, few_tools)
    score = combined("it is 42", "42", session_with_tools("a", "b", "c"))
    assert score.passed is False
    assert score.reason == "contains: '42' found in output; few_tools: 3 tool calls; expected <= 2"


# -- not_ / threshold -------------------------------------------------------------------


def test_not_inverts_the_verdict_and_the_value() -> None:
    passing = not_(contains)("all good", "error")
    assert (passing.passed, passing.value) == (True, 1.0)
    assert passing.reason == "contains failed as required: 'error' not found in output 'all good'"
    failing = not_(fixed("judge", 0.75, True))("o", "e")
    assert (failing.passed, failing.value) == (False, 0.25)
    assert failing.reason == "judge passed but was required to fail: judge says 0.75"
    assert evaluator_name(not_(contains)) == "not_(contains)"


def test_not_keeps_session_awareness() -> None:
    negated = not_(tool_called("fallback"))
    assert is_session_aware(negated) is True
    assert negated("o", "e", session_with_tools("search")).passed
    assert not negated("o", "e", session_with_tools("fallback")).passed


@pytest.mark.parametrize(
    ("value", "passed", "reason"),
    [
        (0.5, True, "graded says 0.5; value 0.5 >= 0.5 required"),
        (0.75, True, "graded says 0.75; value 0.75 >= 0.5 required"),
        (0.25, False, "graded says 0.25; value 0.25 < 0.5 required"),
    ],
)
def test_threshold_decides_by_value(value: float, passed: bool, reason: str) -> None:
    score = threshold(fixed("graded", value, not passed), 0.5)("o", "e")
    assert (score.passed, score.value, score.reason) == (passed, value, reason)


def test_threshold_keeps_session_awareness_and_names_itself() -> None:
    gated = threshold(tool_called("search"), 1.0)
    assert is_session_aware(gated) is True
    assert evaluator_name(gated) == "threshold(tool_called('search'), 1.0)"
    assert gated("o", "e", session_with_tools("search")).passed


@pytest.mark.parametrize("bad", ["0.5", None, True])
def test_threshold_needs_a_number(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="min_value must be a number"):
        threshold(exact_match, bad)
