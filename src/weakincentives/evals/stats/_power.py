"""Power analysis: the smallest effect a run can detect and the n a wanted effect needs.

All formulas are the usual normal approximations, e.g. `(z_alpha + z_power) * sd / sqrt(n)`.
For a two-sided test they ignore the chance of rejecting in the wrong tail, which is
below 1e-5 at the conventional alpha = 0.05 and power = 0.8.
"""

from __future__ import annotations

import math

from weakincentives.errors import InvalidStatisticError

from ._normal import as_count, check_probability, normal_ppf

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


def minimum_detectable_effect(
    n: int, *, sd: float, alpha: float = 0.05, power: float = 0.8, two_sided: bool = True
) -> float:
    """Return the smallest true mean difference a z-test on `n` values detects with `power`.

    For a paired A/B comparison `n` is the number of pairs and `sd` the standard
    deviation of the per-sample differences; for one mean it is that mean's `sd`.

    Raises:
        InvalidStatisticError: `n < 1`, `sd` negative or not finite, or `alpha`/`power`
            outside `(0, 1)`.
    """
    n = as_count("n", n, minimum=1)
    _check_sd(sd)
    return _z_sum(alpha, power, two_sided) * sd / math.sqrt(n)


def required_sample_size(
    effect: float, *, sd: float, alpha: float = 0.05, power: float = 0.8, two_sided: bool = True
) -> int:
    """Return the number of values (pairs, for a paired test) to detect `effect` with `power`.

    The inverse of `minimum_detectable_effect`: `ceil(((z_alpha + z_power) * sd / effect)**2)`,
    at least 1.

    Raises:
        InvalidStatisticError: `effect` is zero or not finite, `sd` is negative, or
            `alpha`/`power` are outside `(0, 1)`.
    """
    if not (math.isfinite(effect) and effect != 0.0):
        raise InvalidStatisticError(f"effect must be a finite non-zero number, got {effect!r}")
    _check_sd(sd)
    n = (_z_sum(alpha, power, two_sided) * sd / effect) ** 2
    return max(1, math.ceil(n - _CEIL_SLACK))


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
