from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from enum import Enum
from typing import Any, Generic, Literal, NamedTuple, TypeVar
from uuid import UUID

import pytest

from weakincentives import serde
from weakincentives.errors import SerdeError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int


@dataclass(frozen=True)
class Box(Generic[T]):
    item: T
    extras: tuple[T, ...] = ()


@dataclass(frozen=True, slots=True)
class Shape:
    kind: Literal["line", "polygon"]
    points: tuple[Point, ...]
    label: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    id: UUID
    created: datetime
    day: date
    shapes: tuple[Shape, ...]
    tags: Mapping[str, int] = field(default_factory=dict)
    value: int | str = 0
    boxed: Box[Point] | None = None
    pair: tuple[int, str] = (0, "")


RECORD = Record(
    id=UUID("0f8fad5b-d9cb-469f-a165-70867728950e"),
    created=datetime(2024, 3, 4, 5, 6, 7, 890000, tzinfo=timezone(timedelta(hours=-5))),
    day=date(2024, 3, 4),
    shapes=(Shape("line", (Point(0, 0), Point(1, 2))), Shape("polygon", (), label="empty")),
    tags={"a": 1, "b": 2},
    value="text",
    boxed=Box(Point(3, 4), (Point(5, 6),)),
    pair=(7, "seven"),
)


def test_nested_record_round_trips_through_json() -> None:
    restored = serde.loads(Record, serde.dumps(RECORD))
    assert restored == RECORD
    assert restored.created.utcoffset() == timedelta(hours=-5)
    assert isinstance(restored.id, UUID)
    assert isinstance(restored.boxed, Box)
    assert restored.boxed.extras == (Point(5, 6),)


def test_dump_produces_json_compatible_data() -> None:
    data = serde.dump(RECORD)
    assert data["id"] == "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert data["created"] == "2024-03-04T05:06:07.890000-05:00"
    assert data["shapes"][0] == {
        "kind": "line",
        "points": [{"x": 0, "y": 0}, {"x": 1, "y": 2}],
        "label": None,
    }
    assert data["pair"] == [7, "seven"]
    assert json.loads(json.dumps(data)) == data
    assert serde.load(Record, data) == RECORD


@pytest.mark.parametrize(
    ("tp", "data", "expected"),
    [
        (Box[int], {"item": "3", "extras": [1, "2"]}, Box(3, (1, 2))),
        (Box[Point], {"item": {"x": 1, "y": 2}}, Box(Point(1, 2))),
        (int | str, 5, 5),
        (int | str, "five", "five"),
        (Literal["a", "b"], "b", "b"),
        (Mapping[str, float], {"x": 1}, {"x": 1.0}),
        (tuple[int, ...], [1, 2, 3], (1, 2, 3)),
        (
            UUID,
            "0f8fad5b-d9cb-469f-a165-70867728950e",
            UUID("0f8fad5b-d9cb-469f-a165-70867728950e"),
        ),
        (datetime, "2024-01-01T00:00:00Z", datetime(2024, 1, 1, tzinfo=UTC)),
    ],
)
def test_load_coerces_into_the_type(tp: Any, data: object, expected: object) -> None:
    assert serde.load(tp, data) == expected


@pytest.mark.parametrize(
    ("data", "field_path"),
    [
        ({**serde.dump(RECORD), "id": "not-a-uuid"}, "id"),
        ({**serde.dump(RECORD), "created": "yesterday"}, "created"),
        ({**serde.dump(RECORD), "tags": {"a": "x"}}, "tags.a"),
        ({**serde.dump(RECORD), "pair": [1]}, "pair.1"),
        (
            {**serde.dump(RECORD), "shapes": [{"kind": "circle", "points": []}]},
            "shapes.0.kind",
        ),
        (
            {**serde.dump(RECORD), "shapes": [{"kind": "line", "points": [{"x": 1}]}]},
            "shapes.0.points.0.y",
        ),
        ({k: v for k, v in serde.dump(RECORD).items() if k != "day"}, "day"),
    ],
    ids=["uuid", "datetime", "mapping", "tuple", "literal", "nested-missing", "missing"],
)
def test_load_error_names_the_field(data: object, field_path: str) -> None:
    with pytest.raises(SerdeError, match=rf"invalid Record: .*\b{field_path}: "):
        serde.load(Record, data)


def test_load_error_names_every_failing_field() -> None:
    with pytest.raises(SerdeError) as info:
        serde.load(Point, {"x": "a", "y": "b"})
    assert "x: " in str(info.value)
    assert "; y: " in str(info.value)


@pytest.mark.parametrize("text", [b"{not json", b"", b"[1, 2]"])
def test_loads_rejects_bad_json(text: bytes) -> None:
    with pytest.raises(SerdeError, match="invalid Point"):
        serde.loads(Point, text)


def test_serde_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="invalid Point"):
        serde.load(Point, None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (ValueError("boom"), "ValueError: boom"),
        ((1, "a"), [1, "a"]),
        ({"k": (1, 2)}, {"k": [1, 2]}),
    ],
)
def test_dump_handles_common_non_json_values(value: object, expected: object) -> None:
    assert serde.dump(value) == expected


@pytest.mark.parametrize("value", [{3, 1, 2}, frozenset({"b", "a"})])
def test_sets_dump_as_lists(value: set[Any] | frozenset[Any]) -> None:
    dumped = serde.dump(value)
    assert isinstance(dumped, list)
    assert sorted(dumped) == sorted(value)


class Opaque:
    pass


@pytest.mark.parametrize("fn", [serde.dump, serde.dumps])
def test_unserializable_values_raise_serde_error(fn: Any) -> None:
    with pytest.raises(SerdeError, match="Opaque"):
        fn({"nested": Opaque()})


def test_dumps_is_compact_json_bytes() -> None:
    assert serde.dumps(Point(1, 2)) == b'{"x":1,"y":2}'


def test_json_schema_describes_required_fields_and_literals() -> None:
    schema = serde.json_schema(Shape)
    assert schema["required"] == ["kind", "points"]
    assert schema["properties"]["kind"]["enum"] == ["line", "polygon"]


def test_json_safe_replaces_non_finite_numbers_and_normalizes_containers() -> None:
    value = {1: (float("nan"), float("inf"), 0.5), "x": [float("-inf"), "ok"]}
    assert serde.json_safe(value) == {"1": [None, None, 0.5], "x": [None, "ok"]}


def test_json_schema_is_a_fresh_copy_each_time() -> None:
    first = serde.json_schema(Shape)
    first["required"].append("label")
    first["properties"]["kind"]["enum"].clear()
    again = serde.json_schema(Shape)
    assert again["required"] == ["kind", "points"]
    assert again["properties"]["kind"]["enum"] == ["line", "polygon"]


def test_json_schema_without_copy_is_the_one_cached_schema() -> None:
    shared = serde.json_schema(Shape, copy=False)
    assert serde.json_schema(Shape, copy=False) is shared
    assert serde.json_schema(Shape) == shared
    assert serde.json_schema(Shape) is not shared


class _Opaque:
    """A plain class: pydantic has no schema for it."""


@dataclass(frozen=True)
class _HoldsOpaque:
    thing: _Opaque


def test_prepare_builds_the_schema_and_leaves_failures_to_first_use() -> None:
    @dataclass(frozen=True)
    class Fresh:
        n: int

    assert serde.prepare(Fresh) is True
    assert serde.json_schema(Fresh, copy=False)["required"] == ["n"]
    assert serde.load(Fresh, {"n": "3"}) == Fresh(3)
    assert serde.prepare(_HoldsOpaque) is False  # no error where the type is declared
    with pytest.raises(Exception, match="_Opaque"):
        serde.json_schema(_HoldsOpaque)


@dataclass(frozen=True, slots=True)
class PointPlus(Point):
    z: int = 9


class Turn(NamedTuple):
    tokens: int
    cost: float | None = None


class TurnPlus(Turn):  # a subclass: inferred, as `dumps` does
    pass


@dataclass(frozen=True)
class Drawing:
    title: Any
    origin: Point
    shapes: tuple[Shape, ...] = ()
    points: tuple[Point, ...] = ()
    tags: Mapping[str, Any] = field(default_factory=dict)
    scale: float = 1.0
    turns: tuple[Turn, ...] = ()


DRAWINGS = {
    "plain": Drawing("t", Point(0, 0), (Shape("line", (Point(1, 2),)),), (Point(3, 4),)),
    "non-finite numbers": Drawing(float("nan"), Point(0, 0), tags={"x": float("inf")}),
    "int and bool where floats are declared": Drawing(1, Point(True, 2), scale=2),
    "a subclass adding a field": Drawing("t", PointPlus(1, 2), points=(PointPlus(3, 4),)),
    "a list for a tuple": Drawing("t", Point(0, 0), points=[Point(1, 1)]),  # type: ignore[arg-type]
    "a dict where a dataclass is declared": Drawing("t", {"x": 1}),  # type: ignore[arg-type]
    "named tuples": Drawing("t", Point(0, 0), turns=(Turn(3), Turn(4, 0.5), Turn(5, float("inf")))),
    "named tuples holding other values": Drawing(
        "t",
        Point(0, 0),
        turns=(Turn("3", Point(1, 2)), Turn(RECORD.id)),  # type: ignore[arg-type]
    ),
    "a named tuple subclass and a plain tuple": Drawing(
        "t",
        Point(0, 0),
        turns=(TurnPlus(1), (2, None)),  # type: ignore[arg-type]
    ),
    "values to infer": Drawing(
        {"when": datetime(2024, 1, 1, tzinfo=UTC), "id": RECORD.id, "set": {1}},
        Point(0, 0),
        tags={"err": ValueError("boom"), "gap": timedelta(seconds=3)},
    ),
}


@pytest.mark.parametrize("drawing", DRAWINGS.values(), ids=DRAWINGS.keys())
def test_dumps_for_writes_the_bytes_dumps_writes(drawing: Drawing) -> None:
    assert serde.dumps_for(Drawing)(drawing) == serde.dumps(drawing)


def test_dumps_for_raises_serde_errors_like_dumps() -> None:
    with pytest.raises(SerdeError, match="Opaque"):
        serde.dumps_for(Drawing)(Drawing(Opaque(), Point(0, 0)))


def test_dumps_for_needs_a_dataclass() -> None:
    with pytest.raises(TypeError, match="needs a dataclass"):
        serde.dumps_for(dict)


def test_whole_number_reads_a_float_rounded_and_refuses_text() -> None:
    # `WholeNumber` is written against pydantic_core (no pydantic import to define it).
    from typing import Annotated

    assert serde.load(serde.WholeNumber, 12.4) == 12
    assert serde.load(serde.WholeNumber, 12.6) == 13
    assert serde.load(Annotated[int, "doc"] | None, None) is None
    with pytest.raises(SerdeError):
        serde.load(serde.WholeNumber, "twelve")


class _Letter(Enum):
    A = "a"


@dataclass(frozen=True)
class _Inner:
    a: float
    b: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _Outer:
    x: Any
    y: list[Any]
    z: float = float("nan")
    w: Any = None
    v: int = field(default=3, init=False)


@pytest.mark.parametrize(
    "value",
    [
        _Outer(_Inner(1.5, (1, 2)), [_Inner(float("inf"), ()), {"k": {1, 2}}], w=_Letter.A),
        _Outer(datetime(2020, 1, 1), [UUID(int=5), b"xx", frozenset({"a"})]),
        _Outer(_Outer(1, []), [ValueError("boom")]),
        _Inner(-0.0, ()),
    ],
)
def test_dump_and_dumps_of_a_dataclass_are_what_pydantic_infers(value: object) -> None:
    # `dump` serializes a dataclass knowing its fields; the data must not change.
    import pydantic_core

    expected = pydantic_core.to_jsonable_python(value, fallback=serde._fallback)
    assert repr(serde.dump(value)) == repr(expected)
    assert repr(serde.dump(value)) == repr(expected)  # the cached serializer too
    assert serde.dumps(value) == pydantic_core.to_json(value, fallback=serde._fallback)


def test_a_pydantic_dataclass_keeps_its_own_serializer() -> None:
    import pydantic

    @pydantic.dataclasses.dataclass(frozen=True)
    class Money:
        cents: int

        @pydantic.field_serializer("cents")
        def _as_text(self, cents: int) -> str:
            return f"{cents / 100:.2f}"

    assert serde.dump(Money(150)) == {"cents": "1.50"}
    assert serde.dumps(Money(150)) == b'{"cents":"1.50"}'
