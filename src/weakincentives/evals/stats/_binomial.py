"""The binomial log-probability `log P(X = x)`, `X ~ Binomial(n, p)`, for arrays, accurately.

`log C(n, x)` as a difference of log-gammas loses the digits of the log-gammas' size: at
n = 10^6 they are about 10^7, so the probability comes out with a relative error near
10^-9. Loader's saddle-point form (C. Loader, "Fast and accurate computation of binomial
probabilities", 2000; R's `dbinom`) writes it with small terms only, the Stirling-series
remainders and the deviance `bd0`, and is accurate to about 1e-14 relative for any n.

The parts that do not depend on `p` (`stirling_part`) are computed once for a set of
`(x, n)` and reused for every `p` (`log_pmf`): McNemar's power evaluates the same counts
at many rates while it searches for a detectable effect.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["log_pmf", "stirling_part"]

_LN_2PI = math.log(2.0 * math.pi)
_LN_SQRT_2PI = 0.5 * _LN_2PI
# Terms of the Stirling series of log(n!) - ((n + 1/2) log n - n + log sqrt(2 pi)).
_S0, _S1, _S2, _S3, _S4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
# Below 16 the series is not accurate enough: exact values (lgamma of a small number).
_SMALL = tuple(
    0.0 if n == 0 else math.lgamma(n + 1.0) - (n + 0.5) * math.log(n) + n - _LN_SQRT_2PI
    for n in range(16)
)
# bd0's series runs where |v| < 0.1, so each term is below 1/100 of the one before: after
# 9 terms the rest is below 1e-18 of the sum.
_BD0_TERMS = 9


def _stirlerr(n: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """`log(n!) - ((n + 1/2) log n - n + log sqrt(2 pi))` for whole numbers `n >= 0`."""
    import numpy as np

    small = n <= 15
    big = np.where(small, 16.0, n)
    nn = big * big
    series = np.where(
        big > 500,
        (_S0 - _S1 / nn) / big,
        np.where(
            big > 80,
            (_S0 - (_S1 - _S2 / nn) / nn) / big,
            np.where(
                big > 35,
                (_S0 - (_S1 - (_S2 - _S3 / nn) / nn) / nn) / big,
                (_S0 - (_S1 - (_S2 - (_S3 - _S4 / nn) / nn) / nn) / nn) / big,
            ),
        ),
    )
    table = np.asarray(_SMALL)[np.where(small, n, 0).astype(np.int64)]
    return np.where(small, table, series)


def _bd0(x: npt.NDArray[np.float64], mean: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Loader's deviance `x log(x / mean) + mean - x`, without its cancellation near `mean`.

    Needs `x > 0` and `mean > 0`.
    """
    import numpy as np

    diff = x - mean
    near = np.abs(diff) < 0.1 * (x + mean)
    v = np.where(near, diff / (x + mean), 0.0)
    total = diff * v
    term = 2.0 * x * v
    v2 = v * v
    for j in range(1, _BD0_TERMS + 1):
        term = term * v2
        total = total + term / (2 * j + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        far = x * np.log(x / mean) + mean - x
    return np.where(near, total, far)


def stirling_part(x: npt.NDArray[np.int64], n: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """The part of `log P(X = x)` that does not depend on `p` (for `0 < x < n`; else 0)."""
    import numpy as np

    inside = (x > 0) & (x < n)
    xf = np.where(inside, x, 1).astype(np.float64)
    nf = np.where(inside, n, 2).astype(np.float64)
    part = (
        _stirlerr(nf)
        - _stirlerr(xf)
        - _stirlerr(nf - xf)
        - 0.5 * (_LN_2PI + np.log(xf) + np.log1p(-xf / nf))
    )
    return np.where(inside, part, 0.0)


def log_pmf(
    x: npt.NDArray[np.int64],
    n: npt.NDArray[np.int64],
    p: float,
    part: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """`log P(X = x)` for `X ~ Binomial(n, p)`, elementwise; `-inf` where `x < 0` or `x > n`.

    `part` is `stirling_part(x, n)` when already known. Needs `0 < p < 1`.
    """
    import numpy as np

    if part is None:
        part = stirling_part(x, n)
    q = 1.0 - p
    inside = (x > 0) & (x < n)
    xf = np.where(inside, x, 1).astype(np.float64)
    nf = np.where(inside, n, 2).astype(np.float64)
    middle = part - _bd0(xf, nf * p) - _bd0(nf - xf, nf * q)
    nn = n.astype(np.float64)
    out = np.where(inside, middle, -np.inf)
    out = np.where(x == 0, nn * math.log1p(-p), out)
    out = np.where((x == n) & (n > 0), nn * math.log(p), out)
    return np.where((x < 0) | (x > n), -np.inf, out)
