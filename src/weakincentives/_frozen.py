"""`quick_init`: a frozen dataclass's `__init__` that stores its fields directly.

A frozen dataclass's generated `__init__` sets each field through
`object.__setattr__(self, name, value)` (its own `__setattr__` refuses every assignment),
about 150 ns a field. The records of one agent run (messages, events, usages, the
response) are a dozen such values made per sample, so that adds up. `quick_init` gives
the class an `__init__` with the same parameters, defaults, default factories and
`__post_init__` call that stores each field through its slot descriptor (slotted classes)
or the instance's `__dict__`: the same instance, in about half the time. The class stays
frozen: assigning a field afterwards still raises `FrozenInstanceError`.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, TypeVar

__all__ = ["quick_init"]

T = TypeVar("T")


class _Factory:
    """The default of a parameter whose field has a default factory (as `dataclasses`)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def quick_init(cls: type[T]) -> type[T]:
    """Replace the `__init__` of frozen dataclass `cls` (see the module's docs).

    Apply it above `@dataclass(frozen=True, ...)`. The new `__init__` keeps the generated
    one as `__wrapped__`, so `inspect.signature` shows the same signature.

    Raises:
        TypeError: `cls` is not a frozen dataclass with a generated `__init__`, or it has
            `InitVar` pseudo-fields (which this does not pass on to `__post_init__`).
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not params.init:
        raise TypeError(f"quick_init needs a frozen dataclass with an __init__, got {cls!r}")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]  # a dataclass: checked above
    if len(fields) != len(cls.__dataclass_fields__):  # type: ignore[attr-defined]
        raise TypeError(f"quick_init does not handle InitVar or ClassVar fields ({cls!r})")
    slotted = "__slots__" in vars(cls)
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = [] if slotted else ["_fields = self.__dict__"]
    for i, f in enumerate(fields):
        has_default = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_default:
            namespace[f"_default_{i}"] = f.default
        elif has_factory:
            namespace[f"_factory_{i}"] = f.default_factory
        if f.init:
            parameter = value = f.name
            if has_default:
                parameter = f"{f.name}=_default_{i}"
            elif has_factory:
                parameter = f"{f.name}=_FACTORY"
                value = f"_factory_{i}() if {f.name} is _FACTORY else {f.name}"
            (keyword if f.kw_only else positional).append(parameter)
        elif has_default:
            value = f"_default_{i}"
        elif has_factory:
            value = f"_factory_{i}()"
        else:
            continue  # init=False without a default: `dataclasses` leaves it unset too
        if slotted:
            namespace[f"_set_{i}"] = vars(cls)[f.name].__set__
            body.append(f"_set_{i}(self, {value})")
        else:
            body.append(f"_fields[{f.name!r}] = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    lines = "\n".join(f"        {line}" for line in body or ["pass"])
    # As `dataclasses` does: the helpers are closure cells of an outer function, and the
    # module's globals are the function's, so its annotations resolve as the original's.
    source = (
        f"def __create_fn__({', '.join(namespace)}):\n"
        f"    def __init__({signature}):\n{lines}\n"
        "    return __init__\n"
    )
    module = sys.modules.get(cls.__module__)
    made: dict[str, Any] = {}
    exec(source, vars(module) if module is not None else {}, made)
    init = made["__create_fn__"](**namespace)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    init.__wrapped__ = cls.__init__
    cls.__init__ = init  # type: ignore[method-assign]  # replacing the generated one is the point
    return cls
