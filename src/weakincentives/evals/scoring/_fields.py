"""Point an output evaluator at one field of a structured output.

`numeric_close(field="answer")`, `exact_match(field="answer")`, `contains(field="answer")`
and `--evaluator numeric_close:answer` all go through `on_field`: the evaluator gets
`output.answer` (or `output["answer"]`, or the field of an output that is a JSON object in
text), and `expected.answer` when the expected value has that field too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from typing import Any

from .._records import Score
from ._protocols import Evaluator, call_evaluator, evaluator_name, is_inline_evaluator, named, show

__all__ = ["is_structured", "on_field", "read_field", "unreadable"]

_MISSING: Any = object()


def read_field(value: object, field: str) -> Any:
    """`value[field]` or `value.field`; a JSON object in text is parsed first.

    Returns a private sentinel when there is no such field (see `on_field`).
    """
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            return _MISSING
    if isinstance(value, Mapping):
        return value.get(field, _MISSING)
    return getattr(value, field, _MISSING)


def _field_names(value: object) -> list[str]:
    if isinstance(value, Mapping):
        return [str(k) for k in value]
    if is_dataclass(value):
        return [f.name for f in fields(value)]
    return []


def on_field(evaluator: Callable[..., Score], field: str) -> Evaluator[object, object]:
    """`evaluator` applied to `output.<field>` (and `expected.<field>` when it has one).

    An output without the field fails, its reason naming the fields it has.

    Examples:
        >>> from weakincentives.evals import exact_match
        >>> on_field(exact_match, "answer")({"answer": "4", "work": "2+2"}, "4").passed
        True
        >>> on_field(exact_match, "answer")({"result": "4"}, "4").reason
        "output {'result': '4'} has no field 'answer' (it has: result)"
    """

    def evaluate(output: object, expected: object) -> Score:
        got = read_field(output, field)
        if got is _MISSING:
            names = _field_names(output)
            has = f" (it has: {', '.join(names)})" if names else ""
            return Score(
                value=0.0, passed=False, reason=f"output {show(output)} has no field {field!r}{has}"
            )
        want = read_field(expected, field)
        return call_evaluator(evaluator, False, got, expected if want is _MISSING else want, None)

    name = f"{evaluator_name(evaluator)}[{field}]"
    return named(evaluate, name, aware=False, inline=is_inline_evaluator(evaluator))


def unreadable(kind: str, output: object, needs: str) -> str:
    """The reason an evaluator gives for an output it cannot read (a structured object)."""
    return (
        f"{kind} needs {needs} but the output is a {type(output).__name__}: {show(output)}; "
        f"point it at a field: {kind}(field=...) or --evaluator {kind}:FIELD"
    )


def is_structured(value: object) -> bool:
    """An object with fields (a dataclass, a mapping, a model), not a scalar, text or list."""
    return not isinstance(value, str | bytes | int | float | bool | list | tuple | type(None))
