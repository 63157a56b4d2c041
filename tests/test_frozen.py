"""`quick_init`: the same instances as the generated `__init__`, made faster."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import Any, Generic, TypeVar

import pytest

from weakincentives._frozen import quick_init

T = TypeVar("T")


def _pair(**options: Any) -> tuple[type[Any], type[Any]]:
    """The same frozen dataclass twice: as generated, and with `quick_init`."""

    def make() -> type[Any]:
        class Value:
            a: int
            b: str = "b"
            c: tuple[int, ...] = field(default_factory=lambda: (1, 2))
            d: list[int] = field(default_factory=list, kw_only=True)
            e: float = field(default=0.5, kw_only=True)
            f: str = field(default="f", init=False)
            g: list[str] = field(default_factory=lambda: ["g"], init=False)

        Value.__annotations__ = {
            "a": int, "b": str, "c": tuple, "d": list, "e": float, "f": str, "g": list,
        }  # fmt: skip
        return dataclass(frozen=True, **options)(Value)

    return make(), quick_init(make())


@pytest.mark.parametrize("slots", [False, True])
def test_instances_equal_the_generated_init(slots: bool) -> None:
    plain, quick = _pair(slots=slots)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {}), ((1, "x", (3,)), {"d": [4], "e": 1.5}), ((), {"a": 2}),
    ]  # fmt: skip
    for args, kwargs in calls:
        want, got = plain(*args, **kwargs), quick(*args, **kwargs)
        assert dataclasses.astuple(got) == dataclasses.astuple(want)
        assert repr(got) == repr(want)
    # A default factory makes a new value per instance, as the generated init does.
    assert quick(1).d is not quick(1).d
    assert quick(1).g == ["g"]


@pytest.mark.parametrize("slots", [False, True])
def test_the_class_stays_frozen(slots: bool) -> None:
    _, quick = _pair(slots=slots)
    value = quick(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.a = 2


def test_signature_and_errors_are_the_generated_ones() -> None:
    plain, quick = _pair(slots=True)
    assert str(inspect.signature(quick)) == str(inspect.signature(plain))
    assert str(inspect.signature(quick.__init__)) == str(inspect.signature(plain.__init__))
    own = inspect.signature(quick.__init__, follow_wrapped=False)
    assert str(own) == str(inspect.signature(plain.__init__))
    calls: list[Callable[[type[Any]], object]] = [
        lambda cls: cls(), lambda cls: cls(1, 2, 3, 4), lambda cls: cls(1, z=2),
    ]  # fmt: skip
    for call in calls:
        with pytest.raises(TypeError) as want:
            call(plain)
        with pytest.raises(TypeError) as got:
            call(quick)
        assert str(got.value) == str(want.value)


def test_post_init_runs() -> None:
    @quick_init
    @dataclass(frozen=True, slots=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")

    assert Checked(1).value == 1
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)


def test_generic_class_without_slots() -> None:
    @quick_init
    @dataclass(frozen=True)
    class Box(Generic[T]):
        item: T
        tags: tuple[str, ...] = ()

    box = Box[int](3)
    assert (box.item, box.tags) == (3, ())
    assert box == Box(3)


def test_refuses_what_it_cannot_reproduce() -> None:
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class WithInitVar:
        a: int
        b: InitVar[int] = 0

    with pytest.raises(TypeError, match="frozen dataclass"):
        quick_init(Mutable)
    with pytest.raises(TypeError, match="InitVar"):
        quick_init(WithInitVar)
    with pytest.raises(TypeError, match="frozen dataclass"):
        quick_init(int)


def test_annotations_resolve_in_the_module_as_the_originals_do() -> None:
    from weakincentives.runtime.session import ChatMessage, PromptExecuted

    for cls in (ChatMessage, PromptExecuted):
        init: Any = cls.__init__
        assert typing.get_type_hints(init) == typing.get_type_hints(init.__wrapped__)
