"""How `Redactor.finds_in` reads values: field getters and numbers-only declarations.

Part of `redaction` (see `Redactor._collect`), kept apart to keep that module readable.
"""

from __future__ import annotations

import dataclasses
import keyword
import types
import typing
from collections.abc import Callable
from typing import Any, cast

__all__ = [
    "NO_ITEMS",
    "Reader",
    "numeric_only",
    "own_numeric_named_tuple",
    "reader",
    "type_hints",
]

NO_ITEMS: tuple[()] = ()
"""The empty tuple (one object in CPython): `Redactor._collect` does not stack it."""

Reader = Callable[[Any, Callable[[str], None], Callable[[Any], None]], int]
"""`read(obj, append, push) -> n`: of a dataclass's fields that may hold text, in order,
appends each string to the strings found and pushes each other value (but None and `()`)
to be read later; returns `n`, how many fields it read."""


def reader(names: tuple[str, ...]) -> Reader:
    """A `Reader` of the fields `names` (each a valid identifier), made once per class.

    The same appends and pushes, in the same order, as looping over the field values
    and sorting each (what `Redactor._collect` does with a container's parts), written
    out field by field: no tuple of values, no loop (this runs per record written).
    """
    if not all(name.isidentifier() and not keyword.iskeyword(name) for name in names):
        return _generic_reader(names)
    lines = ["def read(obj, append, push):"]
    for name in names:
        lines += [
            f"    value = obj.{name}",
            "    if type(value) is str:",
            "        append(value)",
            "    elif value is not None and value is not NO_ITEMS:",
            "        push(value)",
        ]
    lines.append(f"    return {len(names)}")
    namespace: dict[str, Any] = {"NO_ITEMS": NO_ITEMS}
    exec("\n".join(lines), namespace)  # field names of a dataclass only
    return cast(Reader, namespace["read"])


def _generic_reader(names: tuple[str, ...]) -> Reader:
    def read(obj: Any, append: Callable[[str], None], push: Callable[[Any], None]) -> int:
        for name in names:
            value = getattr(obj, name)
            if type(value) is str:
                append(value)
            elif value is not None and value is not NO_ITEMS:
                push(value)
        return len(names)

    return read


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
