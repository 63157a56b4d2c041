"""McNemar's test for paired binary outcomes (used by `paired_comparison`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._normal import as_count

__all__ = ["EXACT_MCNEMAR_LIMIT", "McNemarResult", "mcnemar"]

EXACT_MCNEMAR_LIMIT = 25
"""McNemar's exact binomial test is used up to this many discordant pairs (inclusive)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McNemarResult:
    """McNemar's test for paired binary outcomes; only discordant pairs carry information."""

    b: int
    """Discordant pairs of one kind: in `paired_comparison`, only the baseline passed."""
    c: int
    """Discordant pairs of the other kind: in `paired_comparison`, only the treatment passed."""
    statistic: float
    """`min(b, c)` for the exact test; `(|b - c| - 1)**2 / (b + c)` for the chi-square test."""
    p_value: float
    """Two-sided p-value."""
    exact: bool
    """Whether the exact binomial test was used (rather than chi-square)."""


def mcnemar(b: int, c: int, *, exact: bool | None = None) -> McNemarResult:
    """Run McNemar's test on the two discordant counts of a paired 2x2 table.

    By default the exact binomial test is used when `b + c <= 25` and the chi-square test
    with continuity correction otherwise; pass `exact` to force one. The numbers match
    statsmodels `mcnemar(table, exact=..., correction=True)`, including its statistic of
    `1 / (b + c)` when `b == c` in the chi-square test. With no discordant pairs the
    p-value is 1.

    Raises:
        InvalidStatisticError: a count is negative or not an integer.
    """
    b = as_count("b", b)
    c = as_count("c", c)
    total = b + c
    use_exact = total <= EXACT_MCNEMAR_LIMIT if exact is None else exact
    if use_exact:
        smaller = min(b, c)
        # Integer arithmetic, then one correctly rounded division: exact for any n.
        tail = sum(math.comb(total, i) for i in range(smaller + 1))
        p_value = min(1.0, 2 * tail / 2**total)
        return McNemarResult(b=b, c=c, statistic=float(smaller), p_value=p_value, exact=True)
    if total == 0:
        return McNemarResult(b=b, c=c, statistic=0.0, p_value=1.0, exact=False)
    statistic = (abs(b - c) - 1.0) ** 2 / total
    # The chi-square(1) survival function is P(|Z| > sqrt(x)).
    p_value = math.erfc(math.sqrt(statistic / 2.0))
    return McNemarResult(b=b, c=c, statistic=statistic, p_value=p_value, exact=False)
