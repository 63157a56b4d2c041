"""Paired A/B comparison of two experiments scored on the same samples, and McNemar's test."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from weakincentives.errors import InvalidStatisticError

from ._intervals import Interval
from ._normal import as_count, as_values, critical_value, two_sided_p
from ._power import minimum_detectable_effect

if TYPE_CHECKING:  # numpy itself is imported on first use (see the package docstring)
    import numpy as np
    import numpy.typing as npt

# McNemar's exact binomial test is used up to this many discordant pairs (inclusive).
EXACT_MCNEMAR_LIMIT = 25
# The bootstrap draws at most this many indices at once, bounding its memory.
_BOOTSTRAP_CHUNK = 1 << 20
# Power at which `PairedComparison.minimum_detectable_effect` is reported.
_MDE_POWER = 0.8


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


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedComparison:
    """Treatment against baseline on the same samples: the difference and its uncertainty.

    Differences are `treatment - baseline`, so a positive `delta` means the treatment
    scored higher. Fields that need a spread (`sd`, `se`, the intervals, the test) are NaN
    when `n < 2`.
    """

    n: int
    """Number of pairs (samples scored by both experiments)."""
    baseline_mean: float
    """Mean score of the baseline."""
    treatment_mean: float
    """Mean score of the treatment."""
    delta: float
    """Mean of the per-sample differences, `treatment_mean - baseline_mean`."""
    sd: float
    """Standard deviation of the differences (`ddof=1`)."""
    se: float
    """Paired standard error of `delta`, `sd / sqrt(n)`."""
    correlation: float
    """Pearson correlation of baseline and treatment scores; NaN if either is constant.

    A high correlation is why the paired SE is smaller than the unpaired one."""
    low: float
    """Lower end of the normal confidence interval of `delta`."""
    high: float
    """Upper end of the normal confidence interval of `delta`."""
    statistic: float
    """`delta / se` (equals scipy's `ttest_rel` statistic); `+-inf` or 0 when `se == 0`."""
    p_value: float
    """Two-sided normal p-value of `statistic`; 1.0 or 0.0 when all differences are equal."""
    mcnemar: McNemarResult | None
    """McNemar's test when both score lists are binary, else None."""
    bootstrap_low: float
    """Lower end of the seeded paired-bootstrap percentile interval of `delta`."""
    bootstrap_high: float
    """Upper end of the seeded paired-bootstrap percentile interval of `delta`."""
    bootstrap_resamples: int
    """Number of bootstrap resamples; 0 means the bootstrap was skipped (NaN ends)."""
    minimum_detectable_effect: float
    """Smallest `delta` this n detects at alpha = 1 - confidence and power 0.8, from `sd`."""
    confidence: float
    """Coverage of both intervals, e.g. `0.95`."""
    differences: tuple[float, ...] = field(repr=False)
    """Per-sample differences `treatment[i] - baseline[i]`, in input order."""

    @property
    def interval(self) -> Interval:
        """`Interval(low, high)` of `delta`."""
        return Interval(self.low, self.high)

    @property
    def bootstrap_interval(self) -> Interval:
        """`Interval(bootstrap_low, bootstrap_high)` of `delta`."""
        return Interval(self.bootstrap_low, self.bootstrap_high)


def _is_binary(values: npt.NDArray[np.float64]) -> bool:
    import numpy as np

    return bool(np.all((values == 0.0) | (values == 1.0)))


def _correlation(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> float:
    dx = x - x.mean()
    dy = y - y.mean()
    denominator = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy) / denominator if denominator > 0 else math.nan


def _bootstrap(
    differences: npt.NDArray[np.float64], resamples: int, confidence: float, seed: int
) -> tuple[float, float]:
    import numpy as np

    n = differences.size
    rng = np.random.default_rng(seed)
    rows = max(1, _BOOTSTRAP_CHUNK // n)
    means = np.empty(resamples)
    for start in range(0, resamples, rows):
        stop = min(start + rows, resamples)
        indices = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = differences[indices].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def _z_test(
    differences: npt.NDArray[np.float64], delta: float
) -> tuple[float, float, float, float]:
    """Return `(sd, se, statistic, p_value)` of a z-test of mean zero on `n >= 2` values."""
    import numpy as np

    # Equal values have exactly zero spread; np.std may return a rounding error instead.
    constant = bool(np.all(differences == differences[0]))
    sd = 0.0 if constant else float(np.std(differences, ddof=1))
    se = sd / math.sqrt(differences.size)
    if se > 0:
        statistic = delta / se
        return sd, se, statistic, two_sided_p(statistic)
    if delta == 0:
        return sd, se, 0.0, 1.0
    return sd, se, math.copysign(math.inf, delta), 0.0


def _mcnemar_of(
    baseline: npt.NDArray[np.float64], treatment: npt.NDArray[np.float64], binary: bool | None
) -> McNemarResult | None:
    import numpy as np

    both_binary = _is_binary(baseline) and _is_binary(treatment)
    if binary is None:
        binary = both_binary
    elif binary and not both_binary:
        raise InvalidStatisticError(
            "binary=True but the scores are not all 0/1; pass binary=None to detect it"
        )
    if not binary:
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
) -> PairedComparison:
    """Compare two experiments scored on the same samples, pair by pair.

    `baseline[i]` and `treatment[i]` must be the scores of the same sample (booleans count
    as 0/1). The test is a paired z-test on the differences, whose statistic equals
    scipy's `ttest_rel`; the interval uses the normal quantile. A seeded paired bootstrap
    gives a second, assumption-light interval to cross-check the first. When every score
    is 0 or 1 (or `binary=True`) McNemar's test is added; `binary=False` skips it.

    When every difference is the same (e.g. both experiments pass the same samples), the
    SE is 0, the interval collapses to `delta`, and the p-value is 1.0 if `delta == 0`
    else 0.0.

    Raises:
        InvalidStatisticError: the inputs are empty, of different lengths or not finite,
            `binary=True` with non-binary scores, or `bootstrap_resamples < 0`.
    """
    base = as_values("baseline", baseline)
    treat = as_values("treatment", treatment)
    if base.size != treat.size:
        raise InvalidStatisticError(
            "baseline and treatment must hold one score per sample in the same order, "
            f"got lengths {base.size} and {treat.size}"
        )
    z = critical_value(confidence)
    resamples = as_count("bootstrap_resamples", bootstrap_resamples)
    differences = treat - base
    n = int(differences.size)
    delta = float(differences.mean())
    nan = math.nan
    sd = se = statistic = p_value = low = high = mde = nan
    boot_low = boot_high = nan
    if n >= 2:
        sd, se, statistic, p_value = _z_test(differences, delta)
        low, high = delta - z * se, delta + z * se
        mde = minimum_detectable_effect(n, sd=sd, alpha=1.0 - confidence, power=_MDE_POWER)
        if resamples > 0:
            boot_low, boot_high = _bootstrap(differences, resamples, confidence, seed)
    return PairedComparison(
        n=n,
        baseline_mean=float(base.mean()),
        treatment_mean=float(treat.mean()),
        delta=delta,
        sd=sd,
        se=se,
        correlation=_correlation(base, treat) if n >= 2 else nan,
        low=low,
        high=high,
        statistic=statistic,
        p_value=p_value,
        mcnemar=_mcnemar_of(base, treat, binary),
        bootstrap_low=boot_low,
        bootstrap_high=boot_high,
        bootstrap_resamples=resamples if n >= 2 else 0,
        minimum_detectable_effect=mde,
        confidence=confidence,
        differences=tuple(differences.tolist()),
    )
