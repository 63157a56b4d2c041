"""An example agent: arithmetic and unit conversions with two tools and structured output.

The agent is real (prompt, tools, structured output, sessions); its "model" is a
deterministic `FunctionAdapter` function that behaves plausibly and imperfectly, so the
whole pipeline runs offline. Swap `offline_adapter()` for `OpenAIAdapter(...)` to run the
same agent against a real model (see `real_model.py`).

The offline model reads its system prompt. When the instructions contain "Double-check"
(the `careful` prompt override, `careful_overrides`) it always uses the tools, spells
units right and explains itself, but now and then verifies twice too often. Without it
it does some arithmetic "in its head" (and slips), misspells a unit now and then, is
sometimes terse, and once in a while answers in prose instead of JSON, twice (the sample
ends as an `output_parsing` error that keeps its transcript). Every choice is a hash of
the question, so runs are reproducible.
"""

from __future__ import annotations

import ast
import hashlib
import json
import operator
import re
from dataclasses import dataclass
from pathlib import Path
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
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest, ProviderAdapter
from weakincentives.prompt import LocalPromptOverridesStore, PromptOverridesStore


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
class Expected:
    """What a dataset row expects: the value, its unit, and a tool the agent must use."""

    value: float
    unit: str = ""
    requires_tool: str | None = None


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


def evaluate_expression(expression: str) -> float:
    """Evaluate + - * / arithmetic without `eval`."""
    return _eval(ast.parse(expression, mode="eval"))


def calculate(params: CalculatorParams, context: ToolContext) -> ToolResult:
    """Evaluate + - * / arithmetic safely."""
    del context
    value = evaluate_expression(params.expression)
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
    return ToolResult(message=f"{result:.6g} {params.to_unit}", value=result)


INSTRUCTIONS = (
    "You answer arithmetic and unit conversion questions. Use the calculator for "
    "arithmetic and the convert tool for units. Answer with JSON: an explanation, "
    "then the numeric value and its unit."
)

TEMPLATE = PromptTemplate[Answer](
    ns="examples",
    key="calc-agent",
    name="calc_agent",
    sections=(
        MarkdownSection("Instructions", "instructions", INSTRUCTIONS),
        MarkdownSection("Question", "question", "$text", Question, role="user"),
    ),
    tools=(
        Tool("calculator", "Evaluate an arithmetic expression.", CalculatorParams, calculate),
        Tool("convert", "Convert a value between units.", ConvertParams, convert),
    ),
    output_type=Answer,
)

CAREFUL_TAG = "careful"
"""The overrides tag of the `careful` experiment."""

CAREFUL_INSTRUCTIONS = (
    INSTRUCTIONS + " Double-check every number with a tool before you answer, even easy "
    "sums, and say in the explanation which tool gave the result."
)


def careful_overrides(root: str | Path) -> LocalPromptOverridesStore:
    """An overrides store at `root` whose `careful` tag adds "Double-check..." to the
    instructions (written once; the file is `<root>/examples/calc-agent/careful.json`)."""
    store = LocalPromptOverridesStore(root)
    if not store.resolve(TEMPLATE.ns, TEMPLATE.key, CAREFUL_TAG):
        store.store(
            TEMPLATE.ns, TEMPLATE.key, CAREFUL_TAG,
            section_key="instructions", original=INSTRUCTIONS, body=CAREFUL_INSTRUCTIONS,
        )  # fmt: skip
    return store


class CalcAgent(AgentLoop[Question, Answer]):
    """The production agent: one prompt, two tools, a structured answer."""

    def create_prompt(self, request: Question) -> Prompt[Answer]:
        return Prompt(TEMPLATE).bind(request)


# -- the offline model ----------------------------------------------------------------------

_CONVERSION = re.compile(r"([-\d.]+)\s*([a-z]+) in ([a-z]+)\??", re.IGNORECASE)
_ARITH = re.compile(r"what is ([-\d.+*/() ]+)\?", re.IGNORECASE)
_RETRY = "Your answer could not be used"
"""How the adapter asks again when a final answer does not parse (`output_retries`)."""


def _coin(text: str, salt: str) -> float:
    """A deterministic pseudo-random number in [0, 1) from the question text."""
    digest = hashlib.sha256(f"{salt}:{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def offline_model(request: ModelRequest) -> FunctionReply:
    """A plausible, imperfect model; see the module docstring for how it behaves."""
    last = request.messages[-1]
    if last.role == "user" and (last.content or "").startswith(_RETRY):
        # Asked again for the JSON answer after a prose one: this model says it again,
        # so the sample ends as an `output_parsing` error with its whole transcript.
        return FunctionReply(text=request.messages[-2].content)
    question = request.last_user_text().split("\n")[-1]
    careful = "Double-check" in (request.messages[0].content or "")
    if request.tool_messages():
        return _after_tool(question, request, careful)
    if m := _ARITH.search(question):
        expr = m.group(1).strip()
        if not careful and _coin(question, "head") < 0.35:
            value = evaluate_expression(expr)
            if _coin(question, "slip") < 0.3:
                value += 1  # an arithmetic slip, as models make
            return FunctionReply(output=Answer(f"{expr} is {value:g}, computed mentally.", value))
        return FunctionReply.call("calculator", expression=expr)
    if m := _CONVERSION.search(question):
        value, src, dst = float(m.group(1)), m.group(2).lower(), m.group(3).lower()
        if not careful and _coin(question, "typo") < 0.12:
            src = src + "s"  # a misspelled unit: the tool rejects it
        return FunctionReply.call("convert", value=value, from_unit=src, to_unit=dst)
    return FunctionReply(text="I cannot answer that.")


def _after_tool(question: str, request: ModelRequest, careful: bool) -> FunctionReply:
    tool_text = request.tool_messages()[-1].content or ""
    if "failed" in tool_text:
        if request.turn < 2 and (m := _CONVERSION.search(question)):
            return FunctionReply.call(
                "convert", value=float(m.group(1)), from_unit=m.group(2).lower(),
                to_unit=m.group(3).lower(),
            )  # fmt: skip
        return FunctionReply(output=Answer("The tool failed; this is a best guess.", 0.0))
    previous = request.messages[-2]  # the assistant turn that called the tool
    if careful and request.turn < 3 and _coin(question, "verify") < 0.06 and previous.tool_calls:
        call = previous.tool_calls[0]  # over-cautious: runs the same call again
        return FunctionReply.call(call.name, **json.loads(call.arguments))
    number, _, unit = tool_text.partition(" ")
    tool = previous.tool_calls[0].name if previous.tool_calls else "a tool"
    if not careful and _coin(question, "prose") < 0.04:
        return FunctionReply(text=f"The {tool} tool says {tool_text}, so that is the answer.")
    explanation = f"The {tool} tool gave {tool_text}."
    if _coin(question, "terse") < (0.08 if careful else 0.2):
        explanation = "Done."
    return FunctionReply(output=Answer(explanation, float(number), unit))


def offline_adapter() -> FunctionAdapter:
    """The offline model as an adapter."""
    return FunctionAdapter(offline_model, model_name="offline-calc-model")


def build_agent(
    adapter: ProviderAdapter | None = None, *, overrides: PromptOverridesStore | None = None
) -> CalcAgent:
    """The agent on `adapter` (default: the offline model) with prompt overrides."""
    return CalcAgent(adapter=adapter or offline_adapter(), overrides_store=overrides)


# -- the dataset ------------------------------------------------------------------------------


def make_questions(n: int) -> list[dict[str, Any]]:
    """A deterministic dataset of `n` questions, as JSON-ready rows with metadata.

    Half are arithmetic (every other one "hard": a product and a sum, which must be done
    with the calculator), half unit conversions.
    """
    rows: list[dict[str, Any]] = []
    pairs = [("km", "mi"), ("mi", "km"), ("kg", "lb"), ("lb", "kg"), ("c", "f"), ("gal", "l")]
    for i in range(n):
        h = int(hashlib.sha256(str(i).encode()).hexdigest(), 16)
        if i % 2 == 0:
            a, b, c = h % 97 + 2, (h >> 8) % 89 + 2, (h >> 16) % 50
            hard = i % 4 == 0
            expr = f"{a} * {b} + {c}" if hard else f"{a} + {b}"
            rows.append({
                "id": f"q{i:04d}", "input": {"text": f"What is {expr}?"},
                "expected": {"value": evaluate_expression(expr), "unit": "",
                             "requires_tool": "calculator" if hard else None},
                "metadata": {"category": "arithmetic", "difficulty": "hard" if hard else "easy"},
            })  # fmt: skip
        else:
            src, dst = pairs[h % len(pairs)]
            value = float(h % 500 + 1)
            rows.append({
                "id": f"q{i:04d}", "input": {"text": f"What is {value:g} {src} in {dst}?"},
                "expected": {"value": round(convert_value(value, src, dst), 4), "unit": dst},
                "metadata": {"category": "conversion", "difficulty": "easy", "units": src},
            })  # fmt: skip
    return rows


def write_dataset(path: str | Path, n: int) -> Path:
    """Write `make_questions(n)` as JSONL; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as fh:
        for row in make_questions(n):
            fh.write(json.dumps(row) + "\n")
    return target
