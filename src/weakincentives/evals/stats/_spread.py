"""What a paired comparison computes from the spread of its differences.

`independent_spread` (pairs are the units) and `clustered_spread` (clusters are) return
the standard error, the interval, the test and the detectable effect of one comparison,
and what its bootstrap resamples; `_paired.py` assembles them into `PairedComparison`.
Every unknown number comes with a reason (`Spread.reasons`).
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, NamedTuple

from ._intervals import Bounds, bounded_interval, cr1_se, equal_cluster_means
from ._mcnemar_power import mcnemar_detectable_effect
from ._newcombe import NEWCOMBE, newcombe_paired_interval
from ._power import minimum_detectable_effect
from ._tdist import t_critical_value, t_two_sided_p

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "CLUSTERED_T_TEST",
    "MDE_POWER",
    "PAIRED_T_TEST",
    "SIGN_TEST",
    "Spread",
    "Units",
    "clustered_spread",
    "independent_spread",
    "sample_sd",
    "unknown",
]

PAIRED_T_TEST = "paired t-test"
"""`test_name` of independent pairs: Student's t on the differences, `n - 1` df."""
CLUSTERED_T_TEST = "cluster-robust t-test"
"""`test_name` of clustered pairs: CR1 standard error, t with `n_clusters - 1` df."""
SIGN_TEST = "sign test"
"""`test_name` when the differences have no spread: the exact sign test on the units."""

# Power at which the detectable effect is reported.
MDE_POWER = 0.8

_NAN = math.nan


class Spread(NamedTuple):
    """The numbers of one comparison that depend on the spread of its differences."""

    sd: float
    se: float
    naive_se: float
    df: float
    statistic: float
    p_value: float
    test_name: str
    low: float
    high: float
    interval_method: str
    mde: float
    reasons: dict[str, str]


class Units(NamedTuple):
    """The pass/fail table of binary pairs: both pass, only treatment, only baseline, neither."""

    both: float
    only_treatment: float
    only_baseline: float
    neither: float


def unknown(reason: str, *, sd: float = _NAN, naive_se: float = _NAN, test: str) -> Spread:
    """A spread whose interval, test and detectable effect are unknown for `reason`."""
    reasons = dict.fromkeys(
        ("interval", "p_value", "minimum_detectable_effect", "bootstrap"), reason
    )
    return Spread(
        sd, _NAN, naive_se, _NAN, _NAN, _NAN, test, _NAN, _NAN, "", _NAN, reasons
    )  # fmt: skip


def sample_sd(differences: npt.NDArray[np.float64]) -> float:
    """Sample standard deviation (`ddof=1`) of `n >= 2` values, exactly 0 when all are equal."""
    import numpy as np

    # Equal values have exactly zero spread; np.std may return a rounding error instead.
    if bool(np.all(differences == differences[0])):
        return 0.0
    return float(np.std(differences, ddof=1))


def _t_test(delta: float, se: float, df: float, units: int) -> tuple[float, float, str]:
    """`(statistic, p_value, test_name)` of `delta == 0`, or the sign test when `se == 0`.

    With no spread every unit moved by the same `delta`: the exact sign test over the
    `units` (pairs or clusters) gives `2 * 0.5 ** units` (3 pairs that all improve: 0.25),
    where a t statistic would be infinite. `statistic` is then `+-inf` (0 with no effect).
    """
    if se > 0:
        statistic = delta / se
        return statistic, t_two_sided_p(statistic, df), ""
    if delta == 0.0:
        return 0.0, 1.0, SIGN_TEST
    return math.copysign(math.inf, delta), min(1.0, 2.0 * 0.5**units), SIGN_TEST


def _no_delta(delta: float, differences: npt.NDArray[np.float64]) -> float:
    """`delta`, or 0.0 when it is within the rounding error of a mean of `differences`."""
    import numpy as np

    if abs(delta) <= sys.float_info.epsilon * float(np.abs(differences).sum()):
        return 0.0
    return delta


def _bounded(
    delta: float, half_width: float, bounds: Bounds | None, units: float, confidence: float
) -> tuple[float, float, str, str]:
    """`(low, high, method, reason)` of `delta +- half_width` within the differences' range."""
    from ._normal import critical_value

    if half_width == 0.0 and bounds is None:
        return _NAN, _NAN, "", "no spread: every difference is equal and the scores are unbounded"
    low, high, method = bounded_interval(
        delta, half_width, bounds, n=units, z=critical_value(confidence)
    )
    return low, high, method, ""


def independent_spread(
    differences: npt.NDArray[np.float64],
    delta: float,
    *,
    units: Units | None,
    bounds: Bounds | None,
    confidence: float,
) -> Spread:
    """The spread of independent pairs: paired t-test, Newcombe for binary scores.

    `units` is the pass/fail table when the scores are binary (then the interval is
    Newcombe's and the detectable effect McNemar's), else None.
    """
    n = differences.size
    alpha = 1.0 - confidence
    if n < 2 and units is None:
        return unknown("1 pair: no spread to estimate", test=PAIRED_T_TEST)
    sd = sample_sd(differences) if n >= 2 else _NAN
    se = sd / math.sqrt(n)
    df = float(n - 1) if n >= 2 else _NAN
    delta = _no_delta(delta, differences)
    reasons: dict[str, str] = {}
    if n >= 2:
        statistic, p_value, test = _t_test(delta, se, df, n)
    else:
        statistic, p_value, test = _NAN, _NAN, ""
        reasons["p_value"] = "1 pair: no spread to estimate"
    if units is not None:
        interval = newcombe_paired_interval(*units, confidence=confidence)
        low, high, method = interval.low, interval.high, NEWCOMBE
        discordant = (units.only_baseline + units.only_treatment) / n
        mde = mcnemar_detectable_effect(n, discordant=discordant, alpha=alpha, power=MDE_POWER)
        if math.isnan(mde):
            reasons["minimum_detectable_effect"] = (
                "no discordant pairs to estimate it from"
                if discordant == 0
                else f"{n} {_plural(n, 'pair')} cannot reach {MDE_POWER:.0%} power with McNemar"
            )
    else:
        half = t_critical_value(confidence, df) * se
        low, high, method, why = _bounded(delta, half, bounds, n, confidence)
        if why:
            reasons["interval"] = why
        if sd > 0:
            mde = minimum_detectable_effect(n, sd=sd, alpha=alpha, power=MDE_POWER)
        else:
            mde = _NAN
            reasons["minimum_detectable_effect"] = "no spread: every difference is equal"
    if not sd > 0:
        reasons["bootstrap"] = _no_spread_reason(n)
    return Spread(
        sd, se, se, df, statistic, p_value, test or PAIRED_T_TEST, low, high,
        method, mde, reasons,
    )  # fmt: skip


def clustered_spread(
    differences: npt.NDArray[np.float64],
    delta: float,
    *,
    codes: npt.NDArray[np.intp],
    n_clusters: int,
    units: Units | None,
    bounds: Bounds | None,
    confidence: float,
) -> Spread:
    """The spread of clustered pairs: CR1 standard error and t with `n_clusters - 1` df.

    When every cluster has the same mean difference (no spread between clusters), the
    interval falls back to Newcombe's over the clusters for binary scores (`units` scaled
    to `n_clusters` units) or the bounded worst case (`bounded_interval`), never to
    zero width, and the test to the sign test over the clusters.
    """
    n = differences.size
    sd = sample_sd(differences) if n >= 2 else _NAN
    naive_se = sd / math.sqrt(n)
    if n_clusters < 2:
        return unknown(
            "1 sample: no spread between samples to estimate",
            sd=sd, naive_se=naive_se, test=CLUSTERED_T_TEST,
        )  # fmt: skip
    flat = sd == 0.0 or equal_cluster_means(differences, codes, n_clusters)
    se = 0.0 if flat else cr1_se(differences - delta, codes, n_clusters)
    df = float(n_clusters - 1)
    delta = _no_delta(delta, differences)
    statistic, p_value, test = _t_test(delta, se, df, n_clusters)
    reasons: dict[str, str] = {}
    if se == 0.0 and units is not None:
        scale = n_clusters / n
        interval = newcombe_paired_interval(*(u * scale for u in units), confidence=confidence)
        low, high, method = interval.low, interval.high, NEWCOMBE + " over samples"
    else:
        half = t_critical_value(confidence, df) * se
        low, high, method, why = _bounded(delta, half, bounds, n_clusters, confidence)
        if why:
            reasons["interval"] = why
    if se > 0:
        mde = minimum_detectable_effect(1, sd=se, alpha=1.0 - confidence, power=MDE_POWER, df=df)
    else:
        mde = _NAN
        reasons["minimum_detectable_effect"] = "no spread: every sample has the same difference"
        reasons["bootstrap"] = "no spread: every sample has the same difference"
    return Spread(
        sd, se, naive_se, df, statistic, p_value, test or CLUSTERED_T_TEST, low, high,
        method, mde, reasons,
    )  # fmt: skip


def _no_spread_reason(n: int) -> str:
    return (
        "1 pair: nothing to resample"
        if n < 2
        else "no spread: every pair has the same difference, so every resample does too"
    )


def _plural(n: float, word: str) -> str:
    return word if n == 1 else word + "s"
