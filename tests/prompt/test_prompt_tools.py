from __future__ import annotations

import pytest

from tests.helpers import CalcParams, calculate, calculator_tool
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.prompt import Tool, ToolContext, ToolResult
from weakincentives.runtime.session import Session


def _context(session: Session | None = None) -> ToolContext:
    return ToolContext(session=session or Session(), prompt_name="tests/p", call_id="call-1")


def test_invoke_validates_arguments_and_runs_the_handler() -> None:
    event = calculator_tool().invoke('{"a": 6, "op": "*", "b": "7"}', _context())
    assert event.success
    assert event.result == ToolResult(message="42", value=42.0)
    assert event.params == {"a": 6, "op": "*", "b": "7"}
    assert event.call_id == "call-1"
    assert event.prompt_name == "tests/p"
    assert event.error is None
    assert event.duration_ms >= 0


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ('{"a": 1, "op": "%", "b": 2}', "op"),
        ('{"a": "one", "op": "+", "b": 2}', "a"),
        ('{"op": "+", "b": 2}', "a"),
        ("not json", "<root>"),
        ("[1, 2]", "<root>"),
    ],
    ids=["bad-literal", "bad-number", "missing", "not-json", "not-object"],
)
def test_invalid_arguments_become_a_failed_result_naming_the_field(
    arguments: str, field: str
) -> None:
    event = calculator_tool().invoke(arguments, _context())
    assert not event.success
    assert not event.result.success
    assert event.error is not None
    assert event.error.startswith("ToolValidationError:")
    assert f"{field}:" in event.result.message
    assert "Fix and call again" in event.result.message


def test_undecodable_arguments_are_recorded_as_empty_params() -> None:
    event = calculator_tool().invoke("{oops", _context())
    assert event.params == {}


def test_a_raising_handler_becomes_a_failed_result() -> None:
    event = calculator_tool().invoke('{"a": 1, "op": "/", "b": 0}', _context())
    assert not event.success
    assert event.error is not None
    assert event.error.startswith("ZeroDivisionError:")
    assert "Tool 'calculate' failed: ZeroDivisionError" in event.result.message


def test_a_handler_may_report_failure_itself() -> None:
    tool = Tool(
        name="refuse",
        description="Always refuses.",
        params_type=CalcParams,
        handler=lambda p, ctx: ToolResult(message="no", success=False),
    )
    event = tool.invoke('{"a": 1, "op": "+", "b": 1}', _context())
    assert not event.success
    assert event.error is None


def test_spec_describes_the_params_schema() -> None:
    spec = calculator_tool("calc").spec()
    assert spec.name == "calc"
    assert spec.parameters["type"] == "object"
    assert spec.parameters["required"] == ["a", "op", "b"]
    assert spec.parameters["properties"]["op"]["enum"] == ["+", "-", "*", "/"]


@pytest.mark.parametrize("name", ["", "has space", "semi;colon", "dot.name"])
def test_tool_names_are_validated(name: str) -> None:
    with pytest.raises(ValueError, match="tool name"):
        Tool(name=name, description="d", params_type=CalcParams, handler=calculate)


def test_context_experiment_reads_the_session() -> None:
    session = Session()
    assert _context(session).experiment is None
    session.dispatch(BASELINE)
    exp = Experiment(name="treatment").with_flag("fast")
    session.dispatch(exp)
    assert _context(session).experiment == exp
