"""Paired A/B comparison of two experiments scored on the same samples.

Pairs are independent unless `clusters` says otherwise: repeated epochs of one sample are
the same question asked again, so `paired_comparison(..., clusters=sample_ids)` makes the
standard error, interval, test and bootstrap cluster-robust (see its docstring).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from weakincentives.errors import InvalidStatisticError

from ._intervals import Interval, cluster_codes, cr1_se
from ._mcnemar import McNemarResult, mcnemar
from ._normal import as_count, as_values, check_same_length, critical_value, two_sided_p
from ._power import minimum_detectable_effect

if TYPE_CHECKING:  # numpy itself is imported on first use (see the package docstring)
    import numpy as np
    import numpy.typing as npt

# The bootstrap draws at most this many indices at once, bounding its memory.
_BOOTSTRAP_CHUNK = 1 << 20
# Power at which `PairedComparison.minimum_detectable_effect` is reported.
_MDE_POWER = 0.8


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedComparison:
    """Treatment against baseline on the same samples: the difference and its uncertainty.

    Differences are `treatment - baseline`, so a positive `delta` means the treatment
    scored higher. Fields that need a spread (`sd`, `se`, the intervals, the test) are NaN
    when `n < 2`; when clustered (`n_clusters` is set), `se`, the intervals, the test and
    the detectable effect are also NaN with fewer than two clusters.
    """

    n: int
    """Number of pairs (samples scored by both experiments)."""
    baseline_mean: float
    """Mean score of the baseline."""
    treatment_mean: float
    """Mean score of the treatment."""
    delta: float
    """Mean of the per-pair differences, `treatment_mean - baseline_mean`."""
    sd: float
    """Standard deviation of the differences (`ddof=1`)."""
    se: float
    """Standard error of `delta`: `sd / sqrt(n)`, or the cluster-robust CR1 SE if clustered."""
    correlation: float
    """Pearson correlation of baseline and treatment scores; NaN if either is constant.

    A high correlation is why the paired SE is smaller than the unpaired one."""
    low: float
    """Lower end of the normal confidence interval of `delta`."""
    high: float
    """Upper end of the normal confidence interval of `delta`."""
    statistic: float
    """`delta / se`; when `se == 0`, 0 if `delta` is zero up to rounding, else `+-inf`.

    Unclustered it equals scipy's `ttest_rel` statistic; clustered, statsmodels' z-value."""
    p_value: float
    """Two-sided normal p-value of `statistic` (the test named by `test_name`); 1.0 or 0.0
    when `se == 0`, e.g. when all differences (or all cluster means) are equal."""
    mcnemar: McNemarResult | None
    """McNemar's test when both score lists are binary and the pairs are not clustered.

    None otherwise: McNemar assumes independent pairs, which clustered pairs are not."""
    bootstrap_low: float
    """Lower end of the seeded bootstrap percentile interval of `delta`.

    The bootstrap resamples pairs, or whole clusters when clustered."""
    bootstrap_high: float
    """Upper end of the seeded bootstrap percentile interval of `delta`."""
    bootstrap_resamples: int
    """Number of bootstrap resamples; 0 means the bootstrap was skipped (NaN ends)."""
    minimum_detectable_effect: float
    """Smallest `delta` detected at alpha = 1 - confidence and power 0.8.

    `(z_alpha + z_power) * se`; for unclustered pairs, `minimum_detectable_effect(n, sd=sd)`."""
    confidence: float
    """Coverage of both intervals, e.g. `0.95`."""
    differences: tuple[float, ...] = field(repr=False)
    """Per-pair differences `treatment[i] - baseline[i]`, in input order."""
    n_clusters: int | None = None
    """Number of distinct clusters when the statistics are cluster-robust, else None."""
    naive_se: float = math.nan
    """SE that ignores clusters, `sd / sqrt(n)`; equals `se` when not clustered."""

    @property
    def interval(self) -> Interval:
        """`Interval(low, high)` of `delta`."""
        return Interval(self.low, self.high)

    @property
    def bootstrap_interval(self) -> Interval:
        """`Interval(bootstrap_low, bootstrap_high)` of `delta`."""
        return Interval(self.bootstrap_low, self.bootstrap_high)

    @property
    def clustered(self) -> bool:
        """Whether the statistics are cluster-robust."""
        return self.n_clusters is not None

    @property
    def test_name(self) -> str:
        """The test behind `p_value`: `"paired z-test"` or `"cluster-robust z-test"`."""
        return "cluster-robust z-test" if self.clustered else "paired z-test"

    @property
    def design_effect(self) -> float:
        """`(se / naive_se) ** 2`: how many times clustering grows the variance (1 unclustered).

        NaN when `naive_se` is 0 or unknown.
        """
        if not self.naive_se > 0:
            return math.nan
        return (self.se / self.naive_se) ** 2


class _Spread(NamedTuple):
    """What a paired comparison computes from the spread of the differences."""

    sd: float
    se: float
    naive_se: float
    statistic: float
    p_value: float
    low: float
    high: float
    mde: float
    bootstrap_low: float
    bootstrap_high: float
    bootstrap_resamples: int


_NAN = math.nan
_UNKNOWN = _Spread(_NAN, _NAN, _NAN, _NAN, _NAN, _NAN, _NAN, _NAN, _NAN, _NAN, 0)


def _is_binary(values: npt.NDArray[np.float64]) -> bool:
    import numpy as np

    return bool(np.all((values == 0.0) | (values == 1.0)))


def _correlation(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> float:
    dx = x - x.mean()
    dy = y - y.mean()
    denominator = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy) / denominator if denominator > 0 else math.nan


class _Clusters(NamedTuple):
    """Each pair's cluster as `0..n_clusters-1`, and the number of pairs in each cluster."""

    codes: npt.NDArray[np.intp]
    n_clusters: int
    sizes: npt.NDArray[np.float64]


def _clusters_of(clusters: Sequence[Hashable]) -> _Clusters:
    import numpy as np

    codes, n_clusters = cluster_codes(clusters)
    sizes = np.bincount(codes, minlength=n_clusters).astype(np.float64)
    return _Clusters(codes, n_clusters, sizes)


def _bootstrap(
    samples: Sequence[npt.NDArray[np.float64]],
    sizes: npt.NDArray[np.float64] | None,
    resamples: int,
    confidence: float,
    seed: int,
) -> list[tuple[float, float]]:
    """Percentile intervals of the mean over `resamples` draws with replacement, per sample.

    Unclustered (`sizes` None), a sample holds the differences. Clustered, it holds the
    per-cluster sums of the differences and `sizes` the pairs per cluster: a draw picks
    whole clusters and its mean is over all of their pairs.

    Every sample must have as many units: they share each draw (and its number of pairs),
    so the intervals of several samples cost one set of random indices (the expensive
    part) and each equals the interval of that sample bootstrapped alone with the same seed.
    """
    import numpy as np

    n = samples[0].size
    rng = np.random.default_rng(seed)
    rows = max(1, _BOOTSTRAP_CHUNK // n)
    means = np.empty((len(samples), resamples))
    for start in range(0, resamples, rows):
        stop = min(start + rows, resamples)
        indices = rng.integers(0, n, size=(stop - start, n))
        pairs = None if sizes is None else sizes[indices].sum(axis=1)
        for k, totals in enumerate(samples):
            if pairs is None:
                means[k, start:stop] = totals[indices].mean(axis=1)
            else:
                means[k, start:stop] = totals[indices].sum(axis=1) / pairs
    tail = (1.0 - confidence) / 2.0
    ends = []
    for row in means:
        low, high = np.quantile(row, [tail, 1.0 - tail])
        ends.append((float(low), float(high)))
    return ends


def _sd(differences: npt.NDArray[np.float64]) -> float:
    """Sample standard deviation (`ddof=1`) of `n >= 2` values, exactly 0 when all are equal."""
    import numpy as np

    # Equal values have exactly zero spread; np.std may return a rounding error instead.
    if bool(np.all(differences == differences[0])):
        return 0.0
    return float(np.std(differences, ddof=1))


def _z_test(delta: float, se: float, differences: npt.NDArray[np.float64]) -> tuple[float, float]:
    """Return `(statistic, p_value)` of the two-sided z-test of `delta == 0`.

    With `se == 0` the test is decided by whether `delta` is zero. A `delta` within the
    worst-case rounding error of the mean of the differences, `eps * sum(|d_i|)`, counts
    as zero: when clustered, residual sums can round to exactly 0 (so `se == 0`) around
    a `delta` that is only rounding noise, and that must not read as significant.
    """
    import numpy as np

    if se > 0:
        statistic = delta / se
        return statistic, two_sided_p(statistic)
    if abs(delta) <= sys.float_info.epsilon * float(np.abs(differences).sum()):
        return 0.0, 1.0
    return math.copysign(math.inf, delta), 0.0


def _independent_spread(
    differences: npt.NDArray[np.float64], delta: float, *, z: float, confidence: float
) -> tuple[_Spread, npt.NDArray[np.float64] | None]:
    """The spread of independent pairs (paired z-test), and what the pair bootstrap draws.

    The bootstrap ends are left NaN for the caller to fill (see `_bootstrap`).
    """
    n = differences.size
    if n < 2:
        return _UNKNOWN, None
    sd = _sd(differences)
    se = sd / math.sqrt(n)
    statistic, p_value = _z_test(delta, se, differences)
    mde = minimum_detectable_effect(n, sd=sd, alpha=1.0 - confidence, power=_MDE_POWER)
    spread = _Spread(
        sd, se, se, statistic, p_value, delta - z * se, delta + z * se, mde, _NAN, _NAN, 0
    )
    return spread, differences


def _clustered_spread(
    differences: npt.NDArray[np.float64],
    delta: float,
    clusters: _Clusters,
    *,
    z: float,
    confidence: float,
) -> tuple[_Spread, npt.NDArray[np.float64] | None]:
    """The spread of clustered pairs (CR1 z-test), and what the cluster bootstrap draws.

    The bootstrap ends are left NaN for the caller to fill (see `_bootstrap`).
    """
    import numpy as np

    n = differences.size
    codes, n_clusters, _ = clusters
    sd = _sd(differences) if n >= 2 else math.nan
    naive_se = sd / math.sqrt(n)
    if n_clusters < 2:
        return _UNKNOWN._replace(sd=sd, naive_se=naive_se), None
    se = 0.0 if sd == 0.0 else cr1_se(differences - delta, codes, n_clusters)
    statistic, p_value = _z_test(delta, se, differences)
    # The detectable effect of a mean whose standard error is `se`: (z_alpha + z_power) * se.
    mde = minimum_detectable_effect(1, sd=se, alpha=1.0 - confidence, power=_MDE_POWER)
    sums = np.bincount(codes, weights=differences, minlength=n_clusters).astype(np.float64)
    spread = _Spread(
        sd, se, naive_se, statistic, p_value, delta - z * se, delta + z * se, mde, _NAN, _NAN, 0
    )
    return spread, sums


def _mcnemar_of(
    baseline: npt.NDArray[np.float64],
    treatment: npt.NDArray[np.float64],
    binary: bool | None,
    *,
    independent: bool,
) -> McNemarResult | None:
    import numpy as np

    both_binary = _is_binary(baseline) and _is_binary(treatment)
    if binary is None:
        binary = both_binary
    elif binary and not both_binary:
        raise InvalidStatisticError(
            "binary=True but the scores are not all 0/1; pass binary=None to detect it"
        )
    if not (binary and independent):
        return None
    only_baseline = int(np.sum((baseline == 1.0) & (treatment == 0.0)))
    only_treatment = int(np.sum((baseline == 0.0) & (treatment == 1.0)))
    return mcnemar(only_baseline, only_treatment)


def paired_comparison(
    baseline: Iterable[float],
    treatment: Iterable[float],
    *,
    confidence: float = 0.95,
    binary: bool | None = None,
    bootstrap_resamples: int = 2000,
    seed: int = 0,
    clusters: Sequence[Hashable] | None = None,
) -> PairedComparison:
    """Compare two experiments scored on the same samples, pair by pair.

    `baseline[i]` and `treatment[i]` must be the scores of the same sample (booleans count
    as 0/1). The test is a paired z-test on the differences, whose statistic equals
    scipy's `ttest_rel`; the interval uses the normal quantile. A seeded paired bootstrap
    gives a second, assumption-light interval to cross-check the first. When every score
    is 0 or 1 (or `binary=True`) McNemar's test is added; `binary=False` skips it.

    When every difference is the same (e.g. both experiments pass the same samples), the
    SE is 0, the interval collapses to `delta`, and the p-value is 1.0 if `delta` is zero
    up to rounding (`|delta| <= eps * sum(|differences|)`) else 0.0. The same holds when
    clustered and every cluster has the same mean difference.

    Clustered pairs: `clusters[i]` is the cluster of pair `i`, e.g. its sample id when
    samples ran several epochs. Pairs of one cluster are correlated (the same question
    asked again), and treating them as independent makes the SE too small. With
    `clusters`, clusters are the independent units (cluster-robust inference):

    - `delta` stays the mean over all `n` pairs, `sum_g(S_g) / n`, where `S_g` is the sum
      of the `n_g` differences of cluster `g`; a cluster with more pairs weighs more, as
      in the pass rates.
    - `se` is the CR1 (cluster-robust sandwich) standard error over `G` clusters,
      `sqrt(G / (G - 1) * sum_g((S_g - n_g * delta) ** 2)) / n`, as in `clustered_mean`
      and statsmodels `OLS(differences, ones).fit(cov_type="cluster", cov_kwds={"groups":
      clusters})`. With the same `n_g` in every cluster it equals
      `std(m_g, ddof=1) / sqrt(G)` over the per-cluster mean differences `m_g`: the paired
      analysis of per-sample means.
    - The interval is `delta +- z * se` and the test the Wald z-test of `delta / se` with
      its normal p-value (statsmodels' default); `test_name` is `"cluster-robust z-test"`.
      Like `mean_ci`, the normal quantile is slightly narrow under about 30 clusters.
    - The bootstrap resamples whole clusters; the detectable effect is
      `(z_alpha + z_power) * se`.
    - McNemar's test is not computed (`mcnemar` is None): it assumes independent pairs.
    - With fewer than two clusters the spread is unknown: `se`, intervals, test are NaN.

    Given `clusters` are always used, even when every cluster holds one pair (CR1 then
    equals the unclustered SE, but McNemar is still skipped); `compare_results` passes
    them only when some sample has several paired epochs.

    Raises:
        InvalidStatisticError: the inputs are empty, of different lengths or not finite,
            `clusters` is not aligned with them, `binary=True` with non-binary scores, or
            `bootstrap_resamples < 0`.
    """
    (result,) = paired_comparisons(
        [(baseline, treatment, binary)],
        confidence=confidence,
        bootstrap_resamples=bootstrap_resamples,
        seed=seed,
        clusters=clusters,
    )
    return result


def paired_comparisons(
    comparisons: Sequence[tuple[Iterable[float], Iterable[float], bool | None]],
    *,
    confidence: float = 0.95,
    bootstrap_resamples: int = 2000,
    seed: int = 0,
    clusters: Sequence[Hashable] | None = None,
) -> tuple[PairedComparison, ...]:
    """Several `paired_comparison`s of the same pairs, e.g. of pass/fail and of scores.

    `comparisons` holds `(baseline, treatment, binary)` per comparison; every one must
    have the same number of pairs. Each result equals `paired_comparison(baseline,
    treatment, binary=binary, ...)` with the same arguments, bit for bit; the bootstrap
    draws its random indices once for all of them instead of once each.

    Raises:
        InvalidStatisticError: as `paired_comparison`, or the comparisons have different
            numbers of pairs.
    """
    scores = []
    for baseline, treatment, binary in comparisons:
        base = as_values("baseline", baseline)
        treat = as_values("treatment", treatment)
        if base.size != treat.size:
            raise InvalidStatisticError(
                "baseline and treatment must hold one score per sample in the same order, "
                f"got lengths {base.size} and {treat.size}"
            )
        scores.append((base, treat, binary))
    lengths = {base.size for base, _, _ in scores}
    if len(lengths) > 1:
        raise InvalidStatisticError(
            f"comparisons of the same pairs must have as many pairs, got {sorted(lengths)}"
        )
    groups = None
    if clusters is not None and scores:
        check_same_length(("scores", "clusters"), range(scores[0][0].size), clusters)
        groups = _clusters_of(clusters)
    n_clusters = None if groups is None else groups.n_clusters
    z = critical_value(confidence)
    resamples = as_count("bootstrap_resamples", bootstrap_resamples)
    parts = []
    for base, treat, _ in scores:
        differences = treat - base
        delta = float(differences.mean())
        if groups is None:
            spread, drawn = _independent_spread(differences, delta, z=z, confidence=confidence)
        else:
            spread, drawn = _clustered_spread(
                differences, delta, groups, z=z, confidence=confidence
            )
        parts.append((differences, delta, spread, drawn))
    drawn_all = [drawn for *_, drawn in parts if drawn is not None]
    sizes = None if groups is None else groups.sizes
    ends = iter(
        _bootstrap(drawn_all, sizes, resamples, confidence, seed)
        if resamples > 0 and drawn_all
        else []
    )
    results = []
    for (base, treat, binary), (differences, delta, spread, drawn) in zip(
        scores, parts, strict=True
    ):
        if drawn is not None:
            low, high = next(ends, (math.nan, math.nan))
            spread = spread._replace(
                bootstrap_low=low, bootstrap_high=high, bootstrap_resamples=resamples
            )
        results.append(
            _result(base, treat, binary, differences, delta, spread, n_clusters, confidence)
        )
    return tuple(results)


def _result(
    base: npt.NDArray[np.float64],
    treat: npt.NDArray[np.float64],
    binary: bool | None,
    differences: npt.NDArray[np.float64],
    delta: float,
    spread: _Spread,
    n_clusters: int | None,
    confidence: float,
) -> PairedComparison:
    """Assemble a `PairedComparison`; McNemar only for independent pairs (`n_clusters` None)."""
    n = int(differences.size)
    return PairedComparison(
        n=n,
        baseline_mean=float(base.mean()),
        treatment_mean=float(treat.mean()),
        delta=delta,
        sd=spread.sd,
        se=spread.se,
        correlation=_correlation(base, treat) if n >= 2 else math.nan,
        low=spread.low,
        high=spread.high,
        statistic=spread.statistic,
        p_value=spread.p_value,
        mcnemar=_mcnemar_of(base, treat, binary, independent=n_clusters is None),
        bootstrap_low=spread.bootstrap_low,
        bootstrap_high=spread.bootstrap_high,
        bootstrap_resamples=spread.bootstrap_resamples,
        minimum_detectable_effect=spread.mde,
        confidence=confidence,
        differences=tuple(differences.tolist()),
        n_clusters=n_clusters,
        naive_se=spread.naive_se,
    )
