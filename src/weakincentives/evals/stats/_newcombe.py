"""Newcombe's hybrid score interval for the difference of two paired proportions."""

from __future__ import annotations

import math

from weakincentives.errors import InvalidStatisticError

from ._intervals import Interval, wilson_bounds
from ._normal import critical_value

__all__ = ["NEWCOMBE", "newcombe_paired_interval"]

NEWCOMBE = "Newcombe hybrid score"
"""`interval_method` of a paired comparison whose interval is `newcombe_paired_interval`."""


def newcombe_paired_interval(
    both: float,
    only_first: float,
    only_second: float,
    neither: float,
    *,
    confidence: float = 0.95,
) -> Interval:
    """Interval of `p1 - p2` for two proportions measured on the same units (paired).

    The four counts are the paired 2x2 table: units where both outcomes are 1, only the
    first, only the second, neither. `p1 = (both + only_first) / n` and
    `p2 = (both + only_second) / n`. This is Newcombe's hybrid score interval for paired
    data with the continuity-free phi correction, method 10 in R. G. Newcombe (1998),
    "Improved confidence intervals for the difference between binomial proportions based
    on paired data", Statistics in Medicine 17, 2635-2650: the Wilson intervals
    `[l1, u1]` and `[l2, u2]` of the two margins are combined as

        low  = d - sqrt((p1 - l1)**2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)**2)
        high = d + sqrt((p2 - l2)**2 - 2 phi (p2 - l2)(u1 - p1) + (u1 - p1)**2)

    where `phi` is the correlation of the table, shrunk towards 0 by `n / 2` when positive
    (0 when a margin is empty). Unlike the Wald interval it never has zero width: with
    every pair agreeing, or every pair moving the same way, the Wilson margins still
    carry the uncertainty of `n` units. It matches the worked example (the Cavo et al.
    2012 table) in Fagerland, Lydersen and Laake (2014), "Recommended tests and confidence
    intervals for paired binomial proportions", Statistics in Medicine 33, 2850-2875.

    Counts may be fractional (an effective number of units, e.g. clusters).

    Raises:
        InvalidStatisticError: a count is negative or not finite, all are zero, or
            `confidence` is not in `(0, 1)`.
    """
    counts = (both, only_first, only_second, neither)
    if not all(math.isfinite(c) and c >= 0 for c in counts):
        raise InvalidStatisticError(f"paired counts must be finite and >= 0, got {counts!r}")
    n = sum(counts)
    if n <= 0:
        raise InvalidStatisticError("the paired table is empty; pass at least one pair")
    z = critical_value(confidence)
    first, second = both + only_first, both + only_second
    p1, p2 = first / n, second / n
    l1, u1 = wilson_bounds(p1, n, z)
    l2, u2 = wilson_bounds(p2, n, z)
    phi = _phi(counts, n)
    d = p1 - p2
    lower = (p1 - l1) ** 2 - 2.0 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    upper = (p2 - l2) ** 2 - 2.0 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2
    low = max(d - math.sqrt(max(lower, 0.0)), -1.0)
    high = min(d + math.sqrt(max(upper, 0.0)), 1.0)
    return Interval(low, high)


def _phi(counts: tuple[float, float, float, float], n: float) -> float:
    """Newcombe's corrected phi: `(ad - bc - n/2) / sqrt(margins)` if `ad - bc > n/2`, etc."""
    a, b, c, d = counts
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins <= 0:
        return 0.0
    cross = a * d - b * c
    if cross > n / 2.0:
        corrected = cross - n / 2.0
    elif cross >= 0:
        corrected = 0.0
    else:
        corrected = cross
    return corrected / math.sqrt(margins)
