"""Dataclasses <-> JSON, through pydantic's `TypeAdapter`.

One well-kept library does the coercion: nested and generic dataclasses, `datetime`,
`UUID`, `Literal`, `Mapping`, tuples and unions all work. No pickle anywhere.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Point:
    ...     x: int
    ...     y: int
    >>> load(Point, {"x": 1, "y": "2"})
    Point(x=1, y=2)
    >>> dumps(Point(1, 2))
    b'{"x":1,"y":2}'
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, TypeVar, cast, overload

import pydantic
import pydantic_core

from weakincentives.errors import SerdeError

__all__ = [
    "dump",
    "dumps",
    "format_validation_error",
    "json_safe",
    "json_schema",
    "load",
    "loads",
]

T = TypeVar("T")


@functools.lru_cache(maxsize=512)
def _adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    # Building a TypeAdapter costs milliseconds; types are few, values are many.
    return pydantic.TypeAdapter(tp)


def _fallback(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    raise SerdeError(f"cannot serialize a value of type {type(value).__name__}")


def dump(value: object) -> Any:
    """Convert `value` to JSON-compatible Python (dicts, lists, str, numbers, None)."""
    try:
        return pydantic_core.to_jsonable_python(value, fallback=_fallback)
    except pydantic_core.PydanticSerializationError as exc:
        raise SerdeError(f"cannot serialize {type(value).__name__}: {exc}") from exc


def dumps(value: object) -> bytes:
    """Serialize `value` to compact JSON bytes."""
    try:
        return pydantic_core.to_json(value, fallback=_fallback)
    except pydantic_core.PydanticSerializationError as exc:
        raise SerdeError(f"cannot serialize {type(value).__name__}: {exc}") from exc


def format_validation_error(exc: pydantic.ValidationError) -> str:
    """Render a validation error as `field.path: message; ...`."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


# Overloads: with a single `type[T] | Any` parameter mypy cannot infer T from a class,
# so `x = load(Point, data)` needed an annotation; type forms (unions, Literal) give Any.
@overload
def load(tp: type[T], data: object) -> T: ...
@overload
def load(tp: Any, data: object) -> Any: ...
def load(tp: Any, data: object) -> Any:
    """Coerce JSON-compatible `data` into `tp`.

    Raises:
        SerdeError: naming each failing field path.
    """
    try:
        return _adapter(tp).validate_python(data)
    except pydantic.ValidationError as exc:
        raise SerdeError(
            f"invalid {_type_name(tp)}: {format_validation_error(exc)}",
        ) from exc


@overload
def loads(tp: type[T], data: str | bytes) -> T: ...
@overload
def loads(tp: Any, data: str | bytes) -> Any: ...
def loads(tp: Any, data: str | bytes) -> Any:
    """Parse JSON text into `tp`.

    Raises:
        SerdeError: when the text is not JSON or does not validate.
    """
    try:
        return _adapter(tp).validate_json(data)
    except pydantic.ValidationError as exc:
        raise SerdeError(
            f"invalid {_type_name(tp)}: {format_validation_error(exc)}",
        ) from exc


def json_schema(tp: type[object] | Any) -> dict[str, Any]:
    """Return the JSON schema of `tp` (used for tool params and structured output)."""
    return _adapter(cast(Any, tp)).json_schema()


def _type_name(tp: object) -> str:
    return getattr(tp, "__name__", None) or repr(tp)


def json_safe(value: Any) -> Any:
    """`value` with NaN and infinities as None, tuples as lists and keys as text.

    JSON has no NaN: statistics of tiny samples are NaN, and strict JSON readers (browsers,
    `jq`) reject the `NaN` token, so exported numbers go through this first.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
