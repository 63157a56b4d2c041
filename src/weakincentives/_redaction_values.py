"""How `Redactor.finds_in` reads values: field getters and numbers-only declarations.

Part of `redaction` (see `Redactor._collect`), kept apart to keep that module readable.
"""

from __future__ import annotations

import dataclasses
import keyword
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

__all__ = [
    "CANNOT",
    "NO_ITEMS",
    "Inline",
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
to be read later; returns `n`, how many values it looked at (the caller's budget), or
`CANNOT` (more than any budget) when it found a value that cannot be vouched for."""

CANNOT = 1 << 62
"""What a `Reader` returns for a value that cannot be vouched for (see `Inline`)."""


@dataclass(frozen=True)
class Inline:
    """How a `Reader` reads a field's value of the declared class itself, not pushing it.

    Each value is still checked: one whose class is not exactly `cls` is sorted (and
    pushed) as any other.
    """

    kind: Literal["one", "many", "numbers", "mapping"]
    """`one`: the value is a `cls`; `many`: a tuple of them; `numbers`: a tuple of
    `cls`, a named tuple of numbers only (skipped); `mapping`: a `dict` (`cls`), whose
    keys are read as strings (a key that is none, or looks secret, cannot be vouched
    for: `secret_key` tells) and whose values are sorted."""
    cls: type
    """The declared class."""
    read: Reader | None = None
    """The `Reader` of `cls` (`one` and `many`)."""
    secret_key: Callable[[str], bool] | None = None
    """Whether a key looks secret (`mapping`)."""


_SORT = """\
{pad}if type({v}) is str:
{pad}    append({v})
{pad}elif {v} is not None and {v} is not NO_ITEMS:
{pad}    push({v})"""
"""What `Redactor._collect` does with each part of a container: strings out, None and
`()` dropped, the rest stacked."""


def reader(names: tuple[str, ...], inline: Mapping[str, Inline] | None = None) -> Reader:
    """A `Reader` of the fields `names` (each a valid identifier), made once per class.

    Each field's value is sorted as `Redactor._collect` sorts a container's parts,
    written out field by field: no tuple of values, no loop (this runs per record
    written). A field in `inline` whose value is of its declared class is read here, by
    that class's reader, rather than pushed: its strings come right after those before
    it (the check joins them all; their order does not change what it finds).
    """
    if not all(name.isidentifier() and not keyword.iskeyword(name) for name in names):
        return _generic_reader(names)
    inline = inline or {}
    namespace: dict[str, Any] = {"NO_ITEMS": NO_ITEMS, "CANNOT": CANNOT}
    lines = ["def read(obj, append, push):", f"    n = {len(names)}"]
    for i, name in enumerate(names):
        lines.append(f"    value = obj.{name}")
        how = inline.get(name)
        if how is None:
            lines.append(_SORT.format(pad="    ", v="value"))
            continue
        namespace[f"cls_{i}"], namespace[f"read_{i}"] = how.cls, how.read
        namespace[f"secret_key_{i}"] = how.secret_key
        if how.kind == "mapping":
            lines += [
                f"    if type(value) is cls_{i}:",
                "        n += len(value)",
                "        for key, item in value.items():",
                f"            if type(key) is not str or secret_key_{i}(key):",
                "                return CANNOT",
                "            append(key)",
                _SORT.format(pad="            ", v="item"),
                _SORT.format(pad="    ", v="value").replace("if", "elif", 1),
            ]
            continue
        if how.kind == "one":
            lines += [
                f"    if type(value) is cls_{i}:",
                f"        n += read_{i}(value, append, push)",
            ]
            lines.append(_SORT.format(pad="    ", v="value").replace("if", "elif", 1))
            continue
        lines += ["    if type(value) is tuple:", "        n += len(value)"]
        lines.append("        for item in value:")
        if how.kind == "many":
            lines += [f"            if type(item) is cls_{i}:"]
            lines += [f"                n += read_{i}(item, append, push)"]
            lines.append(_SORT.format(pad="            ", v="item").replace("if", "elif", 1))
        else:  # numbers: nothing to read in an item of the declared class
            lines.append(f"            if type(item) is not cls_{i}:")
            lines.append(_SORT.format(pad="                ", v="item"))
        lines.append(_SORT.format(pad="    ", v="value").replace("if", "elif", 1))
    lines.append("    return n")
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
