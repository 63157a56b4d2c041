"""Shared test builders: a calculator tool, a scripted function model, a calculator model.

Import them as `from tests.helpers import ...` (pytest runs from the repository root).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from weakincentives.adapters import FunctionReply, ModelRequest
from weakincentives.prompt import Tool, ToolContext, ToolResult

__all__ = [
    "CalcParams",
    "ScriptStep",
    "ScriptedModel",
    "calculate",
    "calculator_model",
    "calculator_tool",
]

Op = Literal["+", "-", "*", "/"]


@dataclass(frozen=True, slots=True)
class CalcParams:
    """Arguments of the calculator tool: `a op b`."""

    a: float
    """Left operand."""
    op: Op
    """One of `+ - * /`."""
    b: float
    """Right operand."""


def calculate(params: CalcParams, context: ToolContext) -> ToolResult:
    """Compute `a op b`; dividing by zero raises (a handler that raises)."""
    del context
    if params.op == "+":
        value = params.a + params.b
    elif params.op == "-":
        value = params.a - params.b
    elif params.op == "*":
        value = params.a * params.b
    else:
        value = params.a / params.b  # ZeroDivisionError is the point for b == 0
    return ToolResult(message=f"{value:g}", value=value)


def calculator_tool(name: str = "calculate") -> Tool[CalcParams]:
    """A `Tool` that evaluates one arithmetic operation."""
    return Tool(
        name=name,
        description="Compute `a op b` for op in + - * /.",
        params_type=CalcParams,
        handler=calculate,
    )


ScriptStep = FunctionReply | str | Callable[[ModelRequest], "FunctionReply | str"]
"""One scripted turn: a reply, a final text, or a function of the request."""


class ScriptedModel:
    """A `FunctionModel` that plays `steps` in order, one per turn, and records requests.

    Running past the end of the script fails loudly, so a test notices an extra turn.
    """

    def __init__(self, *steps: ScriptStep) -> None:
        self.steps: list[ScriptStep] = list(steps)
        """Turns to play, oldest first."""
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""

    def __call__(self, request: ModelRequest) -> FunctionReply | str:
        self.requests.append(request)
        index = len(self.requests) - 1
        if index >= len(self.steps):
            raise AssertionError(
                f"ScriptedModel: turn {index} requested but the script has {len(self.steps)}"
            )
        step = self.steps[index]
        if isinstance(step, FunctionReply | str):
            return step
        return step(request)


_EXPRESSION = re.compile(r"(-?\d+(?:\.\d+)?)\s*([-+*/])\s*(-?\d+(?:\.\d+)?)")


def calculator_model(request: ModelRequest) -> FunctionReply | str:
    """A deterministic `FunctionModel` for prompts that offer a calculator-like tool.

    First turn: finds `a op b` in the newest user message and calls the first tool offered
    with `{"a", "op", "b"}`. Next turn: answers with the tool's message; when the prompt
    has structured output, the answer is a JSON object whose number fields hold the result
    and whose string fields hold an explanation.
    """
    answers = request.tool_messages()
    if not answers:
        match = _EXPRESSION.search(request.last_user_text())
        if match is None or not request.tools:
            return "I can only do arithmetic with a calculator tool."
        a, op, b = match.groups()
        return FunctionReply.call(request.tools[0].name, a=float(a), op=op, b=float(b))
    result = answers[-1].content or ""
    if request.output_schema is None:
        return result
    return json.dumps(_fill_schema(request.output_schema, result))


def _fill_schema(schema: Any, result: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type")
        if kind in ("number", "integer"):
            out[name] = float(result) if kind == "number" else round(float(result))
        elif kind == "string":
            out[name] = f"The calculator returned {result}."
    return out
