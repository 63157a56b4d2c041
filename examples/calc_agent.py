"""An example agent: arithmetic and unit conversions with two tools and structured output.

The agent is real (prompt, tools, structured output, sessions); its "model" is a
deterministic `FunctionAdapter` function that behaves plausibly and imperfectly, so the
whole pipeline runs offline. Swap `offline_adapter()` for `OpenAIAdapter(...)` to run the
same agent against a real model.
"""

from __future__ import annotations

import ast
import hashlib
import json
import operator
import re
from dataclasses import dataclass
from typing import Any

from weakincentives import (
    AgentLoop,
    MarkdownSection,
    Prompt,
    PromptTemplate,
    Tool,
    ToolContext,
    ToolResult,
)
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest


@dataclass(frozen=True)
class Question:
    """What the agent is asked."""

    text: str


@dataclass(frozen=True)
class Answer:
    """The agent's structured answer."""

    explanation: str
    value: float
    unit: str = ""


@dataclass(frozen=True)
class CalculatorParams:
    expression: str


@dataclass(frozen=True)
class ConvertParams:
    value: float
    from_unit: str
    to_unit: str


_OPS: dict[type[ast.AST], Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_eval(node.left), _eval(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_eval(node.operand)))
    raise ValueError(f"unsupported expression element: {ast.dump(node)[:40]}")


def calculate(params: CalculatorParams, context: ToolContext) -> ToolResult:
    """Evaluate + - * / arithmetic safely."""
    del context
    value = _eval(ast.parse(params.expression, mode="eval"))
    return ToolResult(message=f"{value:g}", value=value)


# Factors to a base unit per dimension; temperatures are handled separately.
_UNITS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "kg": ("mass", 1.0),
    "lb": ("mass", 0.45359237),
    "g": ("mass", 0.001),
    "l": ("volume", 1.0),
    "gal": ("volume", 3.785411784),
}


def convert_value(value: float, from_unit: str, to_unit: str) -> float:
    """Convert between the units the tool knows."""
    if (from_unit, to_unit) == ("c", "f"):
        return value * 9 / 5 + 32
    if (from_unit, to_unit) == ("f", "c"):
        return (value - 32) * 5 / 9
    if from_unit not in _UNITS or to_unit not in _UNITS:
        raise ValueError(f"unknown unit in {from_unit!r} -> {to_unit!r}; known: {sorted(_UNITS)}")
    (dim_a, fa), (dim_b, fb) = _UNITS[from_unit], _UNITS[to_unit]
    if dim_a != dim_b:
        raise ValueError(f"cannot convert {dim_a} to {dim_b}")
    return value * fa / fb


def convert(params: ConvertParams, context: ToolContext) -> ToolResult:
    """Unit conversion tool."""
    del context
    result = convert_value(params.value, params.from_unit, params.to_unit)
    return ToolResult(message=f"{result:.4g} {params.to_unit}", value=result)


TEMPLATE = PromptTemplate[Answer](
    ns="examples",
    key="calc-agent",
    name="calc_agent",
    sections=(
        MarkdownSection(
            "Instructions",
            "instructions",
            "You answer arithmetic and unit conversion questions. Use the calculator for "
            "arithmetic and the convert tool for units. Answer with JSON: an explanation, "
            "then the numeric value and its unit.",
        ),
        MarkdownSection("Question", "question", "$text", Question, role="user"),
    ),
    tools=(
        Tool("calculator", "Evaluate an arithmetic expression.", CalculatorParams, calculate),
        Tool("convert", "Convert a value between units.", ConvertParams, convert),
    ),
    output_type=Answer,
)


class CalcAgent(AgentLoop[Question, Answer]):
    """The production agent: one prompt, two tools, a structured answer."""

    def create_prompt(self, request: Question) -> Prompt[Answer]:
        return Prompt(TEMPLATE).bind(request)


_CONVERSION = re.compile(r"([-\d.]+)\s*([a-z]+) in ([a-z]+)\??", re.IGNORECASE)
_ARITH = re.compile(r"what is ([-\d.+*/() ]+)\?", re.IGNORECASE)


def _coin(text: str, salt: str) -> float:
    """A deterministic pseudo-random number in [0, 1) from the question text."""
    digest = hashlib.sha256(f"{salt}:{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def offline_model(request: ModelRequest) -> FunctionReply:
    """A plausible, imperfect model. Flag `careful` (seen in the prompt) makes it use tools.

    Baseline: does easy arithmetic "in its head" (sometimes wrongly) and occasionally
    asks the converter for a unit spelled wrong, then recovers or gives up.
    """
    question = request.last_user_text().split("\n")[-1]
    careful = "Double-check" in (request.messages[0].content or "")
    tool_msgs = request.tool_messages()
    if tool_msgs:
        return _final_from_tool(question, tool_msgs[-1].content or "", request)
    if m := _ARITH.search(question):
        expr = m.group(1).strip()
        if not careful and _coin(question, "head") < 0.35:
            value = _eval(ast.parse(expr, mode="eval"))
            if _coin(question, "slip") < 0.3:
                value += 1  # an arithmetic slip, as models make
            return FunctionReply(output=Answer(f"Computed {expr} mentally.", value, ""))
        return FunctionReply.call("calculator", expression=expr)
    if m := _CONVERSION.search(question):
        value, src, dst = float(m.group(1)), m.group(2).lower(), m.group(3).lower()
        if not careful and _coin(question, "typo") < 0.12:
            src = src + "s"  # a misspelled unit: the tool rejects it
        return FunctionReply.call("convert", value=value, from_unit=src, to_unit=dst)
    return FunctionReply(text="I cannot answer that.")


def _final_from_tool(question: str, tool_text: str, request: ModelRequest) -> FunctionReply:
    if "failed" in tool_text or "Invalid" in tool_text:
        if request.turn < 2 and (m := _CONVERSION.search(question)):
            return FunctionReply.call(
                "convert", value=float(m.group(1)), from_unit=m.group(2).lower(),
                to_unit=m.group(3).lower(),
            )  # fmt: skip
        return FunctionReply(output=Answer("The tool failed; best guess.", 0.0, ""))
    number, _, unit = tool_text.partition(" ")
    explanation = f"Used a tool: {tool_text}."
    if _coin(question, "terse") < 0.2:
        explanation = "Done."
    return FunctionReply(output=Answer(explanation, float(number), unit))


def offline_adapter() -> FunctionAdapter:
    """The offline model as an adapter."""
    return FunctionAdapter(offline_model, model_name="offline-calc-model")


def make_questions(n: int) -> list[dict[str, Any]]:
    """A deterministic dataset of `n` questions, as JSON-ready rows with metadata."""
    rows: list[dict[str, Any]] = []
    pairs = [("km", "mi"), ("mi", "km"), ("kg", "lb"), ("lb", "kg"), ("c", "f"), ("gal", "l")]
    for i in range(n):
        h = int(hashlib.sha256(str(i).encode()).hexdigest(), 16)
        if i % 2 == 0:
            a, b, c = h % 97 + 2, (h >> 8) % 89 + 2, (h >> 16) % 50
            hard = i % 4 == 0
            expr = f"{a} * {b} + {c}" if hard else f"{a} + {b}"
            expected = _eval(ast.parse(expr, mode="eval"))
            rows.append({
                "id": f"q{i:04d}", "input": {"text": f"What is {expr}?"},
                "expected": {"value": expected, "unit": ""},
                "metadata": {"category": "arithmetic", "difficulty": "hard" if hard else "easy"},
            })  # fmt: skip
        else:
            src, dst = pairs[h % len(pairs)]
            value = float(h % 500 + 1)
            rows.append({
                "id": f"q{i:04d}", "input": {"text": f"What is {value:g} {src} in {dst}?"},
                "expected": {"value": round(convert_value(value, src, dst), 4), "unit": dst},
                "metadata": {"category": "conversion", "difficulty": "easy"},
            })  # fmt: skip
    return rows


def write_dataset(path: str, n: int) -> None:
    """Write `make_questions(n)` as JSONL."""
    with open(path, "w", encoding="utf-8") as fh:  # noqa: PTH123 - example code, plain open
        for row in make_questions(n):
            fh.write(json.dumps(row) + "\n")
