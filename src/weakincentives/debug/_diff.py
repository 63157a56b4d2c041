"""Line diffs for the viewer's side-by-side view of one sample under two experiments.

`pair_diff(baseline, treatment)` compares the two results' outputs (text as it is, any
other value as indented JSON) and their tool-call sequences (one line per call: name and
arguments), with `difflib`, into blocks the page draws in two columns.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any

from weakincentives.evals import EvalResult

__all__ = ["line_diff", "output_text", "pair_diff", "tool_lines"]

MAX_LINES = 2000
"""Lines of each side compared at most (the rest is cut, with a marker line)."""


def output_text(value: Any) -> str:
    """An output as the diff compares it: a string as it is, else indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def tool_lines(result: EvalResult) -> list[str]:
    """One line per recorded tool call: `name {arguments}`, failures marked."""
    lines = []
    for call in result.tool_calls:
        params = json.dumps(call.params, sort_keys=True, ensure_ascii=False, default=str)
        mark = "" if call.success else f"  [failed: {call.error or 'no detail'}]"
        lines.append(f"{call.name} {params}{mark}")
    return lines


def line_diff(a: Sequence[str], b: Sequence[str]) -> list[dict[str, Any]]:
    """Blocks `{"op": equal|delete|insert|replace, "a": [...], "b": [...]}` turning a into b."""
    a, b = _cut(a), _cut(b)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return [
        {"op": op, "a": list(a[i1:i2]), "b": list(b[j1:j2])}
        for op, i1, i2, j1, j2 in matcher.get_opcodes()
    ]


def _cut(lines: Sequence[str]) -> list[str]:
    if len(lines) <= MAX_LINES:
        return list(lines)
    return [*lines[:MAX_LINES], f"... {len(lines) - MAX_LINES} more lines not compared"]


def pair_diff(baseline: EvalResult, treatment: EvalResult) -> dict[str, Any]:
    """The diffs of the outputs and of the tool-call sequences, and whether they differ."""
    output = line_diff(
        output_text(baseline.output).splitlines(), output_text(treatment.output).splitlines()
    )
    tools = line_diff(tool_lines(baseline), tool_lines(treatment))
    return {
        "output": output,
        "output_same": all(block["op"] == "equal" for block in output),
        "tool_calls": tools,
        "tool_calls_same": all(block["op"] == "equal" for block in tools),
    }
