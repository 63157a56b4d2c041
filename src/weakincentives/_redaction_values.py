"""How `Redactor.finds_in` reads values: per-class readers and numbers-only declarations.

Part of `redaction` (see `Redactor._collect`), kept apart to keep that module readable.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, cast

__all__ = [
    "NO_ITEMS", "Reader", "numeric_only", "own_numeric_named_tuple", "reader", "type_hints",
]  # fmt: skip

NO_ITEMS: tuple[()] = ()
"""The empty tuple (one object in CPython): a reader does not stack it (others are)."""

Reader = Callable[[Any, Callable[[str], None], Callable[[Any], None]], int]
"""`read(obj, append, push) -> parts`: appends `obj`'s strings, pushes its other values."""


def reader(names: tuple[str, ...]) -> Reader:
    """The `Reader` of a dataclass's fields `names`, as `Redactor._collect` reads parts.

    Written out field by field (one `exec` per class, as `dataclasses` makes `__init__`):
    a result is read once per line written, and a loop over a tuple of its fields costs
    half again as much.
    """
    lines = ["def read(obj, append, push):"]
    for name in names:
        lines += [
            f"    v = obj.{name}",
            "    if type(v) is str:",
            "        append(v)",
            "    elif v is not None and v is not _NO_ITEMS:",
            "        push(v)",
        ]
    lines.append(f"    return {len(names)}")
    namespace: dict[str, Any] = {"_NO_ITEMS": NO_ITEMS}
    exec("\n".join(lines), namespace)  # the names are a dataclass's field identifiers
    return cast(Reader, namespace["read"])


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
