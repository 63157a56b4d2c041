"""`Floats`: a read-only sequence of floats kept as one `float64` buffer.

A paired comparison keeps its per-pair differences (`PairedComparison.differences`) for
whoever wants to look at them. As a tuple that costs a Python float and a pointer per
pair, about 40 bytes; a report over a stored run of a million pairs would hold 40 MB
of them. `Floats` keeps the 8 bytes of each value, and reads like the tuple did:
indexing, slicing (to a tuple), iteration, `len`, and equality with any sequence of the
same values.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

__all__ = ["Floats"]


class Floats(Sequence[float]):
    """A read-only sequence of floats stored as `float64` (see the module docstring)."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[float] | bytes = ()) -> None:
        """Keep `values` (floats, or the raw bytes of native `float64` values)."""
        self._values = array("d")
        if isinstance(values, bytes):
            self._values.frombytes(values)
        else:
            self._values.extend(values)

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> float: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[float, ...]: ...
    def __getitem__(self, index: int | slice) -> float | tuple[float, ...]:
        if isinstance(index, slice):
            return tuple(self._values[index])
        return self._values[index]

    def __iter__(self) -> Iterator[float]:
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Floats):
            return self._values == other._values
        if isinstance(other, tuple | list):
            return len(self) == len(other) and all(
                a == b for a, b in zip(self._values, other, strict=True)
            )
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __repr__(self) -> str:
        return f"Floats({len(self)} values)"
