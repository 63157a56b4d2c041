"""Field maps: which field of a dataset row is a sample's id, input, expected, metadata.

`FieldMap.parse(["input=question", "expected=answer|after:####"])` reads GSM8K's own
rows; `TRANSFORMS` lists what may be applied to a value on the way (`after:SEP`, `int`,
...). `read_field` follows a dotted path into a row, and `apply_transforms` runs a
target's transforms.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from weakincentives.errors import InvalidDatasetError

from ._rows import json_type

__all__ = ["MISSING", "TRANSFORMS", "FieldMap", "read_field", "transform_steps"]

_TARGETS = ("id", "input", "expected", "metadata")


def _after(separator: str) -> Callable[[Any], Any]:
    def after(value: Any) -> Any:
        text = _text(value, f"after:{separator}")
        if separator not in text:
            raise ValueError(f"{separator!r} does not occur in the value")
        return text.rpartition(separator)[2].strip()

    return after


def _before(separator: str) -> Callable[[Any], Any]:
    def before(value: Any) -> Any:
        return _text(value, f"before:{separator}").partition(separator)[0].strip()

    return before


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} needs text, got {json_type(value)}")  # noqa: TRY004
    return value


def _number(kind: type[int] | type[float]) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        text = _text(value, kind.__name__).strip().replace(",", "")
        return kind(text)

    return convert


TRANSFORMS: Mapping[str, str] = {
    "after:SEP": "the text after the last SEP, stripped (GSM8K: after:####)",
    "before:SEP": "the text before the first SEP, stripped",
    "strip": "the text without surrounding whitespace",
    "lower": "the text in lower case",
    "int": "the text as an integer (commas dropped: 1,234 -> 1234)",
    "float": "the text as a number (commas dropped)",
    "json": "the text parsed as JSON",
}
"""The transforms `FieldMap.parse` knows, with what each does."""


def _transform(spec: str) -> Callable[[Any], Any]:
    name, sep, argument = spec.partition(":")
    if name in ("after", "before") and sep and argument:
        return _after(argument) if name == "after" else _before(argument)
    simple: dict[str, Callable[[Any], Any]] = {
        "strip": lambda v: _text(v, "strip").strip(),
        "lower": lambda v: _text(v, "lower").lower(),
        "int": _number(int),
        "float": _number(float),
        "json": lambda v: json.loads(_text(v, "json")),
    }
    if name in simple and not sep:
        return simple[name]
    raise InvalidDatasetError(f"unknown transform {spec!r}; use one of {', '.join(TRANSFORMS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldMap:
    """Where each part of a sample comes from in a row (field names; dots go deeper).

    Examples:
        >>> fields = FieldMap.parse(["input=question", "expected=answer|after:####"])
        >>> fields.input, fields.expected, fields.specs()
        ('question', 'answer', ('input=question', 'expected=answer|after:####'))
    """

    id: str = "id"
    """Field of the sample id (absent in a row: the row number)."""
    input: str = "input"
    """Field of the input."""
    expected: str = "expected"
    """Field of the expected value (absent: None, when the expected type allows it)."""
    metadata: str = "metadata"
    """Field of the metadata object (absent: empty)."""
    metadata_fields: Mapping[str, str] = field(default_factory=dict)
    """More metadata entries: key -> field (`metadata.topic=subject`)."""
    transforms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Target (`input`, `expected`, `metadata.KEY`, ...) -> transform names, applied in order."""

    @classmethod
    def parse(cls, specs: Iterable[str]) -> FieldMap:
        """Build a map from `TARGET=FIELD[|TRANSFORM...]` strings (the `--field` syntax).

        TARGET is `id`, `input`, `expected`, `metadata` or `metadata.KEY`; see
        `TRANSFORMS` for the transforms.

        Raises:
            InvalidDatasetError: a spec is malformed or names an unknown target or transform.
        """
        values: dict[str, Any] = {}
        extra: dict[str, str] = {}
        transforms: dict[str, tuple[str, ...]] = {}
        for spec in specs:
            target, eq, rest = spec.partition("=")
            source, *steps = rest.split("|")
            target, source = target.strip(), source.strip()
            if not eq or not source:
                raise InvalidDatasetError(
                    f"--field {spec!r} must look like TARGET=FIELD[|TRANSFORM], e.g. "
                    "input=question or expected=answer|after:####"
                )
            if target.startswith("metadata.") and len(target) > len("metadata."):
                extra[target.removeprefix("metadata.")] = source
            elif target in _TARGETS:
                values[target] = source
            else:
                raise InvalidDatasetError(
                    f"--field {spec!r}: unknown target {target!r}; use id, input, expected, "
                    "metadata or metadata.KEY"
                )
            if steps:
                for step in steps:
                    _transform(step.strip())  # fail on a bad name now, not at row 1
                transforms[target] = tuple(step.strip() for step in steps)
        return cls(**values, metadata_fields=extra, transforms=transforms)

    def specs(self) -> tuple[str, ...]:
        """The `--field` strings that rebuild this map (only what differs from the default)."""
        default = FieldMap()
        out = []
        for target in _TARGETS:
            source = getattr(self, target)
            if source != getattr(default, target) or target in self.transforms:
                out.append(_spec(target, source, self.transforms.get(target, ())))
        for key, source in self.metadata_fields.items():
            target = f"metadata.{key}"
            out.append(_spec(target, source, self.transforms.get(target, ())))
        return tuple(out)

    def sources(self) -> frozenset[str]:
        """The top-level fields of a row this map reads."""
        names = [self.id, self.input, self.expected, self.metadata, *self.metadata_fields.values()]
        return frozenset(name.split(".", 1)[0] for name in names)


def _spec(target: str, source: str, steps: tuple[str, ...]) -> str:
    return "|".join([f"{target}={source}", *steps])


@functools.lru_cache(maxsize=64)
def transform_steps(names: tuple[str, ...]) -> tuple[Callable[[Any], Any], ...]:
    """The functions of transform names (checked by `FieldMap.parse`)."""
    return tuple(_transform(name) for name in names)


MISSING: Any = object()
"""What `read_field` returns for a field the row does not have."""


def read_field(row: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted `path` in `row`, or `MISSING`."""
    value: Any = row
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value
