"""Statistics of values given as counts (`{value: how many times}`), exact in any order.

A million scores of a pass/fail evaluator are two distinct values; a report that keeps
`{0.0: 412_001, 1.0: 587_999}` instead of the million floats computes the same mean,
spread and percentiles in constant memory. These functions are the one computation:
`mean_ci` of a list of values counts them first and calls `mean_ci_counts`, so a report
built from counts while results stream and one built from the results in memory give
bit-identical numbers.

- Sums are `math.fsum` over every value (each repeated its count, never materialised):
  correctly rounded, so independent of order and of how the values were grouped.
- `percentile_counts` interpolates as `numpy.percentile` (method `linear`) does over
  the sorted values, to the bit.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping

from weakincentives.errors import InvalidStatisticError

__all__ = ["ValueCounts", "count_values", "fsum_counts", "percentile_counts"]

ValueCounts = Mapping[float, int]
"""Each distinct value and how many times it occurs (counts > 0)."""


def count_values(values: Iterable[float]) -> dict[float, int]:
    """`{value: count}` of `values` (`0.0` and `-0.0` are one value, as `==` says).

    Examples:
        >>> count_values([1.0, 0.0, 1.0])
        {1.0: 2, 0.0: 1}
    """
    counts: dict[float, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def fsum_counts(counts: ValueCounts, *, shift: float = 0.0, square: bool = False) -> float:
    """The correctly rounded sum of every value (minus `shift`, squared if `square`).

    Each value enters `math.fsum` as many times as it occurs (`itertools.repeat`, not a
    list), so the result equals `math.fsum` of the values themselves.

    Examples:
        >>> fsum_counts({0.1: 10}) == math.fsum([0.1] * 10)
        True
    """

    def term(value: float) -> float:
        d = value - shift
        return d * d if square else d

    return math.fsum(
        itertools.chain.from_iterable(itertools.repeat(term(v), c) for v, c in counts.items())
    )


def percentile_counts(counts: ValueCounts, q: float) -> float:
    """The `q`-th percentile of the values, as `numpy.percentile(values, q)` gives it.

    Linear interpolation between the two sorted values around `(n - 1) * q / 100`,
    with numpy's formula (from the upper value when the fraction is 0.5 or more);
    0.0 when there are no values.

    Raises:
        InvalidStatisticError: `q` is not within [0, 100].

    Examples:
        >>> percentile_counts({1.0: 1, 2.0: 1, 10.0: 2}, 50)
        6.0
    """
    if not 0.0 <= q <= 100.0:
        raise InvalidStatisticError(f"percentile q must be within [0, 100], got {q!r}")
    n = sum(counts.values())
    if n == 0:
        return 0.0
    index = (n - 1) * (q / 100.0)
    below = math.floor(index)
    gamma = index - below
    low = _at(counts, below)
    high = _at(counts, min(below + 1, n - 1))
    diff = high - low
    if gamma >= 0.5:
        return float(high - diff * (1.0 - gamma))
    return float(low + diff * gamma)


def _at(counts: ValueCounts, position: int) -> float:
    """The value at `position` (0-based) of the sorted values."""
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if position < seen:
            return float(value)
    raise IndexError(position)  # pragma: no cover - callers stay below the total
