"""The calculator agent's eval suite: target, evaluators, experiments and types in one object.

Run it from the command line (after `make demo` has written the dataset):

    wink eval run examples/calc_suite.py:suite --dataset runs/calc-questions.jsonl

The evaluator mixes three kinds of checks:

- output: the value is numerically close to the expected one and the unit matches;
- session: every tool call succeeded, hard arithmetic went through the calculator, and
  the agent needed at most three model requests;
- judge: an LLM judge (here a `FunctionAdapter`, so it runs offline) rates whether the
  explanation says how the number was obtained.

Two experiments: `baseline`, and `careful`, which loads the prompt override tagged
`careful` (it adds "Double-check..." to the instructions; see `calc_agent.py`).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calc_agent import (
    CAREFUL_TAG,
    Answer,
    CalcAgent,
    Expected,
    Question,
    build_agent,
    careful_overrides,
)

from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest, ProviderAdapter
from weakincentives.evals import (
    BASELINE,
    Experiment,
    JudgeOutput,
    Metric,
    Score,
    all_of,
    all_tools_succeeded,
    llm_judge,
    max_model_requests,
    numeric_close,
    tool_called,
)
from weakincentives.runtime import SessionView

CAREFUL = Experiment(
    name="careful",
    overrides_tag=CAREFUL_TAG,
    description='Adds "Double-check every number with a tool" to the instructions.',
)
EXPERIMENTS = (BASELINE, CAREFUL)

_close = numeric_close(rel_tol=1e-3, abs_tol=1e-6)


def value_and_unit(output: Answer, expected: Expected) -> Score:
    """The value is within 0.1% of the expected one and the unit matches."""
    value = _close(output.value, expected.value)
    unit_ok = output.unit.strip().lower() == expected.unit.lower()
    reason = value.reason if unit_ok else f"unit {output.unit!r} is not {expected.unit!r}"
    return Score(
        value=(value.value + float(unit_ok)) / 2,
        passed=value.passed and unit_ok,
        reason=reason,
        metrics=(Metric("value_ok", value.value), Metric("unit_ok", float(unit_ok))),
    )


def required_tool(output: Answer, expected: Expected, session: SessionView) -> Score:
    """When the row names a tool the agent must use (hard arithmetic), it used it."""
    if expected.requires_tool is None:
        return Score(value=1.0, passed=True, reason="no tool required")
    return tool_called(expected.requires_tool)(output, expected, session)


# -- the judge ------------------------------------------------------------------------------

JUDGE_CRITERION = (
    "The explanation tells the reader how the value was obtained (which tool or method), "
    "so that the answer can be checked."
)
_RESPONSE = re.compile(r"<response>\s*(.*?)\s*</response>", re.DOTALL)


def offline_judge(request: ModelRequest) -> FunctionReply:
    """A deterministic stand-in for a judge model: rates the explanation it is shown."""
    text = "\n".join(m.content or "" for m in request.messages if m.role == "user")
    found = _RESPONSE.search(text)
    try:
        explanation = str(json.loads(found.group(1))["explanation"]) if found else ""
    except (ValueError, KeyError, TypeError):
        explanation = found.group(1) if found else ""
    if "tool gave" in explanation:
        verdict = JudgeOutput("Names the tool and the result it gave.", "excellent")
    elif "mentally" in explanation:
        verdict = JudgeOutput("Says how it was computed, though not checkable.", "good")
    elif "best guess" in explanation:
        verdict = JudgeOutput("Admits it does not know how the value was obtained.", "wrong")
    else:
        verdict = JudgeOutput(f"{explanation!r} does not say how the value was found.", "poor")
    return FunctionReply(output=verdict)


def offline_judge_adapter() -> FunctionAdapter:
    """The offline judge as an adapter."""
    return FunctionAdapter(offline_judge, model_name="offline-judge-model")


def make_evaluator(judge_adapter: ProviderAdapter) -> Callable[..., Score]:
    """Every check of the suite in one `all_of` evaluator."""
    judge = llm_judge(judge_adapter, JUDGE_CRITERION, name="explanation_judge")
    return all_of(
        value_and_unit,
        required_tool,
        all_tools_succeeded(),
        max_model_requests(3),
        judge,
    )


# -- the suite ---------------------------------------------------------------------------------


def overrides_root() -> Path:
    """Where the example's prompt overrides are written (a fixed temp directory)."""
    return Path(tempfile.gettempdir()) / "weakincentives-examples" / "prompt-overrides"


def make_agent() -> CalcAgent:
    """The agent on the offline model, with the `careful` override available."""
    return build_agent(overrides=careful_overrides(overrides_root()))


@dataclass(frozen=True)
class Suite:
    """What `wink eval run FILE:suite` reads: a target and an evaluator, plus the types
    the dataset is loaded as and the experiments to run (`--experiment` replaces them)."""

    target: Callable[[], Any]
    evaluator: Callable[..., Score]
    input_type: type[Any] = Question
    expected_type: type[Any] = Expected
    experiments: tuple[Experiment, ...] = EXPERIMENTS
    dataset: Path | None = None


suite = Suite(target=make_agent, evaluator=make_evaluator(offline_judge_adapter()))
"""The offline suite; `wink eval run examples/calc_suite.py:suite --dataset FILE`."""
