"""Paired A/B comparison of two experiments scored on the same samples.

Pairs are independent unless `clusters` says otherwise: repeated epochs of one sample are
the same question asked again, so `paired_comparison(..., clusters=sample_ids)` makes the
standard error, interval, test and bootstrap cluster-robust (see its docstring).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from weakincentives.errors import InvalidStatisticError

from ._bootstrap import bootstrap_mean_intervals
from ._floats import Floats
from ._intervals import Bounds, Interval, cluster_codes
from ._mcnemar import McNemarResult, mcnemar
from ._normal import as_count, as_values, check_confidence, check_same_length
from ._spread import Spread, Units, clustered_spread, independent_spread

if TYPE_CHECKING:  # numpy itself is imported on first use (see the package docstring)
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedComparison:
    """Treatment against baseline on the same samples: the difference and its uncertainty.

    Differences are `treatment - baseline`, so a positive `delta` means the treatment
    scored higher. A number that cannot be computed is NaN, and `reasons` says why (one
    pair, one cluster, no spread); see `paired_comparison` for the methods.
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
    """Lower end of the confidence interval of `delta` (see `interval_method`)."""
    high: float
    """Upper end of the confidence interval of `delta`."""
    statistic: float
    """`delta / se`, the t statistic; `+-inf` (0 with no effect) when `se == 0`.

    Unclustered it equals scipy's `ttest_rel` statistic; clustered, statsmodels' CR1 one."""
    p_value: float
    """Two-sided p-value of the test named by `test_name`."""
    mcnemar: McNemarResult | None
    """McNemar's test when both score lists are binary and the pairs are not clustered.

    None otherwise: McNemar assumes independent pairs, which clustered pairs are not."""
    bootstrap_low: float
    """Lower end of the seeded bootstrap percentile interval of `delta`.

    The bootstrap resamples pairs, or whole clusters when clustered. NaN when there is
    nothing to resample (one unit, or every unit has the same difference)."""
    bootstrap_high: float
    """Upper end of the seeded bootstrap percentile interval of `delta`."""
    bootstrap_resamples: int
    """Number of bootstrap resamples; 0 means the bootstrap was skipped (NaN ends)."""
    minimum_detectable_effect: float
    """Smallest `delta` detected at alpha = 1 - confidence and power 0.8 by the test used.

    Binary independent pairs: McNemar's exact power at the observed share of discordant
    pairs (`mcnemar_detectable_effect`). Otherwise the exact t-test power with `df`
    degrees of freedom and this `se` (`minimum_detectable_effect`)."""
    confidence: float
    """Coverage of both intervals, e.g. `0.95`."""
    differences: Sequence[float] = field(repr=False)
    """Per-pair differences `treatment[i] - baseline[i]`, in input order: a read-only
    sequence of floats (`Floats`, 8 bytes per pair) that compares equal to a tuple or
    list of the same values."""
    n_clusters: int | None = None
    """Number of distinct clusters when the statistics are cluster-robust, else None."""
    naive_se: float = math.nan
    """SE that ignores clusters, `sd / sqrt(n)`; equals `se` when not clustered."""
    df: float = math.nan
    """Degrees of freedom of the t-test and t interval: `n - 1`, or `n_clusters - 1`."""
    test_name: str = "paired t-test"
    """The test behind `p_value`: `"paired t-test"`, `"cluster-robust t-test"`, or
    `"sign test"` when every pair (cluster) has the same difference."""
    interval_method: str = "Student t"
    """How `low`/`high` were made: `"Student t"`, `"Newcombe hybrid score"` (binary
    independent pairs), `"Newcombe hybrid score over samples"` or `"Wilson (no spread)"`
    (no spread between units; see `paired_comparison`)."""
    reasons: Mapping[str, str] = field(default_factory=dict)
    """Why a field is NaN, by field name (`"interval"`, `"p_value"`, `"bootstrap"`,
    `"minimum_detectable_effect"`); a field that is known has no entry."""

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
    def design_effect(self) -> float:
        """`(se / naive_se) ** 2`: how many times clustering grows the variance (1 unclustered).

        NaN when `naive_se` is 0 or unknown.
        """
        if not self.naive_se > 0:
            return math.nan
        return (self.se / self.naive_se) ** 2


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


def _units(base: npt.NDArray[np.float64], treat: npt.NDArray[np.float64]) -> Units:
    import numpy as np

    def count(b: float, t: float) -> float:
        return float(np.sum((base == b) & (treat == t)))

    return Units(count(1.0, 1.0), count(0.0, 1.0), count(1.0, 0.0), count(0.0, 0.0))


def _binary(
    base: npt.NDArray[np.float64], treat: npt.NDArray[np.float64], binary: bool | None
) -> bool:
    both_binary = _is_binary(base) and _is_binary(treat)
    if binary and not both_binary:
        raise InvalidStatisticError(
            "binary=True but the scores are not all 0/1; pass binary=None to detect it"
        )
    return both_binary if binary is None else binary


def _difference_bounds(
    base: npt.NDArray[np.float64], treat: npt.NDArray[np.float64]
) -> Bounds | None:
    """`(-1, 1)` when every score is in [0, 1] (differences then are), else None."""
    import numpy as np

    inside = bool(np.all((base >= 0) & (base <= 1) & (treat >= 0) & (treat <= 1)))
    return (-1.0, 1.0) if inside else None


def _mcnemar_of(units: Units | None, *, independent: bool) -> McNemarResult | None:
    if units is None or not independent:
        return None
    return mcnemar(int(units.only_baseline), int(units.only_treatment))


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
    as 0/1). A seeded paired bootstrap gives a second, assumption-light interval to
    cross-check the first. When every score is 0 or 1 (or `binary=True`) the scores are
    pass/fail outcomes; `binary=False` treats them as numbers.

    Independent pairs (no `clusters`):

    - The test is the paired t-test (Student's t with `n - 1` degrees of freedom, equal
      to scipy's `ttest_rel`); binary scores also get McNemar's test (exact up to 25
      discordant pairs), which is what a report shows for pass/fail.
    - The interval of numeric scores is `delta +- t(n - 1) * se` (statsmodels'
      `DescrStatsW(differences).tconfint_mean()`), clipped to `[-1, 1]` when every score
      is in `[0, 1]`. Binary scores get Newcombe's hybrid score interval for paired
      proportions (`newcombe_paired_interval`), which is not degenerate when every pair
      agrees or every pair moves the same way.
    - The detectable effect of binary scores is McNemar's (exact power at the observed
      share of discordant pairs), else the paired t-test's.

    Clustered pairs: `clusters[i]` is the cluster of pair `i`, e.g. its sample id when
    samples ran several epochs. Pairs of one cluster are correlated (the same question
    asked again), and treating them as independent makes the SE too small. With
    `clusters`, clusters are the independent units (cluster-robust inference):

    - `delta` stays the mean over all `n` pairs; a cluster with more pairs weighs more.
    - `se` is the CR1 standard error over `G` clusters,
      `sqrt(G / (G - 1) * sum_g((S_g - n_g * delta) ** 2)) / n`, as in `clustered_mean`
      and statsmodels `OLS(differences, ones).fit(cov_type="cluster", cov_kwds={"groups":
      clusters}, use_t=True)`; the interval and test use Student's t with `G - 1`
      degrees of freedom (`test_name` `"cluster-robust t-test"`).
    - The bootstrap resamples whole clusters; McNemar is not computed (it assumes
      independent pairs).
    - With fewer than two clusters the spread is unknown: `se`, intervals, test are NaN.

    No spread (every pair, or every cluster, has the same difference): the test is the
    exact sign test over the pairs (clusters), `2 * 0.5 ** units` (3 pairs that all
    improve: 0.25); the interval is never of zero width: Newcombe's for binary scores
    (over the clusters when clustered), else the worst case for bounded scores
    (`bounded_interval`), else NaN; the bootstrap is skipped. `reasons` names every
    NaN field's cause.

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


def _scores(
    comparisons: Sequence[tuple[Iterable[float], Iterable[float], bool | None]],
) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], bool]]:
    scores = []
    for baseline, treatment, binary in comparisons:
        base = as_values("baseline", baseline)
        treat = as_values("treatment", treatment)
        if base.size != treat.size:
            raise InvalidStatisticError(
                "baseline and treatment must hold one score per sample in the same order, "
                f"got lengths {base.size} and {treat.size}"
            )
        scores.append((base, treat, _binary(base, treat, binary)))
    lengths = {base.size for base, _, _ in scores}
    if len(lengths) > 1:
        raise InvalidStatisticError(
            f"comparisons of the same pairs must have as many pairs, got {sorted(lengths)}"
        )
    return scores


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
    import numpy as np

    scores = _scores(comparisons)
    groups = None
    if clusters is not None and scores:
        check_same_length(("scores", "clusters"), range(scores[0][0].size), clusters)
        groups = _clusters_of(clusters)
    check_confidence(confidence)
    resamples = as_count("bootstrap_resamples", bootstrap_resamples)
    parts: list[tuple[npt.NDArray[np.float64], float, Spread, Units | None]] = []
    for base, treat, binary in scores:
        differences = treat - base
        delta = float(differences.mean())
        units = _units(base, treat) if binary else None
        bounds = _difference_bounds(base, treat)
        if groups is None:
            spread = independent_spread(
                differences, delta, units=units, bounds=bounds, confidence=confidence
            )
        else:
            spread = clustered_spread(
                differences, delta, codes=groups.codes, n_clusters=groups.n_clusters,
                units=units, bounds=bounds, confidence=confidence,
            )  # fmt: skip
        parts.append((differences, delta, spread, units))
    drawn = [
        differences
        if groups is None
        else np.bincount(groups.codes, weights=differences, minlength=groups.n_clusters).astype(
            np.float64
        )
        for differences, _, spread, _ in parts
        if "bootstrap" not in spread.reasons
    ]
    sizes = None if groups is None else groups.sizes
    ends = iter(
        bootstrap_mean_intervals(drawn, sizes, resamples, confidence, seed)
        if resamples and drawn
        else []
    )
    results = []
    for (base, treat, _), (differences, delta, spread, units) in zip(scores, parts, strict=True):
        boot = (math.nan, math.nan, 0)
        if "bootstrap" not in spread.reasons:
            boot = (*next(ends, (math.nan, math.nan)), resamples)
        reasons = dict(spread.reasons)
        if not resamples:
            reasons.setdefault("bootstrap", "skipped: bootstrap_resamples=0")
        results.append(
            _result(
                base,
                treat,
                differences,
                delta,
                spread,
                boot,
                units,
                reasons,
                n_clusters=None if groups is None else groups.n_clusters,
                confidence=confidence,
            )
        )
    return tuple(results)


def _result(
    base: npt.NDArray[np.float64],
    treat: npt.NDArray[np.float64],
    differences: npt.NDArray[np.float64],
    delta: float,
    spread: Spread,
    boot: tuple[float, float, int],
    units: Units | None,
    reasons: dict[str, str],
    *,
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
        mcnemar=_mcnemar_of(units, independent=n_clusters is None),
        bootstrap_low=boot[0],
        bootstrap_high=boot[1],
        bootstrap_resamples=boot[2],
        minimum_detectable_effect=spread.mde,
        confidence=confidence,
        differences=Floats(differences.astype("float64", copy=False).tobytes()),
        n_clusters=n_clusters,
        naive_se=spread.naive_se,
        df=spread.df,
        test_name=spread.test_name,
        interval_method=spread.interval_method,
        reasons=reasons,
    )
