"""`--judge-model`: every llm_judge of an evaluator, also inside all_of / any_of, re-pointed."""

from __future__ import annotations

import json

import pytest

from weakincentives.adapters import FunctionAdapter, ModelRequest
from weakincentives.errors import ConfigurationError
from weakincentives.evals import (
    all_of,
    any_of,
    evaluator_name,
    exact_match,
    judge_adapter,
    llm_judge,
    with_judge_adapter,
)


def judge_model(rating: str, calls: list[str]) -> FunctionAdapter:
    def model(request: ModelRequest) -> str:
        calls.append(rating)
        return json.dumps({"justification": f"rated {rating}", "rating": rating})

    return FunctionAdapter(model, model_name=f"judge-{rating}")


def test_a_judge_alone_or_inside_combinators_asks_the_new_model() -> None:
    calls: list[str] = []
    old, new = judge_model("poor", calls), judge_model("excellent", calls)
    judge = llm_judge(old, "Says hi", name="friendly")
    for evaluator in (judge, all_of(exact_match, judge), any_of(all_of(judge), exact_match)):
        assert judge_adapter(evaluator) is old
        changed = with_judge_adapter(evaluator, new)
        assert judge_adapter(changed) is new
        assert evaluator_name(changed) == evaluator_name(evaluator)
        before, after = evaluator("hi", "hi"), changed("hi", "hi")
        assert "rated poor" in before.reason and "rated excellent" in after.reason
    assert calls == ["poor", "excellent"] * 3


def test_the_change_may_be_a_function_of_the_old_adapter() -> None:
    calls: list[str] = []
    judge = llm_judge(judge_model("good", calls), "Says hi")
    seen: list[str] = []

    def rename(adapter: FunctionAdapter) -> FunctionAdapter:
        seen.append(adapter.model_name)
        return adapter.with_model("judge-large")

    changed = with_judge_adapter(all_of(exact_match, judge), rename)  # type: ignore[arg-type]
    assert seen == ["judge-good"]
    adapter = judge_adapter(changed)
    assert isinstance(adapter, FunctionAdapter) and adapter.model_name == "judge-large"


def test_an_evaluator_without_a_judge_is_refused() -> None:
    assert judge_adapter(all_of(exact_match)) is None
    with pytest.raises(ConfigurationError, match="holds no llm_judge"):
        with_judge_adapter(exact_match, judge_model("good", []))
