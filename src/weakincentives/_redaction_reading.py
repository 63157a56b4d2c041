"""How `Redactor.finds_in` reads each class it meets: the readers of records, per class.

Part of `redaction` (see `Redactor._collect`), kept apart to keep that module readable.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from ._redaction_values import Inline, LazyReader, Reader, numeric_only, reader
from ._redaction_values import own_numeric_named_tuple as _own_numeric_named_tuple
from ._redaction_values import type_hints as _hints

__all__ = ["COMPILE_AFTER", "ITEMS", "MAPPING", "NUMBERS", "RecordReaders"]

COMPILE_AFTER = 100
"""`Redactor.finds_in` reads a class's records by its fast reader (compiled) from its
101st record on: a process that writes a few records never compiles one."""

MAPPING: Any = object()
"""How `Redactor._collect` reads a mapping: keys and values."""
ITEMS: Any = object()
"""... and a tuple subclass: its items."""
NUMBERS: Any = object()
"""... and one of this package's named tuples of numbers: skipped."""


class RecordReaders:
    """Class -> how `Redactor._collect` reads its instances (`how_to_read`), made once.

    `classes` is that cache; `secret_key` tells whether a key or field name looks secret.
    """

    def __init__(self, secret_key: Callable[[str], bool]) -> None:
        self.classes: dict[type, Any] = {}
        self._secret_key = secret_key

    def how_to_read(self, cls: type, building: frozenset[type] = frozenset()) -> Any:
        """How `_collect` reads an instance of `cls` (not a builtin it knows).

        `MAPPING` (its keys and values), `ITEMS` (a named tuple: its JSON form is its
        items), `NUMBERS` (this package's named tuple of numbers: nothing to read), a
        `Reader` of a dataclass's text fields (`text_fields`), or None: it cannot vouch
        for the class.
        """
        if dataclasses.is_dataclass(cls):
            return self.text_fields(cls, building)
        if issubclass(cls, tuple):
            return NUMBERS if _own_numeric_named_tuple(cls) else ITEMS
        if issubclass(cls, Mapping):
            return MAPPING
        return None

    def text_fields(self, cls: type, building: frozenset[type] = frozenset()) -> Reader | None:
        """For dataclass `cls`: a `Reader` of an instance's fields that may hold text.

        None for a class that is not a dataclass, or one with a secret-looking field name
        (a key of its JSON form). Of this package's own records, the fields declared as
        numbers or booleans only (`int`, `float | None`, a dataclass of such fields...)
        are left out: they are built by this package's code, which fills them as
        declared; and a field declared as a dataclass or a tuple of them (a result's
        score and messages), a tuple of this package's named tuples of numbers (skipped)
        or a mapping (or `Any`: a dict) is read in place by the compiled reader (see
        `reader`). `building` holds the classes whose readers are being made, which are
        not read in place (a class that holds itself). A user's class is read whole (its
        annotations are not enforced). The reader is a `LazyReader`: compiled after the
        class's first `COMPILE_AFTER` records.
        """
        if not dataclasses.is_dataclass(cls):
            return None
        fields = dataclasses.fields(cls)
        if any(self._secret_key(f.name) for f in fields):
            return None
        names = tuple(f.name for f in fields)
        hints: dict[str, Any] | None = None
        if cls.__module__.partition(".")[0] == "weakincentives":
            hints = _hints(cls)
            names = tuple(name for name in names if not numeric_only(hints.get(name)))
        build = functools.partial(self._fast_reader, cls, names, hints, building | {cls})
        return LazyReader(names, build, COMPILE_AFTER)

    def _fast_reader(
        self,
        cls: type,
        names: tuple[str, ...],
        hints: dict[str, Any] | None,
        building: frozenset[type],
    ) -> Reader:
        """`cls`'s `reader`, the fields `hints` declares as records read in place."""
        inline: dict[str, Inline] = {}
        for name in names if hints is not None else ():
            how = self._inline(hints.get(name), building)  # type: ignore[union-attr]
            if how is not None:
                inline[name] = how
        fast = reader(names, inline)
        if isinstance(self.classes.get(cls), LazyReader):
            self.classes[cls] = fast  # `_collect` calls it directly from now on
        return fast

    def _inline(self, tp: Any, building: frozenset[type]) -> Inline | None:
        """How a reader reads a field declared as `tp` in place, if it can (`text_fields`)."""
        args = typing.get_args(tp)
        if typing.get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis:
            item = args[0]
            if isinstance(item, type) and issubclass(item, tuple):
                return Inline("numbers", item) if _own_numeric_named_tuple(item) else None
            read = self._nested_reader(item, building)
            return None if read is None else Inline("many", item, read)
        read = self._nested_reader(tp, building)
        if read is not None:
            return Inline("one", tp, read)
        if _may_hold_dict(tp):
            return Inline("mapping", dict, secret_key=self._secret_key)
        return None

    def _nested_reader(self, tp: Any, building: frozenset[type]) -> Reader | None:
        if not isinstance(tp, type) or not dataclasses.is_dataclass(tp) or tp in building:
            return None
        # Only a class already met in the records read so far (before its holder's reader
        # is compiled): one never met (a tool call in a run without tools) is left to be
        # pushed, which costs nothing until it turns up, rather than its type hints now.
        how = self.classes.get(tp)
        if isinstance(how, LazyReader) and how.used:  # met: hot, as its holder is
            return how.force()
        return how if callable(how) else None


def _may_hold_dict(tp: Any) -> bool:
    """Whether a field declared as `tp` may hold a `dict` (`Any`, a mapping, a union)."""
    if tp is Any or tp is dict:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_may_hold_dict(arg) for arg in typing.get_args(tp))
    return origin is dict or origin is Mapping
