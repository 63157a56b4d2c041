"""What the local runner writes for a prompt-based agent, and what its evaluators see, is stable.

Like `test_result_lines` (same masks), for `AgentLoop` targets on `FunctionAdapter`: sync
and async models, structured and plain-text output, tool calls, explicit usage, prices,
an output that does not parse, a model that raises, a secret in the output, plain,
session-aware and trajectory evaluators. The session-aware evaluator writes what it saw
(every slice of the session, as JSON) into its score's reason, so the golden file also
pins the session an evaluator receives. `golden/agent_result_lines.txt` was produced by
the code before the agent path was made faster; regenerate it only for a deliberate
format change: `.venv/bin/python -m tests.evals.test_agent_result_lines`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.evals.test_result_lines import MASKS, golden_lines, stored_lines
from weakincentives import serde
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.adapters.pricing import ModelPrice, PriceTable
from weakincentives.clock import FakeClock
from weakincentives.evals import Sample, Score, Trajectory, exact_match, run_eval
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate, Tool, ToolContext
from weakincentives.prompt import ToolResult as PromptToolResult
from weakincentives.runtime.agent_loop import AgentLoop
from weakincentives.runtime.session import SessionView, TokenUsage

GOLDEN = Path(__file__).parent / "golden" / "agent_result_lines.txt"
START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
FAKE_KEY = "sk-" + "proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"  # not a real key
# A tool call's duration, as the session-aware evaluator's reason (JSON in JSON) holds it.
ESCAPED_DURATION = (re.compile(rb'\\"duration_ms\\": [0-9.e+-]+'), rb'\\"duration_ms\\": <ms>')
PRICES = PriceTable({"priced-model": ModelPrice(input=2.0, output=8.0)})


@dataclass(frozen=True)
class Question:
    text: str


@dataclass(frozen=True)
class Reply:
    text: str


@dataclass(frozen=True)
class Numbers:
    a: int
    b: int


def _add(params: Numbers, ctx: ToolContext) -> PromptToolResult:
    del ctx
    return PromptToolResult(message=str(params.a + params.b), value=params.a + params.b)


ADD = Tool(name="add", description="Add two numbers.", params_type=Numbers, handler=_add)

STRUCTURED = PromptTemplate[Reply](
    ns="golden", key="structured",
    sections=(
        MarkdownSection("Task", "task", "Answer the question with its answer code."),
        MarkdownSection("Question", "question", "$text", Question, role="user"),
        MarkdownSection("", "tail", "Reply with JSON.", role="user"),
    ),
    output_type=Reply,
)  # fmt: skip

PLAIN = PromptTemplate[str](
    ns="golden", key="plain",
    sections=(MarkdownSection("Question", "question", "Q: $text", Question, role="user"),),
    tools=(ADD,),
)  # fmt: skip


class StructuredAgent(AgentLoop[Question, Reply]):
    def create_prompt(self, request: Question) -> Prompt[Reply]:
        return Prompt(STRUCTURED).bind(request)


class PlainAgent(AgentLoop[Question, str]):
    def create_prompt(self, request: Question) -> Prompt[str]:
        return Prompt(PLAIN).bind(request)


def structured_model(request: ModelRequest) -> FunctionReply | str:
    question = (request.messages[1].content or "").split("\n\n")[1]  # the first user message
    if question == "boom":
        raise RuntimeError("model exploded")
    if question == "garbage":
        return "not json at all"
    if question == "secret":
        return FunctionReply(output=Reply(f"key {FAKE_KEY}"))
    if question == "none-usage":
        return FunctionReply(output=Reply("a" + question), usage=TokenUsage(0, 0))
    return FunctionReply(output=Reply("a" + question[1:]))


async def async_structured_model(request: ModelRequest) -> FunctionReply | str:
    return structured_model(request)


def tool_model(request: ModelRequest) -> FunctionReply | str:
    if request.turn == 0:
        return FunctionReply(
            text="adding",
            tool_calls=FunctionReply.calls(("add", {"a": 2, "b": 3}), ("nope", {})).tool_calls,
            usage=TokenUsage(input_tokens=11, output_tokens=5, cached_tokens=2),
        )
    last = request.messages[-2].content  # the add tool's answer
    return FunctionReply(text=f"sum {last}", usage=TokenUsage(input_tokens=20, output_tokens=3))


async def async_tool_model(request: ModelRequest) -> FunctionReply | str:
    return tool_model(request)


def session_seen(output: Any, expected: Any, session: SessionView) -> Score:
    """Passes like `exact_match`; the reason is every slice of `session` as JSON."""
    seen = {
        f"{t.__module__}.{t.__qualname__}": [serde.dump(v) for v in session[t].all()]
        for t in session.slice_types()
    }
    text = json.dumps(seen, sort_keys=True, default=str)
    return Score(value=float(output == expected), passed=output == expected, reason=text)


def by_trajectory(trajectory: Trajectory, sample: Sample[Any, Any]) -> Score:
    """The trajectory as the scorer sees it, in the reason."""
    session = trajectory.session
    assert isinstance(session, SessionView)
    seen = {
        "messages": [serde.dump(m) for m in trajectory.messages],
        "tool_calls": [serde.dump(c) for c in trajectory.tool_calls],
        "output": serde.dump(trajectory.output),
        "usage": serde.dump(trajectory.usage),
        "slices": sorted(t.__qualname__ for t in session.slice_types()),
    }
    passed = trajectory.output == sample.expected
    return Score(value=float(passed), passed=passed, reason=json.dumps(seen, sort_keys=True))


def structured_samples() -> list[Sample[Question, Reply]]:
    return [
        Sample(id="s1", input=Question("q1"), expected=Reply("a1"), metadata={"k": [1, "x"]}),
        Sample(id="s2", input=Question("q2"), expected=Reply("wrong")),
        Sample(id="s3", input=Question("boom"), expected=Reply("a3")),
        Sample(id="s4", input=Question("garbage"), expected=Reply("a4")),
        Sample(id="s5", input=Question("secret"), expected=Reply("a5")),
        Sample(id="s6", input=Question("none-usage"), expected=Reply("anone-usage")),
    ]


def plain_samples() -> list[Sample[Question, str]]:
    return [Sample(id="t1", input=Question("2+3"), expected="sum 5")]


def _structured(model: Any) -> AgentLoop[Any, Any]:
    clock = FakeClock(start=START)
    return StructuredAgent(adapter=FunctionAdapter(model, clock=clock), clock=clock)


def _plain(model: Any, model_name: str = "function-model") -> AgentLoop[Any, Any]:
    clock = FakeClock(start=START)
    adapter = FunctionAdapter(model, clock=clock, model_name=model_name)
    return PlainAgent(adapter=adapter, clock=clock)


SCENARIOS: dict[str, dict[str, Any]] = {
    "sync": {"target": lambda: _structured(structured_model), "evaluator": exact_match},
    "async": {"target": lambda: _structured(async_structured_model), "evaluator": exact_match},
    "async-session": {
        "target": lambda: _structured(async_structured_model), "evaluator": session_seen,
    },
    "sync-session": {"target": lambda: _structured(structured_model), "evaluator": session_seen},
    "async-trajectory": {
        "target": lambda: _structured(async_structured_model), "evaluator": by_trajectory,
    },
    "async-epochs": {
        "target": lambda: _structured(async_structured_model), "evaluator": exact_match,
        "epochs": 2, "experiments": [BASELINE, Experiment(name="b", flags={"x": 1})],
    },
    "async-no-transcript": {
        "target": lambda: _structured(async_structured_model), "evaluator": exact_match,
        "record_transcript": False,
    },
    "async-no-inputs": {
        "target": lambda: _structured(async_structured_model), "evaluator": exact_match,
        "record_inputs": False,
    },
    "tools": {"target": lambda: _plain(tool_model), "evaluator": exact_match, "plain": True},
    "async-tools": {
        "target": lambda: _plain(async_tool_model), "evaluator": exact_match, "plain": True,
    },
    "async-tools-session": {
        "target": lambda: _plain(async_tool_model), "evaluator": session_seen, "plain": True,
    },
    "async-tools-priced": {
        "target": lambda: _plain(async_tool_model, "priced-model"), "evaluator": exact_match,
        "plain": True, "prices": PRICES,
    },
}  # fmt: skip


def masked_lines(name: str, root: Path) -> list[bytes]:
    options = dict(SCENARIOS[name])
    target = options.pop("target")()
    samples: list[Any] = plain_samples() if options.pop("plain", False) else structured_samples()
    run_eval(samples, target, max_concurrent=1, store=root, **options)
    return stored_lines(root, name, (*MASKS, ESCAPED_DURATION))


def golden(name: str) -> list[bytes]:
    return golden_lines(GOLDEN, name)


@pytest.mark.parametrize("name", SCENARIOS)
def test_agent_result_lines_are_what_they_were(tmp_path: Path, name: str) -> None:
    lines = masked_lines(name, tmp_path)
    assert lines
    assert all(b'"request_id":"<uuid4>"' in line for line in lines)
    assert lines == golden(name)


def test_a_secret_in_an_agent_output_is_redacted_in_the_golden_lines() -> None:
    secret_lines = [line for line in golden("async") if b'"sample_id":"s5"' in line]
    assert secret_lines
    assert FAKE_KEY.encode() not in GOLDEN.read_bytes()


def regenerate(root: Path) -> None:
    """Rewrite the golden file from the current code (after a deliberate format change)."""
    lines = [line for name in SCENARIOS for line in masked_lines(name, root / name)]
    GOLDEN.write_bytes(b"\n".join(lines) + b"\n")


if __name__ == "__main__":  # pragma: no cover - `python -m tests.evals.test_agent_result_lines`
    import tempfile

    # Through the module's own name: the output type's name is in the session's events.
    from tests.evals import test_agent_result_lines

    with tempfile.TemporaryDirectory() as tmp:
        test_agent_result_lines.regenerate(Path(tmp))
