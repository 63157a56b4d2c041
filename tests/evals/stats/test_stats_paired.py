from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from weakincentives.evals.stats import (
    InvalidStatisticError,
    mcnemar,
    minimum_detectable_effect,
    paired_comparison,
)


@pytest.mark.parametrize("exact", [True, False])
def test_mcnemar_matches_statsmodels(exact: bool) -> None:
    rng = np.random.default_rng(6)
    for _ in range(300):
        b, c = (int(x) for x in rng.integers(0, 120, 2))
        if not exact and b + c == 0:
            continue
        ours = mcnemar(b, c, exact=exact)
        reference = sm_mcnemar([[0, b], [c, 0]], exact=exact, correction=True)
        assert ours.statistic == pytest.approx(reference.statistic, rel=1e-12)
        assert ours.p_value == pytest.approx(reference.pvalue, rel=1e-9, abs=1e-300)
        assert ours.exact is exact


@pytest.mark.parametrize(
    ("b", "c", "exact"), [(10, 15, True), (0, 25, True), (10, 16, False), (40, 3, False)]
)
def test_mcnemar_uses_exact_test_up_to_25_discordant_pairs(b: int, c: int, exact: bool) -> None:
    result = mcnemar(b, c)
    assert result.exact is exact
    assert (result.b, result.c) == (b, c)


@pytest.mark.parametrize("exact", [None, True, False])
def test_mcnemar_without_discordant_pairs_is_not_significant(exact: bool | None) -> None:
    assert mcnemar(0, 0, exact=exact).p_value == 1.0


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(InvalidStatisticError, match="b must be >= 0"):
        mcnemar(-1, 3)


def _random_pairs(rng: np.random.Generator, n: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    base = rng.normal(0.5, 0.2, n)
    treat = rho * base + (1 - rho) * rng.normal(0.55, 0.2, n)
    return base, treat


def test_paired_comparison_matches_scipy_ttest_rel_and_normal_p() -> None:
    rng = np.random.default_rng(7)
    for _ in range(100):
        n = int(rng.integers(3, 300))
        base, treat = _random_pairs(rng, n, float(rng.uniform(0, 0.9)))
        result = paired_comparison(base.tolist(), treat.tolist(), bootstrap_resamples=0)
        reference = stats.ttest_rel(treat, base)
        diffs = treat - base
        assert result.statistic == pytest.approx(reference.statistic, rel=1e-9)
        assert result.p_value == pytest.approx(
            2 * stats.norm.sf(abs(reference.statistic)), rel=1e-9
        )
        assert result.delta == pytest.approx(diffs.mean(), abs=1e-12)
        assert result.se == pytest.approx(stats.sem(diffs), rel=1e-9)
        assert result.correlation == pytest.approx(np.corrcoef(base, treat)[0, 1], abs=1e-12)
        z = stats.norm.isf(0.025)
        assert result.low == pytest.approx(diffs.mean() - z * stats.sem(diffs), abs=1e-9)
        assert result.high == pytest.approx(diffs.mean() + z * stats.sem(diffs), abs=1e-9)
        assert result.treatment_mean - result.baseline_mean == pytest.approx(result.delta)
        assert result.differences == pytest.approx(diffs.tolist())
        assert result.mcnemar is None
        assert math.isnan(result.bootstrap_low)
        assert result.minimum_detectable_effect == pytest.approx(
            minimum_detectable_effect(n, sd=float(np.std(diffs, ddof=1)))
        )


def test_paired_bootstrap_agrees_with_normal_interval_on_400_samples() -> None:
    rng = np.random.default_rng(8)
    base, treat = _random_pairs(rng, 400, 0.5)
    result = paired_comparison(base.tolist(), treat.tolist(), bootstrap_resamples=4000, seed=3)
    assert result.bootstrap_resamples == 4000
    # Stated tolerance: at n = 400 the percentile bootstrap and the normal interval of the
    # same mean agree to within 10% of the interval's width (observed: under 2%).
    tolerance = 0.1 * (result.high - result.low)
    assert abs(result.bootstrap_low - result.low) < tolerance
    assert abs(result.bootstrap_high - result.high) < tolerance
    assert result.bootstrap_low < result.delta < result.bootstrap_high


def test_paired_bootstrap_is_reproducible_from_its_seed() -> None:
    rng = np.random.default_rng(9)
    base, treat = _random_pairs(rng, 50, 0.3)
    first = paired_comparison(base.tolist(), treat.tolist(), seed=11)
    again = paired_comparison(base.tolist(), treat.tolist(), seed=11)
    other = paired_comparison(base.tolist(), treat.tolist(), seed=12)
    assert first.bootstrap_interval == again.bootstrap_interval
    assert first.bootstrap_interval != other.bootstrap_interval


def test_binary_scores_get_mcnemar_with_discordant_counts() -> None:
    baseline = [True, True, False, False, True, False, True, False]
    treatment = [True, False, True, True, True, True, False, True]
    result = paired_comparison(baseline, treatment)
    assert result.mcnemar is not None
    assert (result.mcnemar.b, result.mcnemar.c) == (2, 4)
    assert result.mcnemar.p_value == pytest.approx(
        sm_mcnemar([[0, 2], [4, 0]], exact=True).pvalue, rel=1e-12
    )
    assert paired_comparison(baseline, treatment, binary=False).mcnemar is None


def test_binary_true_with_fractional_scores_is_an_error() -> None:
    with pytest.raises(InvalidStatisticError, match="binary=True"):
        paired_comparison([0.5, 1.0], [1.0, 0.0], binary=True)


@pytest.mark.parametrize(("shift", "p_value"), [(0.0, 1.0), (0.25, 0.0), (-0.25, 0.0)])
def test_equal_differences_give_zero_se_and_a_definite_p_value(
    shift: float, p_value: float
) -> None:
    baseline = [0.0, 0.25, 0.5, 0.75]
    result = paired_comparison(baseline, [x + shift for x in baseline])
    assert result.se == 0.0
    assert result.p_value == p_value
    assert (result.low, result.high) == (result.delta, result.delta)
    assert result.statistic == (math.copysign(math.inf, shift) if shift else 0.0)
    assert result.minimum_detectable_effect == 0.0


def test_identical_binary_runs_are_not_different() -> None:
    result = paired_comparison([1, 0, 1, 1], [1, 0, 1, 1])
    assert (result.delta, result.p_value) == (0.0, 1.0)
    assert result.mcnemar is not None
    assert result.mcnemar.p_value == 1.0


def test_single_pair_reports_delta_and_unknown_spread() -> None:
    result = paired_comparison([0.2], [0.7])
    assert result.delta == pytest.approx(0.5)
    assert all(
        math.isnan(x)
        for x in (result.se, result.p_value, result.low, result.correlation, result.bootstrap_low)
    )
    assert result.bootstrap_resamples == 0


@pytest.mark.parametrize(
    ("baseline", "treatment", "kwargs", "match"),
    [
        ([], [], {}, "empty"),
        ([1.0, 0.0], [1.0], {}, "lengths 2 and 1"),
        ([1.0, math.nan], [1.0, 0.0], {}, "baseline"),
        ([1.0, 0.0], [1.0, 0.0], {"bootstrap_resamples": -1}, "bootstrap_resamples"),
        ([1.0, 0.0], [1.0, 0.0], {"confidence": 95}, "confidence"),
    ],
)
def test_paired_comparison_rejects_bad_input(
    baseline: list[float], treatment: list[float], kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvalidStatisticError, match=match):
        paired_comparison(baseline, treatment, **kwargs)
