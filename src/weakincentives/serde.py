"""Dataclasses <-> JSON, through pydantic's `TypeAdapter`.

One well-kept library does the coercion: nested and generic dataclasses, `datetime`,
`UUID`, `Literal`, `Mapping`, tuples and unions all work. No pickle anywhere.

Examples:
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

import dataclasses
import functools
import math
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast, overload

import pydantic_core
from pydantic_core import core_schema

from weakincentives.errors import SerdeError

if TYPE_CHECKING:
    import pydantic

__all__ = [
    "WholeNumber",
    "dump",
    "dumps",
    "dumps_for",
    "format_validation_error",
    "json_safe",
    "json_schema",
    "load",
    "loads",
    "prepare",
    "prepare_later",
    "prepare_pending",
]

T = TypeVar("T")


def _whole(value: Any) -> Any:
    if type(value) is float and math.isfinite(value):
        return round(value)
    return value


class _RoundedBeforeInt:
    """pydantic metadata: `_whole` before the int validation (what `BeforeValidator` does).

    Written against `pydantic_core` so that defining a record with a `WholeNumber` field
    does not import `pydantic` itself (about 20 ms): only validating one does.
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: Callable[[Any], core_schema.CoreSchema]
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(_whole, handler(source))


WholeNumber = Annotated[int, _RoundedBeforeInt()]
"""An `int` field that also reads a float, rounded (for values older records wrote as
floats, such as `EvalResult.latency_ms`)."""


@functools.lru_cache(maxsize=512)
def _adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    # Building a TypeAdapter costs milliseconds; types are few, values are many. pydantic
    # is imported here, on the first load, not with this module (writing needs only
    # pydantic_core).
    import pydantic

    return pydantic.TypeAdapter(tp)


@functools.lru_cache(maxsize=512)
def _validator(tp: Any) -> pydantic_core.SchemaValidator | pydantic.TypeAdapter[Any]:
    """The `SchemaValidator` of `tp`'s adapter, called without `TypeAdapter`'s wrapper.

    `TypeAdapter.validate_json(data)` passes its default options on to the validator:
    calling it directly is the same validation, a third faster for a small value (an
    agent parses its structured output per sample). An adapter whose validator is not
    built yet (a forward reference) is returned itself.
    """
    adapter = _adapter(tp)
    validator = adapter.validator
    return validator if isinstance(validator, pydantic_core.SchemaValidator) else adapter


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
        flat = _FLAT.get(type(value), _UNSEEN)
        if flat is _UNSEEN:
            flat = _flat_of(type(value))
        if flat is not None:  # a dataclass: the same data, its fields not read anew
            return flat.to_python(value, mode="json", fallback=_fallback, warnings=False)
        return pydantic_core.to_jsonable_python(value, fallback=_fallback)
    except pydantic_core.PydanticSerializationError as exc:
        raise SerdeError(f"cannot serialize {type(value).__name__}: {exc}") from exc


_UNSEEN: Any = object()
_PYDANTIC_OWN = ("__pydantic_serializer__", "__get_pydantic_core_schema__", "__pydantic_fields__")
_FLAT: dict[type[Any], pydantic_core.SchemaSerializer | None] = {}
"""Per class given to `dump` or `dumps`: a serializer of its fields when it is a dataclass,
else None."""


def _flat_of(cls: type[Any]) -> pydantic_core.SchemaSerializer | None:
    flat = _flat_serializer(cls)
    if len(_FLAT) < 1024:  # classes made on the fly must not grow it forever
        _FLAT[cls] = flat
    return flat


def _flat_serializer(cls: type[Any]) -> pydantic_core.SchemaSerializer | None:
    """For a dataclass: what `to_jsonable_python` does with it, knowing its fields.

    Inferring a dataclass reads its fields anew each time (about half of what `dump`
    costs for a small one); every field's value is still inferred, so the result is
    the same. None for any other class.
    """
    if not _is_dataclass_type(cls) or any(hasattr(cls, name) for name in _PYDANTIC_OWN):
        return None  # a pydantic dataclass serializes its own way (field serializers...)
    return pydantic_core.SchemaSerializer(
        _flat_schema(cls), core_schema.CoreConfig(ser_json_inf_nan="constants")
    )


def dumps(value: object) -> bytes:
    """Serialize `value` to compact JSON bytes."""
    try:
        flat = _FLAT.get(type(value), _UNSEEN)
        if flat is _UNSEEN:
            flat = _flat_of(type(value))
        if flat is not None:  # a dataclass (see `dump`)
            return cast(bytes, flat.to_json(value, fallback=_fallback, warnings=False))
        return pydantic_core.to_json(value, fallback=_fallback)
    except pydantic_core.PydanticSerializationError as exc:
        raise SerdeError(f"cannot serialize {type(value).__name__}: {exc}") from exc


def dumps_for(cls: type[T]) -> Callable[[T], bytes]:
    """`dumps` specialised to instances of the dataclass `cls`: the same bytes, faster.

    `dumps` infers the type of every object it meets, and inferring a dataclass reads its
    fields anew each time. The function returned knows the fields of `cls`, and of the
    fields declared as a dataclass `D` or as `tuple[D, ...]` (one level down), and of the
    named tuples of a field declared as `tuple[N, ...]`; every other value is inferred
    exactly as `dumps` does (same fallback, NaN written as `NaN`). A value
    whose typed parts are not exactly those classes (a subclass may add fields, a list may
    stand for a tuple) is handed to `dumps`. Build it once per class and keep it.

    Raises:
        TypeError: `cls` is not a dataclass.
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"dumps_for needs a dataclass, got {cls!r}")
    hints = typing.get_type_hints(cls)
    fields = []
    checks: list[tuple[str, type[Any], bool]] = []  # field, class, whether a tuple of them
    for f in dataclasses.fields(cls):
        tp = hints.get(f.name)
        args = typing.get_args(tp)
        schema: core_schema.CoreSchema
        if _is_dataclass_type(tp):
            schema = _flat_schema(tp)
            checks.append((f.name, tp, False))
        elif typing.get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis:
            if _is_dataclass_type(args[0]):
                schema = core_schema.tuple_variable_schema(_flat_schema(args[0]))
                checks.append((f.name, args[0], True))
            elif _is_named_tuple_type(args[0]):
                # Its items, each inferred: what inferring a named tuple writes, without
                # finding out anew (a microsecond per tuple) that it is one.
                items: list[core_schema.CoreSchema] = [
                    core_schema.any_schema() for _ in getattr(args[0], "_fields", ())
                ]
                schema = core_schema.tuple_variable_schema(core_schema.tuple_schema(items))
                checks.append((f.name, args[0], True))
            else:
                schema = core_schema.any_schema()
        else:
            schema = core_schema.any_schema()
        fields.append(core_schema.dataclass_field(f.name, schema))
    serializer = pydantic_core.SchemaSerializer(
        _dataclass_schema(cls, fields), core_schema.CoreConfig(ser_json_inf_nan="constants")
    )

    def dumps_typed(value: T) -> bytes:
        if type(value) is not cls or not _typed_as_declared(value, checks):
            return dumps(value)
        try:
            return serializer.to_json(value, fallback=_fallback, warnings=False)
        except pydantic_core.PydanticSerializationError as exc:
            raise SerdeError(f"cannot serialize {type(value).__name__}: {exc}") from exc

    return dumps_typed


def _typed_as_declared(value: object, checks: list[tuple[str, type[Any], bool]]) -> bool:
    for name, tp, many in checks:
        part = getattr(value, name)
        if not many:
            if type(part) is not tp:
                return False
        elif type(part) is not tuple:
            return False
        else:
            for item in part:
                if type(item) is not tp:
                    return False
    return True


def _is_dataclass_type(tp: Any) -> typing.TypeGuard[type[Any]]:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _is_named_tuple_type(tp: Any) -> typing.TypeGuard[type[tuple[Any, ...]]]:
    return (
        isinstance(tp, type)
        and issubclass(tp, tuple)
        and isinstance(getattr(tp, "_fields", None), tuple)
    )


def _flat_schema(cls: type[Any]) -> core_schema.DataclassSchema:
    """`cls` with every field's value inferred (what `dumps` does below a dataclass)."""
    fields = [
        core_schema.dataclass_field(f.name, core_schema.any_schema())
        for f in dataclasses.fields(cls)
    ]
    return _dataclass_schema(cls, fields)


def _dataclass_schema(
    cls: type[Any], fields: list[core_schema.DataclassField]
) -> core_schema.DataclassSchema:
    return core_schema.dataclass_schema(
        cls,
        core_schema.dataclass_args_schema(cls.__name__, fields),
        [f["name"] for f in fields],
        slots="__slots__" in vars(cls),
    )


def format_validation_error(exc: pydantic_core.ValidationError) -> str:
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
        return _validator(tp).validate_python(data)
    except pydantic_core.ValidationError as exc:
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
        return _validator(tp).validate_json(data)
    except pydantic_core.ValidationError as exc:
        raise SerdeError(
            f"invalid {_type_name(tp)}: {format_validation_error(exc)}",
        ) from exc


def json_schema(tp: type[object] | Any, *, copy: bool = True) -> dict[str, Any]:
    """Return the JSON schema of `tp` (used for tool params and structured output).

    Built once per type (pydantic takes 100 µs or more, and an agent asks for its output
    schema on every run); each call returns a fresh copy the caller may change, or with
    `copy=False` the one cached schema, shared by every caller: read it, never change it
    (the agent loop hands it to each model request this way).
    """
    schema = _cached_schema(cast(Any, tp))
    return cast(dict[str, Any], _copy_json(schema)) if copy else schema


def prepare(tp: type[object] | Any) -> bool:
    """Build now what `load`, `loads` and `json_schema` of `tp` build on first use.

    The first structured value of a process otherwise pays, on its first sample, for
    importing pydantic and generating `tp`'s validator and schema (about 100 ms, then
    a millisecond or so per type). Returns False, leaving the error to the first real
    use, when pydantic cannot handle `tp`.
    """
    try:
        _cached_schema(cast(Any, tp))
    except Exception:  # reported where the type is used, as it was before
        return False
    return True


_PENDING: list[Any] = []


def prepare_later(tp: type[object] | Any) -> None:
    """Note `tp` for `prepare_pending`: cheap, and imports nothing.

    `PromptTemplate` notes its output type and its tools' parameter types when it is
    defined (often at import time, where pydantic is not wanted: a program that never
    runs the prompt must not pay for it).
    """
    _PENDING.append(tp)


def prepare_pending() -> None:
    """`prepare` every type noted by `prepare_later` since the last call.

    An `AgentLoop` calls this when it is built: its prompts are about to run, so their
    types are prepared there rather than on the first sample of its first run.
    """
    while True:
        try:
            tp = _PENDING.pop()  # atomic: loops built in two threads share the work
        except IndexError:
            return
        prepare(tp)


@functools.lru_cache(maxsize=512)
def _cached_schema(tp: Any) -> dict[str, Any]:
    return _adapter(tp).json_schema()


def _copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value  # str, number, bool, None: immutable


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
