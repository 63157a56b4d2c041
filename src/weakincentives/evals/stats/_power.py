"""Power analysis: the smallest effect a run can detect and the n a wanted effect needs.

Means and score differences are tested with Student's t, so their power is the exact
power of the t-test (`t_test_power`); pass rates of paired runs are tested with McNemar
(see `_mcnemar_power.py`). `required_sample_size_proportions` (independent groups) is
the usual normal approximation.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from weakincentives.errors import InvalidStatisticError

from ._normal import as_count, check_probability, normal_ppf
from ._tdist import t_ppf

if TYPE_CHECKING:  # numpy itself is imported on first use (see the package docstring)
    import numpy as np
    import numpy.typing as npt

# Gauss-Legendre panels and nodes per panel for the chi distribution of the t-test's SE.
_PANELS = 8
_NODES = 48
# Guards `ceil` against a product that lands a rounding error above an exact integer.
_CEIL_SLACK = 1e-9


def _z_sum(alpha: float, power: float, two_sided: bool) -> float:
    check_probability("alpha", alpha, open_interval=True)
    check_probability("power", power, open_interval=True)
    z_alpha = -normal_ppf(alpha / 2.0 if two_sided else alpha)
    return z_alpha + normal_ppf(power)


def _check_sd(sd: float) -> None:
    if not (math.isfinite(sd) and sd >= 0.0):
        raise InvalidStatisticError(f"sd must be a finite number >= 0, got {sd!r}")


def t_test_power(
    effect: float, *, se: float, df: float, alpha: float = 0.05, two_sided: bool = True
) -> float:
    """Return the power of the t-test of a mean whose standard error is `se`, at `effect`.

    Exact for Student's t with `df` degrees of freedom (the noncentral t distribution):
    the statistic is `(Z + effect / se) / S` with `S**2 ~ chi2(df) / df`, and the power
    `E_S[P(Z > t_c S - effect / se) + P(Z < -t_c S - effect / se)]` is integrated over the
    chi distribution of `S` by Gauss-Legendre quadrature. It matches statsmodels
    `TTestPower().power` to about 1e-10. For `n` pairs, `se = sd / sqrt(n)`, `df = n - 1`.

    Raises:
        InvalidStatisticError: `se` is not > 0, `df` not > 0, or `alpha` outside `(0, 1)`.
    """
    import numpy as np

    check_probability("alpha", alpha, open_interval=True)
    if not (math.isfinite(se) and se > 0):
        raise InvalidStatisticError(f"se must be a finite number > 0, got {se!r}")
    t_c = _t_upper(alpha / 2.0 if two_sided else alpha, df)
    shift = abs(effect) / se
    s, weights = _chi_nodes(df)
    x_upper = (shift - t_c * s) / math.sqrt(2.0)
    density = _erfc(-x_upper) / 2.0
    if two_sided:
        density = density + _erfc((t_c * s + shift) / math.sqrt(2.0)) / 2.0
    return float(min(1.0, float(np.dot(weights, density))))


def _erfc(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    import numpy as np

    return np.fromiter((math.erfc(v) for v in x.tolist()), np.float64, x.size)


@functools.lru_cache(maxsize=512)
def _t_upper(tail: float, df: float) -> float:
    return t_ppf(1.0 - tail, df)


@functools.lru_cache(maxsize=1)
def _legendre() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    import numpy as np

    nodes, weights = np.polynomial.legendre.leggauss(_NODES)
    return nodes, weights


@functools.lru_cache(maxsize=512)
def _chi_nodes(df: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Quadrature nodes and weights (density included) for `S = sqrt(chi2(df) / df)`."""
    import numpy as np

    if not (math.isfinite(df) and df > 0):
        raise InvalidStatisticError(f"degrees of freedom must be a finite number > 0, got {df!r}")
    # S has mean about 1 and sd about 1 / sqrt(2 df); 12 sd below and 14 above (it is
    # skewed to the right) hold all but about 1e-30 of it.
    sd = 1.0 / math.sqrt(2.0 * df)
    low, high = max(0.0, 1.0 - 12.0 * sd), 1.0 + 14.0 * sd
    nodes, weights = _legendre()
    # With few degrees of freedom the critical value is large and the integrand turns from
    # 0 to 1 over a short stretch of S: more panels resolve it.
    edges = np.linspace(low, high, (_PANELS if df >= 5 else 8 * _PANELS) + 1)
    half = (edges[1:] - edges[:-1])[:, None] / 2.0
    s = ((edges[1:] + edges[:-1])[:, None] / 2.0 + half * nodes[None, :]).ravel()
    w = (half * weights[None, :]).ravel()
    log_density = (
        math.log(2.0)
        + (df / 2.0) * math.log(df / 2.0)
        - math.lgamma(df / 2.0)
        + (df - 1.0) * np.log(s)
        - df * s * s / 2.0
    )
    weighted = w * np.exp(log_density)
    s.flags.writeable = False  # cached: shared by every call with this df
    weighted.flags.writeable = False
    return s, weighted


def solve_increasing(
    f: Callable[[float], float], target: float, low: float, high: float, *, rel_tol: float
) -> float:
    """Return `x` in `[low, high]` with `f(x) = target` for an increasing `f` (Illinois).

    Needs `f(low) < target <= f(high)`; the answer is the upper end of the final bracket,
    so `f(answer) >= target`. Regula falsi with the Illinois modification converges in a
    handful of steps where bisection would take dozens.
    """
    f_low, f_high = f(low) - target, f(high) - target
    side = 0
    for _ in range(200):
        if high - low <= rel_tol * high or f_high == 0.0:
            break
        x = high - f_high * (high - low) / (f_high - f_low)
        if not low < x < high:
            x = (low + high) / 2.0
        f_x = f(x) - target
        if f_x >= 0.0:
            high, f_high = x, f_x
            if side == 1:
                f_low /= 2.0
            side = 1
        else:
            low, f_low = x, f_x
            if side == -1:
                f_high /= 2.0
            side = -1
    return high


def minimum_detectable_effect(
    n: int,
    *,
    sd: float,
    alpha: float = 0.05,
    power: float = 0.8,
    two_sided: bool = True,
    df: float | None = None,
) -> float:
    """Return the smallest true mean difference a t-test on `n` values detects with `power`.

    For a paired A/B comparison `n` is the number of pairs and `sd` the standard
    deviation of the per-sample differences; for one mean it is that mean's `sd`. The
    test is Student's t with `df = n - 1` degrees of freedom (pass `df` for another, e.g.
    `n_clusters - 1` with `n=1, sd=se` for a cluster-robust test), and the power is exact
    (`t_test_power`), so at small n the effect is larger than the normal formula
    `(z_alpha + z_power) * sd / sqrt(n)`, which it approaches as n grows. 0 when `sd == 0`.

    Raises:
        InvalidStatisticError: `n < 2` without `df`, `sd` negative or not finite, or
            `alpha`/`power` outside `(0, 1)`.
    """
    n = as_count("n", n, minimum=1 if df is not None else 2)
    _check_sd(sd)
    check_probability("alpha", alpha, open_interval=True)
    check_probability("power", power, open_interval=True)
    dof = float(n - 1) if df is None else df
    if sd == 0.0:
        return 0.0
    se = sd / math.sqrt(n)

    def power_at(effect: float) -> float:
        return t_test_power(effect, se=se, df=dof, alpha=alpha, two_sided=two_sided)

    # Bracket around the shifted-t approximation, then solve on the exact power.
    guess = (_t_upper(alpha / 2.0 if two_sided else alpha, dof) + t_ppf(power, dof)) * se
    low, high = guess * 0.9, guess * 1.1
    while power_at(low) >= power:
        low /= 2.0
    while power_at(high) < power:
        high *= 2.0
    return solve_increasing(power_at, power, low, high, rel_tol=1e-10)


def required_sample_size(
    effect: float, *, sd: float, alpha: float = 0.05, power: float = 0.8, two_sided: bool = True
) -> int:
    """Return the number of values (pairs, for a paired t-test) to detect `effect` with `power`.

    The smallest `n >= 2` whose exact t-test power (`t_test_power` with `se = sd /
    sqrt(n)`, `df = n - 1`) reaches `power`; it equals `ceil` of statsmodels
    `TTestPower().solve_power(effect / sd, ...)`. 2 when `sd == 0`.

    Raises:
        InvalidStatisticError: `effect` is zero or not finite, `sd` is negative, or
            `alpha`/`power` are outside `(0, 1)`.
    """
    if not (math.isfinite(effect) and effect != 0.0):
        raise InvalidStatisticError(f"effect must be a finite non-zero number, got {effect!r}")
    _check_sd(sd)
    check_probability("power", power, open_interval=True)
    z_sum = _z_sum(alpha, power, two_sided)
    if sd == 0.0:
        return 2

    def enough(n: int) -> bool:
        se = sd / math.sqrt(n)
        return t_test_power(effect, se=se, df=n - 1, alpha=alpha, two_sided=two_sided) >= power

    # The normal answer is (about) a lower bound; the t answer is a few pairs above it.
    low = max(1, math.ceil((z_sum * sd / effect) ** 2 - _CEIL_SLACK) - 2)
    while low > 1 and enough(low):
        low //= 2
    step = 1
    high = low + step
    while not enough(high):
        low, step = high, step * 2
        high = low + step
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return max(2, high)


def required_sample_size_proportions(
    p1: float, p2: float, *, alpha: float = 0.05, power: float = 0.8, two_sided: bool = True
) -> int:
    """Return the samples needed *per group* to tell pass rates `p1` and `p2` apart.

    For two independent groups of equal size (unpaired runs). It uses Cohen's effect size
    `h = 2 asin(sqrt(p1)) - 2 asin(sqrt(p2))` and `n = 2 * ((z_alpha + z_power) / h)**2`,
    the same as statsmodels `NormalIndPower().solve_power(proportion_effectsize(p1, p2))`.
    A paired design usually needs far fewer samples; see `required_sample_size`.

    Raises:
        InvalidStatisticError: a rate is outside `[0, 1]`, `p1 == p2`, or `alpha`/`power`
            are outside `(0, 1)`.
    """
    check_probability("p1", p1)
    check_probability("p2", p2)
    if p1 == p2:
        raise InvalidStatisticError(f"p1 and p2 are both {p1!r}; no sample size detects no effect")
    h = 2.0 * math.asin(math.sqrt(p1)) - 2.0 * math.asin(math.sqrt(p2))
    n = 2.0 * (_z_sum(alpha, power, two_sided) / h) ** 2
    return max(1, math.ceil(n - _CEIL_SLACK))
