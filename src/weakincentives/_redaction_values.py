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
    "LazyReader",
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


def reader(names: tuple[str, ...], inline: Mapping[str, Inline] | None = None) -> Reader:
    """A `Reader` of the fields `names` (each a valid identifier), made once per class.

    Each field's value is sorted as `Redactor._collect` sorts a container's parts,
    written out field by field: no tuple of values, no loop (this runs per record
    written). A field in `inline` whose value is of its declared class is read here
    rather than pushed: its strings come right after those before it (the check joins
    them all; their order does not change what it finds).
    """
    if not all(name.isidentifier() and not keyword.iskeyword(name) for name in names):
        return _generic_reader(names)
    inline = inline or {}
    namespace: dict[str, Any] = {"NO_ITEMS": NO_ITEMS}
    lines = ["def read(obj, append, push):", f"    n = {len(names)}"]
    for i, name in enumerate(names):
        lines.append(f"    value = obj.{name}")
        how = inline.get(name)
        if how is not None:  # the value of the expected class: read by a helper
            namespace[f"cls_{i}"], namespace[f"read_{i}"] = _helper(how)
            lines.append(f"    if type(value) is cls_{i}: n += read_{i}(value, append, push)")
            lines.append("    elif type(value) is str: append(value)")
        else:
            lines.append("    if type(value) is str: append(value)")
        lines.append("    elif value is not None and value is not NO_ITEMS: push(value)")
    lines.append("    return n")
    exec("\n".join(lines), namespace)  # field names of a dataclass only
    return cast(Reader, namespace["read"])


def _helper(how: Inline) -> tuple[type, Reader]:
    """The class a field's value must have to be read in place, and what reads it."""
    if how.kind == "one":
        return how.cls, cast(Reader, how.read)
    if how.kind == "mapping":
        return dict, _mapping_reader(cast("Callable[[str], bool]", how.secret_key))
    return tuple, _items_reader(how.cls, how.read)


def _mapping_reader(secret_key: Callable[[str], bool]) -> Reader:
    def read(value: Any, append: Callable[[str], None], push: Callable[[Any], None]) -> int:
        for key, item in value.items():
            if type(key) is not str or secret_key(key):
                return CANNOT
            append(key)
            if type(item) is str:
                append(item)
            elif item is not None and item is not NO_ITEMS:
                push(item)
        return len(value)

    return read


def _items_reader(cls: type, read_one: Reader | None) -> Reader:
    """A tuple's items: those of class `cls` by `read_one` (skipped without one)."""

    def read(value: Any, append: Callable[[str], None], push: Callable[[Any], None]) -> int:
        n = len(value)
        for item in value:
            if type(item) is cls:
                if read_one is not None:
                    n += read_one(item, append, push)
            elif type(item) is str:
                append(item)
            elif item is not None and item is not NO_ITEMS:
                push(item)
        return n

    return read


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


class LazyReader:
    """A `Reader` that builds its fast reader only once called `after` times.

    Until then it reads field by field, looping over `names`; then it builds the fast
    reader (`build`, see `reader`) and hands over to it. Building one costs a compile (a
    millisecond or so for a big record, with the type hints of the records it holds): a
    process that writes a few records never pays it.
    """

    __slots__ = ("_after", "_build", "_calls", "_slow", "fast")

    def __init__(self, names: tuple[str, ...], build: Callable[[], Reader], after: int) -> None:
        self._slow = _generic_reader(names)
        self._build = build
        self._calls = self._after = after
        self.fast: Reader | None = None

    @property
    def used(self) -> bool:
        """Whether it has read a record."""
        return self._calls < self._after or self.fast is not None

    def force(self) -> Reader:
        """The fast reader, built now if it is not yet."""
        fast = self.fast
        if fast is None:
            fast = self.fast = self._build()
        return fast

    def __call__(self, obj: Any, append: Callable[[str], None], push: Callable[[Any], None]) -> int:
        fast = self.fast
        if fast is not None:
            return fast(obj, append, push)
        self._calls -= 1
        if self._calls < 0:
            return self.force()(obj, append, push)
        return self._slow(obj, append, push)


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
