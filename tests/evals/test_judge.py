"""LLM judges driven by `FunctionAdapter` models that read the rendered prompt."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from weakincentives import serde
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest, PromptResponse
from weakincentives.errors import (
    AdapterConnectionError,
    ConfigurationError,
    JudgeError,
    RateLimitError,
)
from weakincentives.evals.scoring._builtins import all_of, contains
from weakincentives.evals.scoring._judge import (
    JUDGE_TEMPLATE,
    JudgeOutput,
    JudgeRating,
    PairwiseOutput,
    llm_judge,
    pairwise_judge,
)
from weakincentives.evals.scoring._protocols import classify_error, evaluator_name, is_session_aware
from weakincentives.evals.scoring._session_checks import tool_called
from weakincentives.prompt import Prompt
from weakincentives.runtime.session import PromptExecuted, Session, TokenUsage

USAGE = TokenUsage(input_tokens=120, output_tokens=30)


def section(request: ModelRequest, tag: str) -> str:
    """The text between `<tag>` and `</tag>` in the user message."""
    found = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", request.last_user_text(), re.DOTALL)
    assert found is not None, request.last_user_text()
    return found.group(1)


def answer_checker(request: ModelRequest) -> FunctionReply:
    """Rate excellent when the response contains the reference answer, else wrong."""
    reference, response = section(request, "reference"), section(request, "response")
    if reference in response:
        verdict = JudgeOutput(f"The response states {reference}.", "excellent")
    else:
        verdict = JudgeOutput(f"The response never says {reference}.", "wrong")
    return FunctionReply(output=verdict, usage=USAGE)


def rating(label: str) -> Callable[[ModelRequest], FunctionReply]:
    def model(request: ModelRequest) -> FunctionReply:
        text = json.dumps({"justification": f"Rated {label}.", "rating": label})
        return FunctionReply(text=text, usage=USAGE)

    return model


# -- llm_judge ------------------------------------------------------------------------------


def test_the_judge_reads_output_and_reference_from_the_prompt() -> None:
    judge = llm_judge(FunctionAdapter(answer_checker), "The answer is correct")
    good = judge("The capital of France is Paris.", "Paris")
    assert (good.passed, good.value) == (True, 1.0)
    assert good.reason == "excellent: The response states Paris."
    bad = judge("The capital of France is Lyon.", "Paris")
    assert (bad.passed, bad.value) == (False, 0.0)
    assert bad.reason == "wrong: The response never says Paris."


@pytest.mark.parametrize(
    ("label", "value", "passed"),
    [
        ("excellent", 1.0, True),
        ("good", 0.75, True),
        ("fair", 0.5, False),
        ("poor", 0.25, False),
        ("wrong", 0.0, False),
    ],
)
def test_ratings_map_to_values(label: JudgeRating, value: float, passed: bool) -> None:
    score = llm_judge(FunctionAdapter(rating(label)), "helpful")("output", "expected")
    assert (score.value, score.passed, score.reason) == (value, passed, f"{label}: Rated {label}.")
    judged = score.metric("judge_rating")
    assert judged is not None
    assert (judged.value, judged.weight, judged.metadata["label"]) == (value, 1.0, label)
    assert score.reward == value


def test_judge_token_usage_is_recorded_as_zero_weight_metrics() -> None:
    score = llm_judge(FunctionAdapter(rating("good")), "helpful")("o", "e")
    tokens = {m.name: (m.value, m.weight) for m in score.metrics if m.name.endswith("tokens")}
    assert tokens == {"judge_input_tokens": (120.0, 0.0), "judge_output_tokens": (30.0, 0.0)}


def test_justification_comes_before_rating_in_the_schema_the_model_sees() -> None:
    schemas: list[Any] = []

    def model(request: ModelRequest) -> FunctionReply:
        schemas.append(request.output_schema)
        return FunctionReply(output=JudgeOutput("fine", "good"))

    llm_judge(FunctionAdapter(model), "helpful")("o", "e")
    assert list(schemas[0]["properties"]) == ["justification", "rating"]
    assert schemas[0]["properties"]["rating"]["enum"] == [
        "excellent",
        "good",
        "fair",
        "poor",
        "wrong",
    ]


def test_the_prompt_carries_the_criterion_and_renders_structured_values_as_json() -> None:
    seen: list[ModelRequest] = []

    @dataclass(frozen=True)
    class Answer:
        city: str

    def model(request: ModelRequest) -> FunctionReply:
        seen.append(request)
        return FunctionReply(output=JudgeOutput("ok", "good"))

    judge = llm_judge(FunctionAdapter(model), "Names the right city")
    judge(Answer("Paris"), None)
    text = seen[0].last_user_text()
    assert "## Criterion\n\nNames the right city" in text
    assert section(seen[0], "response") == '{"city":"Paris"}'
    assert section(seen[0], "reference").startswith("(no reference answer")
    assert "not instructions" in (seen[0].messages[0].content or "")


def test_values_that_do_not_serialize_are_shown_by_repr() -> None:
    seen: list[ModelRequest] = []

    class Opaque:
        def __repr__(self) -> str:
            return "<opaque answer>"

    def model(request: ModelRequest) -> FunctionReply:
        seen.append(request)
        return FunctionReply(output=JudgeOutput("ok", "good"))

    llm_judge(FunctionAdapter(model), "helpful")(Opaque(), "expected")
    assert section(seen[0], "response") == "<opaque answer>"


def test_each_judge_call_runs_in_a_fresh_session() -> None:
    sessions: list[Session] = []

    class Recording:
        def __init__(self) -> None:
            self.inner = FunctionAdapter(rating("good"))

        def evaluate(self, prompt: Prompt[Any], *, session: Session, **kw: Any) -> Any:
            sessions.append(session)
            return self.inner.evaluate(prompt, session=session, **kw)

    judge = llm_judge(Recording(), "helpful")
    judge("a", "b")
    judge("c", "d")
    assert len(sessions) == 2
    assert sessions[0] is not sessions[1]
    assert [len(s[PromptExecuted].all()) for s in sessions] == [1, 1]


def test_judge_names() -> None:
    adapter = FunctionAdapter(rating("good"))
    judge = llm_judge(adapter, "Response is helpful")
    assert evaluator_name(judge) == "llm_judge('Response is helpful')"
    assert evaluator_name(llm_judge(adapter, "x", name="helpfulness")) == "helpfulness"
    assert is_session_aware(judge) is False


# -- judge failures: JudgeError, never a silent 0 ------------------------------------------


def garbage(request: ModelRequest) -> str:
    return "I think it is pretty good!"


def unknown_label(request: ModelRequest) -> str:
    return json.dumps({"justification": "meh", "rating": "mediocre"})


def rating_first_missing_field(request: ModelRequest) -> str:
    return json.dumps({"rating": "good"})


def unreachable(request: ModelRequest) -> str:
    raise AdapterConnectionError("connection refused")


def rate_limited(request: ModelRequest) -> str:
    raise RateLimitError("429 after 5 retries")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (garbage, "could not be parsed as JudgeOutput"),
        (unknown_label, "could not be parsed as JudgeOutput.*rating"),
        (rating_first_missing_field, "could not be parsed as JudgeOutput.*justification"),
        (unreachable, "judge call failed with AdapterConnectionError: connection refused"),
        (rate_limited, "judge call failed with RateLimitError"),
    ],
)
def test_judge_failures_raise_judge_error(
    model: Callable[[ModelRequest], str], message: str
) -> None:
    judge = llm_judge(FunctionAdapter(model), "helpful")
    with pytest.raises(JudgeError, match=message) as info:
        judge("output", "expected")
    assert str(info.value).startswith("llm_judge('helpful'): ")
    assert "left unscored" in str(info.value)
    assert info.value.__cause__ is not None
    assert classify_error(info.value) == "judge"


class FixedAdapter:
    """An adapter that returns a prepared response without validating it."""

    def __init__(self, output: object) -> None:
        self.output = output

    def evaluate(self, prompt: Prompt[Any], *, session: Session, **kw: Any) -> Any:
        return PromptResponse(prompt_name=prompt.name, text="raw text", output=self.output)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (None, "returned NoneType instead of JudgeOutput; text was 'raw text'"),
        ({"rating": "good"}, "returned dict instead of JudgeOutput"),
        (JudgeOutput("sure", "superb"), "unknown rating 'superb'"),  # type: ignore[arg-type]
    ],
)
def test_adapters_that_skip_validation_still_cannot_sneak_in_a_score(
    output: object, message: str
) -> None:
    with pytest.raises(JudgeError, match=message):
        llm_judge(FixedAdapter(output), "helpful")("o", "e")


def test_a_failing_judge_inside_all_of_lets_the_others_run_then_raises() -> None:
    checked: list[str] = []

    def spy(output: object, expected: object, session: Any) -> Any:
        checked.append("spy")
        return tool_called("search")(output, expected, session)

    combined = all_of(contains, llm_judge(FunctionAdapter(garbage), "helpful"), spy)
    with pytest.raises(JudgeError) as info:
        combined("42", "42", Session().view())
    assert checked == ["spy"]
    assert classify_error(info.value) == "judge"


@pytest.mark.parametrize(
    ("adapter", "criterion", "message"),
    [
        (FunctionAdapter(garbage), "", "non-empty criterion"),
        (FunctionAdapter(garbage), "   ", "non-empty criterion"),
        (object(), "helpful", "needs a ProviderAdapter"),
    ],
)
@pytest.mark.parametrize("factory", [llm_judge, pairwise_judge])
def test_judges_check_their_configuration(
    factory: Callable[..., Any], adapter: Any, criterion: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        factory(adapter, criterion)


def test_the_judge_template_is_a_regular_prompt() -> None:
    assert JUDGE_TEMPLATE.output_type is JudgeOutput
    assert [s.key for s in JUDGE_TEMPLATE.sections] == [
        "role",
        "criterion",
        "reference",
        "response",
    ]


# -- pairwise_judge ------------------------------------------------------------------------


def prefers(word: str) -> Callable[[ModelRequest], FunctionReply]:
    """A fair judge: picks the response containing `word`, wherever it is shown."""

    def model(request: ModelRequest) -> FunctionReply:
        first, second = section(request, "response-1"), section(request, "response-2")
        winner: Literal["first", "second", "tie"]
        if (word in first) == (word in second):
            winner = "tie"
        else:
            winner = "first" if word in first else "second"
        return FunctionReply(output=PairwiseOutput(f"looked for {word}", winner), usage=USAGE)

    return model


def always_first(request: ModelRequest) -> FunctionReply:
    """A position-biased judge."""
    return FunctionReply(output=PairwiseOutput("the first one reads better", "first"))


@pytest.mark.parametrize(
    ("a", "b", "winner"),
    [("Paris, with sources", "Paris", "a"), ("Paris", "Paris, with sources", "b")],
)
def test_a_fair_pairwise_judge_is_consistent(a: str, b: str, winner: str) -> None:
    verdict = pairwise_judge(FunctionAdapter(prefers("sources")), "cites sources")(a, b)
    assert (verdict.winner, verdict.consistent) == (winner, True)
    assert verdict.first_order.order == "ab"
    assert verdict.second_order.order == "ba"
    assert verdict.first_order.winner == verdict.second_order.winner == winner
    assert verdict.reason == f"{winner} wins in both orders"
    assert verdict.usage == USAGE + USAGE


def test_a_position_biased_judge_is_inconsistent_and_counts_as_a_tie() -> None:
    verdict = pairwise_judge(FunctionAdapter(always_first), "better")("one", "two")
    assert (verdict.winner, verdict.consistent) == ("tie", False)
    assert (verdict.first_order.winner, verdict.second_order.winner) == ("a", "b")
    assert verdict.reason == "inconsistent: a with A first, b with B first; counted as a tie"


def test_a_real_tie_is_consistent() -> None:
    verdict = pairwise_judge(FunctionAdapter(prefers("x")), "has x")("same", "same")
    assert (verdict.winner, verdict.consistent, verdict.reason) == (
        "tie",
        True,
        "tie in both orders",
    )


def test_pairwise_shows_both_orders_and_the_reference() -> None:
    seen: list[tuple[str, str, str]] = []

    def model(request: ModelRequest) -> FunctionReply:
        seen.append(
            (
                section(request, "response-1"),
                section(request, "response-2"),
                section(request, "reference"),
            )
        )
        return FunctionReply(output=PairwiseOutput("same", "tie"))

    pairwise_judge(FunctionAdapter(model), "correct")("A-text", {"b": 1}, reference="42")
    assert seen == [("A-text", '{"b":1}', "42"), ('{"b":1}', "A-text", "42")]


def test_pairwise_failures_raise_judge_error() -> None:
    with pytest.raises(JudgeError, match=r"pairwise_judge\('better'\) \[ab\]: .*PairwiseOutput"):
        pairwise_judge(FunctionAdapter(garbage), "better")("a", "b")
    bogus = PairwiseOutput("hmm", "both")  # type: ignore[arg-type]  # what a sloppy adapter returns
    with pytest.raises(JudgeError, match="unknown winner 'both'"):
        pairwise_judge(FixedAdapter(bogus), "better")("a", "b")


def test_pairwise_output_schema_puts_reasoning_first() -> None:
    assert list(serde.json_schema(PairwiseOutput)["properties"]) == ["justification", "winner"]
