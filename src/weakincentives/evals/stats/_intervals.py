"""Confidence intervals for rates and means, with cluster-robust standard errors."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from weakincentives.errors import InvalidStatisticError

from ._normal import as_count, as_values, check_same_length, critical_value

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
    """A pass rate with its Wilson score interval."""

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
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (rate + z2 / (2.0 * n)) / denominator
    half_width = z * math.sqrt(rate * (1.0 - rate) / n + z2 / (4.0 * n * n)) / denominator
    return RateEstimate(
        successes=successes,
        n=n,
        rate=rate,
        low=min(max(center - half_width, 0.0), 1.0),
        high=min(max(center + half_width, 0.0), 1.0),
        confidence=confidence,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MeanEstimate:
    """A sample mean with its CLT (normal) confidence interval."""

    n: int
    """Number of values."""
    mean: float
    """Arithmetic mean."""
    std: float
    """Sample standard deviation (`ddof=1`); NaN when `n < 2`."""
    se: float
    """Standard error of the mean, `std / sqrt(n)`; NaN when `n < 2`."""
    low: float
    """`mean - z * se`; NaN when `n < 2`."""
    high: float
    """`mean + z * se`; NaN when `n < 2`."""
    confidence: float
    """Coverage of the interval, e.g. `0.95`."""

    @property
    def interval(self) -> Interval:
        """`Interval(low, high)`."""
        return Interval(self.low, self.high)


def mean_ci(values: Iterable[float], *, confidence: float = 0.95) -> MeanEstimate:
    """Estimate a mean with a normal-quantile (CLT) confidence interval.

    The interval is `mean +- z * std / sqrt(n)` with `z` the normal quantile, which
    matches statsmodels `DescrStatsW(values).zconfint_mean()`. It is the right choice for
    the sample sizes of an eval (tens or more); it is slightly narrow below n = 30, where
    a t interval would be wider. With one value the spread is unknown, so `std`, `se` and
    the interval are NaN rather than a misleading zero width.

    Raises:
        InvalidStatisticError: `values` is empty or holds a non-finite value.
    """
    import numpy as np

    array = as_values("values", values)
    z = critical_value(confidence)
    n = int(array.size)
    mean = float(np.mean(array))
    if n < 2:
        nan = math.nan
        return MeanEstimate(
            n=n, mean=mean, std=nan, se=nan, low=nan, high=nan, confidence=confidence
        )
    std = float(np.std(array, ddof=1))
    se = std / math.sqrt(n)
    return MeanEstimate(
        n=n, mean=mean, std=std, se=se, low=mean - z * se, high=mean + z * se, confidence=confidence
    )


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
    """`mean - z * se`."""
    high: float
    """`mean + z * se`."""
    confidence: float
    """Coverage of the interval, e.g. `0.95`."""

    @property
    def interval(self) -> Interval:
        """`Interval(low, high)`."""
        return Interval(self.low, self.high)


def clustered_mean(
    values: Sequence[float], clusters: Sequence[Hashable], *, confidence: float = 0.95
) -> ClusteredEstimate:
    """Estimate a mean with a cluster-robust standard error.

    Use it when samples share a key (epochs of one sample, tasks from one repository,
    turns of one conversation): such values are correlated and the naive standard error
    is too small. The variance is the CR1 sandwich `G / (G - 1) * sum_g(S_g ** 2) / n**2`
    where `S_g` is the sum of residuals in cluster `g`; this equals statsmodels
    `OLS(values, ones).fit(cov_type="cluster")` with its default small-sample correction,
    and the interval uses the normal quantile as statsmodels does.

    Raises:
        InvalidStatisticError: `values` is empty or not finite, or the lengths differ.
    """
    import numpy as np

    check_same_length(("values", "clusters"), values, clusters)
    array = as_values("values", values)
    z = critical_value(confidence)
    n = int(array.size)
    mean = float(np.mean(array))
    codes, n_clusters = cluster_codes(clusters)
    nan = math.nan
    se = cr1_se(array - mean, codes, n_clusters) if n_clusters > 1 else nan
    naive_se = float(np.std(array, ddof=1)) / math.sqrt(n) if n > 1 else nan
    design_effect = (se / naive_se) ** 2 if naive_se > 0 else nan
    return ClusteredEstimate(
        n=n,
        n_clusters=n_clusters,
        mean=mean,
        se=se,
        naive_se=naive_se,
        design_effect=design_effect,
        low=mean - z * se,
        high=mean + z * se,
        confidence=confidence,
    )


def cluster_codes(clusters: Sequence[Hashable]) -> tuple[npt.NDArray[np.intp], int]:
    """Return `(codes, n_clusters)`: each key as `0..n_clusters-1`, in order of first sight."""
    import numpy as np

    index: dict[Hashable, int] = {}
    codes = np.fromiter(
        (index.setdefault(key, len(index)) for key in clusters), np.intp, len(clusters)
    )
    return codes, len(index)


def cr1_se(
    residuals: npt.NDArray[np.float64], codes: npt.NDArray[np.intp], n_clusters: int
) -> float:
    """Return the CR1 standard error of a mean from its residuals (needs `n_clusters >= 2`).

    `sqrt(G / (G - 1) * sum_g(S_g ** 2)) / n`, with `S_g` the sum of cluster `g`'s residuals.
    """
    import numpy as np

    sums = np.bincount(codes, weights=residuals, minlength=n_clusters)
    return math.sqrt(n_clusters / (n_clusters - 1) * float(np.sum(sums * sums))) / residuals.size
