"""How a result records values: a sample's input and expected value, an exception.

Part of the records layer (`_records` re-exports every name here): it imports nothing
else of `weakincentives.evals`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pydantic_core

from weakincentives import serde

__all__ = [
    "ADAPTERS_ATTR",
    "DEFAULT_VALUE_LIMIT",
    "RecordInputs",
    "error_message",
    "recorded_value",
]


ADAPTERS_ATTR = "__wink_adapters__"
"""Attribute of an evaluator holding the adapters it calls (LLM judges, and combinators
of them), so a run can record which models scored it."""


DEFAULT_VALUE_LIMIT = 2000
"""Characters of a sample's input or expected value kept on each result (JSON form)."""


@dataclass(frozen=True, slots=True)
class RecordInputs:
    """Whether and how results keep their sample's input and expected value.

    Examples:
        >>> RecordInputs(limit=5).value("abcdefgh")
        'abcde…[truncated: 8 chars]'
    """

    enabled: bool = True
    """False: results carry no input nor expected (for sensitive data)."""
    limit: int = DEFAULT_VALUE_LIMIT
    """Characters kept; a longer value (its JSON text, for structured values) is cut and
    ends with `…[truncated: N chars]`, N being its full length."""

    def value(self, value: Any) -> Any:
        """`value` as recorded (see `recorded_value`); None when disabled."""
        return recorded_value(value, self.limit) if self.enabled else None


def recorded_value(value: Any, limit: int = DEFAULT_VALUE_LIMIT) -> Any:
    """The JSON form of `value`, or its JSON text cut at `limit` characters with a marker.

    Strings, numbers, booleans and None are kept as they are when short enough; other
    values become their JSON form (`serde.dump`; their `repr` when they cannot be).
    """
    if value is None or type(value) in (bool, int, float):
        return value
    if type(value) is str:
        text = value
        data: Any = value
    else:
        try:
            data = serde.dump(value)
        except Exception:  # a value we cannot serialize is still worth showing
            data = repr(value)
        if isinstance(data, str):
            text = data
        elif 2 * len(_json_bytes(data)) <= limit:
            # Short for sure, told by the fast serializer: `json.dumps` text is never
            # twice its bytes (at most a character more per number, such as `1e+16`).
            return data
        else:
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if len(text) <= limit:
        return data
    return f"{text[:limit]}…[truncated: {len(text)} chars]"


def _json_bytes(data: Any) -> bytes:
    """JSON of `data` (JSON-compatible Python), fast; as `json.dumps` writes it on failure."""
    try:
        return pydantic_core.to_json(data)
    except pydantic_core.PydanticSerializationError:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def error_message(exc: BaseException) -> str:
    """What a result records of an exception: its message, as EVALS.md shows it.

    An exception without a message (`raise KeyError`) is named by its type instead. The
    stage that failed is the result's `error_kind`; the exception itself, with its type
    and traceback, goes to the log and the debug bundle.
    """
    text = str(exc)
    return text if text else type(exc).__name__
