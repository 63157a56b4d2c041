"""How `Redactor.finds_in` reads values: field getters and numbers-only declarations.

Part of `redaction` (see `Redactor._collect`), kept apart to keep that module readable.
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Callable
from typing import Any

__all__ = ["NO_ITEMS", "Getter", "getter", "numeric_only", "own_numeric_named_tuple", "type_hints"]

NO_ITEMS: tuple[()] = ()
"""The empty tuple (one object in CPython): `Redactor._collect` does not stack it."""

Getter = Callable[[Any], tuple[Any, ...]]
"""`obj -> (obj.<name>, ...)`: the values of a dataclass's fields that may hold text."""


def getter(names: tuple[str, ...]) -> Getter:
    """`obj -> (obj.<name>, ...)` in one call (`attrgetter` returns a bare value for one)."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        only = names[0]
        return lambda obj: (getattr(obj, only),)
    return lambda obj: ()


def type_hints(cls: type) -> dict[str, Any]:
    """`cls`'s resolved annotations; none when one cannot be resolved."""
    try:
        return typing.get_type_hints(cls, include_extras=False)
    except Exception:  # an unresolvable annotation: every field counts as text
        return {}


def numeric_only(tp: Any, seen: frozenset[type] = frozenset()) -> bool:
    """Whether a value declared as `tp` is never text.

    True for numbers, booleans, None, and unions and dataclasses made only of those.
    """
    if tp in (int, float, bool, type(None)):
        return True
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return all(numeric_only(arg, seen) for arg in typing.get_args(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and tp not in seen:
        found = type_hints(tp)
        return all(numeric_only(found.get(f.name), seen | {tp}) for f in dataclasses.fields(tp))
    return False


def own_numeric_named_tuple(cls: type) -> bool:
    """Whether `cls` is one of this package's named tuples declared as numbers only.

    Such a tuple (`TurnUsage`) is built by this package's code, which fills it as
    declared, as the numeric fields of its dataclasses are (see `Redactor._text_fields`).
    """
    fields = getattr(cls, "_fields", None)
    if not isinstance(fields, tuple) or cls.__module__.partition(".")[0] != "weakincentives":
        return False
    found = type_hints(cls)
    return all(numeric_only(found.get(name)) for name in fields)
