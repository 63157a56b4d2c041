"""Confidence intervals for rates and means, with cluster-robust standard errors."""

from __future__ import annotations

import math
import sys
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from weakincentives.errors import InvalidStatisticError

from ._counts import ValueCounts, count_values, fsum_counts
from ._normal import as_count, as_values, check_same_length, critical_value
from ._tdist import t_critical_value

if TYPE_CHECKING:  # numpy itself is imported on first use (see the package docstring)
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class Interval:
    """A closed interval `[low, high]`; both ends are NaN when it is unknown."""

    low: float
    """Lower end."""
    high: float
    """Upper end."""

    def __contains__(self, value: float) -> bool:
        return self.low <= value <= self.high

    @property
    def width(self) -> float:
        """`high - low`."""
        return self.high - self.low


@dataclass(frozen=True, slots=True, kw_only=True)
class RateEstimate:
    """A pass rate with its interval: Wilson, or cluster-robust (see `method`)."""

    successes: int
    """Number of successes (passes)."""
    n: int
    """Number of trials; errors count as trials that did not pass."""
    rate: float
    """`successes / n`, or `0.0` when `n == 0`."""
    low: float
    """Lower end of the Wilson interval."""
    high: float
    """Upper end of the Wilson interval; `(0, 1)` when `n == 0`."""
    confidence: float
    """Coverage of the interval, e.g. `0.95`."""
    method: str = "Wilson"
    """How the interval was made: `"Wilson"`, or for a clustered rate (from
    `summarize_outcomes`) `"Student t"` / `"Wilson (no spread)"` over the clusters."""
    n_clusters: int | None = None
    """Number of clusters when the interval is cluster-robust, else None."""

    @property
    def interval(self) -> Interval:
        """`Interval(low, high)`."""
        return Interval(self.low, self.high)


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> RateEstimate:
    """Estimate a rate with the Wilson score interval.

    The interval matches statsmodels `proportion_confint(method="wilson")`. Unlike the
    normal (Wald) interval it behaves well at rates of 0 and 1 and at small n. With
    `n == 0` nothing is known: the rate is reported as `0.0` (like `pass_rate` of an empty
    run) and the interval is the whole `[0, 1]`.

    Raises:
        InvalidStatisticError: counts are negative or not integers, `successes > n`, or
            `confidence` is not in `(0, 1)`.
    """
    successes = as_count("successes", successes)
    n = as_count("n", n)
    if successes > n:
        raise InvalidStatisticError(f"successes ({successes}) cannot exceed n ({n})")
    z = critical_value(confidence)
    if n == 0:
        return RateEstimate(successes=0, n=0, rate=0.0, low=0.0, high=1.0, confidence=confidence)
    rate = successes / n
    low, high = wilson_bounds(rate, n, z)
    # At the edges the bound is exactly the rate (the formula leaves a rounding error, and
    # 0 of 10 must not fall outside its own interval).
    low = 0.0 if successes == 0 else low
    high = 1.0 if successes == n else high
    return RateEstimate(
        successes=successes, n=n, rate=rate, low=low, high=high, confidence=confidence
    )


def wilson_bounds(rate: float, n: float, z: float) -> tuple[float, float]:
    """Return the Wilson score interval of `rate` observed over `n > 0` trials, within [0, 1].

    `n` may be fractional (an effective sample size); the ends are exact at rates 0 and 1.
    """
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (rate + z2 / (2.0 * n)) / denominator
    half_width = z * math.sqrt(rate * (1.0 - rate) / n + z2 / (4.0 * n * n)) / denominator
    low = 0.0 if rate <= 0.0 else min(max(center - half_width, 0.0), 1.0)
    high = 1.0 if rate >= 1.0 else min(max(center + half_width, 0.0), 1.0)
    return low, high


Bounds = tuple[float, float]
"""`(low, high)`: the range a value can take, e.g. `(0.0, 1.0)` for scores in [0, 1]."""

STUDENT_T = "Student t"
"""`method` of an interval `mean +- t(df) * se`."""
WILSON_FALLBACK = "Wilson (no spread)"
"""`method` of the interval used when every value (or cluster mean) is equal."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MeanEstimate:
    """A sample mean with its Student t confidence interval."""

    n: int
    """Number of values."""
    mean: float
    """Arithmetic mean."""
    std: float
    """Sample standard deviation (`ddof=1`); NaN when `n < 2`."""
    se: float
    """Standard error of the mean, `std / sqrt(n)`; NaN when `n < 2`."""
    low: float
    """Lower end of the interval (see `method`); NaN when `n < 2`."""
    high: float
    """Upper end of the interval; NaN when `n < 2`."""
    confidence: float
    """Coverage of the interval, e.g. `0.95`."""
    df: float = math.nan
    """Degrees of freedom of the t quantile, `n - 1`; NaN when `n < 2`."""
    method: str = STUDENT_T
    """How the interval was made: `"Student t"`, or `"Wilson (no spread)"` (see `mean_ci`)."""
    reason: str = ""
    """Why the interval is unknown (NaN ends), e.g. `"1 value"`; empty when it is known."""

    @property
    def interval(self) -> Interval:
        """`Interval(low, high)`."""
        return Interval(self.low, self.high)


def check_bounds(bounds: Bounds | None) -> None:
    """Raise unless `bounds` is None or a finite `(low, high)` with `low < high`."""
    if bounds is None:
        return
    low, high = bounds
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise InvalidStatisticError(
            f"bounds must be finite (low, high) with low < high, got {bounds!r}"
        )


def bounded_interval(
    mean: float, half_width: float, bounds: Bounds | None, *, n: float, z: float
) -> tuple[float, float, str]:
    """`mean +- half_width`, clipped to `bounds`; a Wilson interval over `n` when zero width.

    A variable inside `[lo, hi]` with mean `m` has a variance of at most
    `(m - lo) * (hi - m)`, reached by the two-point variable on `lo` and `hi`. When the
    observed spread is zero, that worst case (the Wilson interval of the rescaled mean
    `(m - lo) / (hi - lo)` over `n` units) replaces an interval of zero width. Without
    `bounds` nothing bounds the spread and the zero-width interval stays.
    """
    if bounds is None:
        return mean - half_width, mean + half_width, STUDENT_T
    lo, hi = bounds
    if half_width == 0.0:
        span = hi - lo
        rate = min(max((mean - lo) / span, 0.0), 1.0)
        low, high = wilson_bounds(rate, n, z)
        return lo + span * low, lo + span * high, WILSON_FALLBACK
    return max(mean - half_width, lo), min(mean + half_width, hi), STUDENT_T


def mean_ci(
    values: Iterable[float], *, confidence: float = 0.95, bounds: Bounds | None = None
) -> MeanEstimate:
    """Estimate a mean with a Student t confidence interval.

    The interval is `mean +- t(n - 1) * std / sqrt(n)`, with `t(n - 1)` the quantile of
    Student's t with `n - 1` degrees of freedom; it matches statsmodels
    `DescrStatsW(values).tconfint_mean()`. The t quantile keeps the coverage near the
    nominal level at small n (a normal quantile covers about 88% at n = 5 for a nominal
    95%); above about 30 values the two differ by under 4%.

    `bounds=(lo, hi)` says every value lies in `[lo, hi]` (scores in `[0, 1]`): the
    interval is clipped to it, and when every value is equal (no spread to estimate) it
    is the Wilson interval of the rescaled mean over `n` instead of zero width (see
    `bounded_interval`; `method` says which). With one value the spread is unknown, so
    `std`, `se` and the interval are NaN (`reason` says why) rather than a misleading
    zero width.

    Raises:
        InvalidStatisticError: `values` is empty or holds a non-finite value, or `bounds`
            is not a finite `(low, high)` with `low < high`.
    """
    array = as_values("values", values)
    return mean_ci_counts(count_values(array.tolist()), confidence=confidence, bounds=bounds)


def mean_ci_counts(
    counts: ValueCounts, *, confidence: float = 0.95, bounds: Bounds | None = None
) -> MeanEstimate:
    """`mean_ci` of values given as `{value: count}` (what `mean_ci` itself computes with).

    The mean and the spread are correctly rounded sums (`fsum_counts`), so the same
    values give the same estimate however they were counted: from a list, or while
    results streamed past.

    Raises:
        InvalidStatisticError: no values, a non-finite value, or bad `bounds`.
    """
    bad = next((v for v in counts if not math.isfinite(v)), None)
    if bad is not None:
        raise InvalidStatisticError(f"values hold {bad!r}; drop or impute non-finite values first")
    check_bounds(bounds)
    critical_value(confidence)
    n = sum(counts.values())
    if n == 0:
        raise InvalidStatisticError("values is empty; pass at least one value")
    mean = fsum_counts(counts) / n
    if n < 2:
        nan = math.nan
        return MeanEstimate(
            n=n, mean=mean, std=nan, se=nan, low=nan, high=nan, confidence=confidence,
            reason="1 value: no spread to estimate",
        )  # fmt: skip
    spread = 0.0 if len(counts) == 1 else fsum_counts(counts, shift=mean, square=True)
    std = math.sqrt(spread / (n - 1))
    se = std / math.sqrt(n)
    df = n - 1
    half_width = t_critical_value(confidence, df) * se
    low, high, method = bounded_interval(
        mean, half_width, bounds, n=n, z=critical_value(confidence)
    )
    return MeanEstimate(
        n=n, mean=mean, std=std, se=se, low=low, high=high, confidence=confidence, df=df,
        method=method,
    )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusteredEstimate:
    """A mean whose standard error allows for correlation within clusters."""

    n: int
    """Number of values."""
    n_clusters: int
    """Number of distinct cluster keys."""
    mean: float
    """Arithmetic mean of all values."""
    se: float
    """Cluster-robust (CR1) standard error; NaN with fewer than two clusters."""
    naive_se: float
    """The standard error that ignores clusters, `std / sqrt(n)`; NaN when `n < 2`."""
    design_effect: float
    """`(se / naive_se) ** 2`: how many times the variance grows because of clustering."""
    low: float
    """Lower end of the interval (see `method`); NaN with fewer than two clusters."""
    high: float
    """Upper end of the interval."""
    confidence: float
    """Coverage of the interval, e.g. `0.95`."""
    df: float = math.nan
    """Degrees of freedom of the t quantile, `n_clusters - 1`; NaN under two clusters."""
    method: str = STUDENT_T
    """How the interval was made: `"Student t"` (with `n_clusters - 1` degrees of
    freedom), or `"Wilson (no spread)"` over the clusters (see `clustered_mean`)."""
    reason: str = ""
    """Why the interval is unknown (NaN ends), e.g. `"1 cluster"`; empty when known."""

    @property
    def interval(self) -> Interval:
        """`Interval(low, high)`."""
        return Interval(self.low, self.high)


def clustered_mean(
    values: Sequence[float],
    clusters: Sequence[Hashable],
    *,
    confidence: float = 0.95,
    bounds: Bounds | None = None,
) -> ClusteredEstimate:
    """Estimate a mean with a cluster-robust standard error.

    Use it when samples share a key (epochs of one sample, tasks from one repository,
    turns of one conversation): such values are correlated and the naive standard error
    is too small. The variance is the CR1 sandwich `G / (G - 1) * sum_g(S_g ** 2) / n**2`
    where `S_g` is the sum of residuals in cluster `g`; this equals statsmodels
    `OLS(values, ones).fit(cov_type="cluster")` with its default small-sample correction.
    The interval uses Student's t with `G - 1` degrees of freedom (statsmodels' `use_t=True`
    for cluster covariances): with few clusters the normal quantile is far too narrow (a
    z-test rejects about 12% of the time at 5 clusters for a nominal 5%).

    `bounds` as in `mean_ci`: the interval is clipped to it, and when every cluster has
    the same mean (e.g. every epoch of every sample passed) the Wilson interval of the
    rescaled mean over the `G` clusters replaces a zero-width interval.

    Raises:
        InvalidStatisticError: `values` is empty or not finite, the lengths differ, or
            `bounds` is not a finite `(low, high)` with `low < high`.
    """
    import numpy as np

    check_same_length(("values", "clusters"), values, clusters)
    array = as_values("values", values)
    check_bounds(bounds)
    z = critical_value(confidence)
    n = int(array.size)
    mean = float(np.mean(array))
    codes, n_clusters = cluster_codes(clusters)
    nan = math.nan
    constant = bool(np.all(array == array[0]))
    naive_se = (0.0 if constant else float(np.std(array, ddof=1))) / math.sqrt(n) if n > 1 else nan
    design_effect_ = nan
    if n_clusters < 2:
        return ClusteredEstimate(
            n=n, n_clusters=n_clusters, mean=mean, se=nan, naive_se=naive_se,
            design_effect=nan, low=nan, high=nan, confidence=confidence,
            reason="1 cluster: no spread between clusters to estimate",
        )  # fmt: skip
    se = 0.0 if constant or equal_cluster_means(array, codes, n_clusters) else nan
    if math.isnan(se):
        se = cr1_se(array - mean, codes, n_clusters)
    if naive_se > 0:
        design_effect_ = (se / naive_se) ** 2
    df = n_clusters - 1
    low, high, method = bounded_interval(
        mean, t_critical_value(confidence, df) * se, bounds, n=n_clusters, z=z
    )
    return ClusteredEstimate(
        n=n, n_clusters=n_clusters, mean=mean, se=se, naive_se=naive_se,
        design_effect=design_effect_, low=low, high=high, confidence=confidence, df=df,
        method=method,
    )  # fmt: skip


def cluster_codes(clusters: Sequence[Hashable]) -> tuple[npt.NDArray[np.intp], int]:
    """Return `(codes, n_clusters)`: each key as `0..n_clusters-1`, in order of first sight.

    A numpy array of integers is coded without a Python object per key (the same codes).
    """
    import numpy as np

    if isinstance(clusters, np.ndarray) and clusters.dtype.kind in "iu":
        unique, first, inverse = np.unique(clusters, return_index=True, return_inverse=True)
        rank = np.empty(unique.size, dtype=np.intp)
        rank[np.argsort(first, kind="stable")] = np.arange(unique.size)
        return rank[inverse.reshape(-1)].astype(np.intp), int(unique.size)
    index: dict[Hashable, int] = {}
    codes = np.fromiter(
        (index.setdefault(key, len(index)) for key in clusters), np.intp, len(clusters)
    )
    return codes, len(index)


def equal_cluster_means(
    values: npt.NDArray[np.float64], codes: npt.NDArray[np.intp], n_clusters: int
) -> bool:
    """Whether every cluster has the same mean, up to rounding (then the CR1 SE is 0)."""
    import numpy as np

    sums = np.bincount(codes, weights=values, minlength=n_clusters)
    means = sums / np.bincount(codes, minlength=n_clusters)
    scale = max(1.0, float(np.max(np.abs(values))))
    return float(np.ptp(means)) <= 64 * sys.float_info.epsilon * scale


def cr1_se(
    residuals: npt.NDArray[np.float64], codes: npt.NDArray[np.intp], n_clusters: int
) -> float:
    """Return the CR1 standard error of a mean from its residuals (needs `n_clusters >= 2`).

    `sqrt(G / (G - 1) * sum_g(S_g ** 2)) / n`, with `S_g` the sum of cluster `g`'s residuals.
    """
    import numpy as np

    sums = np.bincount(codes, weights=residuals, minlength=n_clusters)
    return math.sqrt(n_clusters / (n_clusters - 1) * float(np.sum(sums * sums))) / residuals.size
