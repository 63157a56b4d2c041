from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from weakincentives.evals.stats import (
    InvalidStatisticError,
    mcnemar,
    minimum_detectable_effect,
    paired_comparison,
    paired_comparisons,
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


def test_paired_comparison_matches_scipy_ttest_rel() -> None:
    rng = np.random.default_rng(7)
    for _ in range(100):
        n = int(rng.integers(3, 300))
        base, treat = _random_pairs(rng, n, float(rng.uniform(0, 0.9)))
        result = paired_comparison(base.tolist(), treat.tolist(), bootstrap_resamples=0)
        reference = stats.ttest_rel(treat, base)
        diffs = treat - base
        assert result.statistic == pytest.approx(reference.statistic, rel=1e-9)
        assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9)
        assert (result.test_name, result.df) == ("paired t-test", n - 1)
        assert result.delta == pytest.approx(diffs.mean(), abs=1e-12)
        assert result.se == pytest.approx(stats.sem(diffs), rel=1e-9)
        assert result.correlation == pytest.approx(np.corrcoef(base, treat)[0, 1], abs=1e-12)
        low, high = reference.confidence_interval(0.95)
        assert result.low == pytest.approx(low, abs=1e-9)
        assert result.high == pytest.approx(high, abs=1e-9)
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


@pytest.mark.parametrize(("shift", "p_value"), [(0.0, 1.0), (0.25, 0.125)])
def test_equal_differences_get_the_sign_test_and_a_worst_case_interval(
    shift: float, p_value: float
) -> None:
    baseline = [0.0, 0.25, 0.5, 0.75]
    result = paired_comparison(baseline, [x + shift for x in baseline])
    assert result.se == 0.0
    # No spread: the exact sign test over the 4 pairs, 2 * 0.5**4, not p = 0.
    assert (result.p_value, result.test_name) == (p_value, "sign test")
    assert result.statistic == (math.copysign(math.inf, shift) if shift else 0.0)
    # Scores in [0, 1]: the interval is the worst case over 4 pairs, never zero width.
    assert result.interval_method == "Wilson (no spread)"
    assert result.low < result.delta < result.high
    assert math.isnan(result.minimum_detectable_effect)
    assert result.reasons["minimum_detectable_effect"] == "no spread: every difference is equal"
    assert math.isnan(result.bootstrap_low)
    assert result.reasons["bootstrap"].startswith("no spread")


def test_equal_differences_of_unbounded_scores_have_no_interval() -> None:
    result = paired_comparison([2.0, 3.0, 4.0], [2.5, 3.5, 4.5])
    assert math.isnan(result.low) and math.isnan(result.high)
    assert result.reasons["interval"] == (
        "no spread: every difference is equal and the scores are unbounded"
    )


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
    assert result.reasons["interval"] == "1 pair: no spread to estimate"


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


# -- clustered pairs (several epochs per sample) ---------------------------------------------


def _clustered_pairs(
    rng: np.random.Generator, n_clusters: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unbalanced clusters (every one present) with a cluster effect on the differences."""
    groups = rng.integers(0, n_clusters, n)
    groups[:n_clusters] = np.arange(n_clusters)
    base = rng.normal(0.5, 0.2, n)
    treat = base + rng.normal(0.05, 0.2, n_clusters)[groups] + rng.normal(0, 0.1, n)
    return base, treat, groups


def test_clustered_comparison_matches_statsmodels_cluster_robust_ols() -> None:
    rng = np.random.default_rng(21)
    for _ in range(100):
        n_clusters = int(rng.integers(2, 40))
        base, treat, groups = _clustered_pairs(rng, n_clusters, int(rng.integers(n_clusters, 300)))
        confidence = float(rng.choice([0.9, 0.95, 0.99]))
        keys = [f"sample-{g}" for g in groups]
        result = paired_comparison(
            base.tolist(), treat.tolist(), clusters=keys, confidence=confidence,
            bootstrap_resamples=0,
        )  # fmt: skip
        diffs = treat - base
        fit = sm.OLS(diffs, np.ones_like(diffs)).fit(
            cov_type="cluster", cov_kwds={"groups": groups}, use_t=True
        )
        low, high = fit.conf_int(alpha=1 - confidence)[0]
        assert result.delta == pytest.approx(fit.params[0], rel=1e-9, abs=1e-12)
        assert result.se == pytest.approx(fit.bse[0], rel=1e-9)
        assert result.statistic == pytest.approx(fit.tvalues[0], rel=1e-9)
        assert result.p_value == pytest.approx(fit.pvalues[0], rel=1e-9, abs=1e-300)
        assert result.low == pytest.approx(low, abs=1e-9)
        assert result.high == pytest.approx(high, abs=1e-9)
        assert result.n_clusters == n_clusters
        assert result.naive_se == pytest.approx(stats.sem(diffs), rel=1e-9)
        assert result.sd == pytest.approx(np.std(diffs, ddof=1), rel=1e-9)
        assert result.test_name == "cluster-robust t-test"
        assert result.df == n_clusters - 1
        assert result.differences == pytest.approx(diffs.tolist())


def _per_sample_means(values: np.ndarray, epochs: int) -> np.ndarray:
    return np.asarray(values.reshape(-1, epochs).mean(axis=1))


@pytest.mark.parametrize("epochs", [2, 3, 5])
def test_equal_epochs_equal_the_paired_analysis_of_per_sample_means(epochs: int) -> None:
    rng = np.random.default_rng(22 + epochs)
    n_samples = 40
    groups = np.repeat(np.arange(n_samples), epochs)
    base = rng.normal(0.5, 0.2, groups.size)
    treat = base + rng.normal(0.05, 0.2, n_samples)[groups] + rng.normal(0, 0.1, groups.size)
    result = paired_comparison(base.tolist(), treat.tolist(), clusters=groups.tolist(), seed=4)
    means = _per_sample_means(treat - base, epochs)
    reference = stats.ttest_1samp(means, 0.0)
    low, high = reference.confidence_interval(0.95)
    assert result.se == pytest.approx(stats.sem(means), rel=1e-9)
    assert result.statistic == pytest.approx(reference.statistic, rel=1e-9)
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9)
    assert result.low == pytest.approx(low, abs=1e-9)
    assert result.high == pytest.approx(high, abs=1e-9)
    assert result.minimum_detectable_effect == pytest.approx(
        minimum_detectable_effect(n_samples, sd=float(np.std(means, ddof=1))), rel=1e-9
    )
    # The cluster bootstrap draws samples as the pair bootstrap of the per-sample means does.
    of_means = paired_comparison(
        _per_sample_means(base, epochs).tolist(), _per_sample_means(treat, epochs).tolist(), seed=4
    )
    assert result.bootstrap_resamples == 2000
    assert result.bootstrap_low == pytest.approx(of_means.bootstrap_low, abs=1e-9)
    assert result.bootstrap_high == pytest.approx(of_means.bootstrap_high, abs=1e-9)


@pytest.mark.parametrize("epochs", [2, 4])
def test_clustered_interval_is_wider_than_naive_when_epochs_agree(epochs: int) -> None:
    rng = np.random.default_rng(23)
    n_samples = 30
    base = np.repeat(rng.integers(0, 2, n_samples), epochs).astype(float)
    treat = np.repeat(rng.integers(0, 2, n_samples), epochs).astype(float)
    clusters = np.repeat(np.arange(n_samples), epochs).tolist()
    naive = paired_comparison(base.tolist(), treat.tolist())
    clustered = paired_comparison(base.tolist(), treat.tolist(), clusters=clusters)
    assert clustered.delta == naive.delta
    assert clustered.interval.width > naive.interval.width
    assert clustered.bootstrap_interval.width > naive.bootstrap_interval.width
    assert clustered.minimum_detectable_effect > naive.minimum_detectable_effect
    assert clustered.p_value > naive.p_value
    # Identical epochs: the variance grows by exactly (G * m - 1) / (G - 1).
    expected = (n_samples * epochs - 1) / (n_samples - 1)
    assert clustered.design_effect == pytest.approx(expected, rel=1e-9)
    assert clustered.naive_se == pytest.approx(naive.se, rel=1e-12)
    assert naive.design_effect == 1.0


def test_clustered_binary_scores_get_no_mcnemar() -> None:
    baseline = [1, 1, 0, 0, 1, 0, 1, 0]
    treatment = [1, 0, 1, 1, 1, 1, 0, 1]
    clusters = ["a", "a", "b", "b", "c", "c", "d", "d"]
    result = paired_comparison(baseline, treatment, clusters=clusters, binary=True)
    assert result.mcnemar is None
    assert result.clustered
    assert paired_comparison(baseline, treatment).test_name == "paired t-test"
    with pytest.raises(InvalidStatisticError, match="binary=True"):
        paired_comparison([0.5, 1.0], [1.0, 0.0], clusters=["a", "b"], binary=True)


def test_singleton_clusters_give_the_unclustered_numbers_without_mcnemar() -> None:
    rng = np.random.default_rng(24)
    base = rng.integers(0, 2, 50).astype(float).tolist()
    treat = rng.integers(0, 2, 50).astype(float).tolist()
    naive = paired_comparison(base, treat)
    singletons = paired_comparison(base, treat, clusters=range(50))
    assert singletons.se == pytest.approx(naive.se, rel=1e-12)
    assert singletons.p_value == pytest.approx(naive.p_value, rel=1e-9)
    assert (singletons.n_clusters, naive.n_clusters) == (50, None)
    assert naive.mcnemar is not None
    assert singletons.mcnemar is None


def test_one_cluster_has_unknown_spread() -> None:
    result = paired_comparison([0.0, 1.0, 0.0], [1.0, 1.0, 0.0], clusters=["a", "a", "a"])
    assert result.delta == pytest.approx(1 / 3)
    assert result.n_clusters == 1
    assert result.sd > 0
    assert all(
        math.isnan(x)
        for x in (
            result.se, result.p_value, result.low, result.high, result.bootstrap_low,
            result.minimum_detectable_effect, result.design_effect,
        )
    )  # fmt: skip
    assert result.bootstrap_resamples == 0


@pytest.mark.parametrize(("shift", "p_value"), [(0.0, 1.0), (0.25, 0.25)])
def test_clustered_equal_differences_give_zero_se(shift: float, p_value: float) -> None:
    baseline = [0.0, 0.25, 0.5, 0.75, 0.5, 0.25]
    result = paired_comparison(
        baseline, [x + shift for x in baseline], clusters=["a", "a", "b", "b", "c", "c"]
    )
    assert result.se == 0.0
    assert (result.p_value, result.test_name) == (p_value, "sign test")  # over 3 samples
    assert result.low < result.delta < result.high


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_clustered_zero_se_around_a_rounding_noise_delta_is_no_effect(sign: float) -> None:
    differences = [sign * x for x in (0.1, 0.2, -0.3, 0.1, 0.2, -0.3)]
    result = paired_comparison([0.0] * 6, differences, clusters=list("aaabbb"))
    assert result.delta != 0.0  # rounding noise of a true zero: the case under test
    assert abs(result.delta) < 1e-16
    assert result.se == 0.0  # each cluster's residuals sum to exactly 0
    assert (result.statistic, result.p_value) == (0.0, 1.0)
    assert paired_comparison([0.0] * 6, differences).p_value == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("differences", "clusters"),
    [
        ([0.1] * 6, None),
        ([0.1] * 6, "aaabbb"),
        ([-0.1] * 6, None),
        ([-0.1] * 6, "aaabbb"),
        ([0.25, 0.75, 0.5, 0.5], "aabb"),  # unequal differences, equal cluster means
    ],
)
def test_zero_se_with_a_real_delta_is_the_sign_test_over_the_units(
    differences: list[float], clusters: str | None
) -> None:
    result = paired_comparison(
        [0.0] * len(differences), differences, clusters=None if clusters is None else [*clusters]
    )
    assert result.se == 0.0
    assert result.statistic == math.copysign(math.inf, differences[0])
    units = len(differences) if clusters is None else len(set(clusters))
    assert result.p_value == 2 * 0.5**units


def test_clusters_must_align_with_the_pairs() -> None:
    with pytest.raises(InvalidStatisticError, match="lengths 2 and 3"):
        paired_comparison([1.0, 0.0], [1.0, 1.0], clusters=["a", "a", "b"])


@pytest.mark.parametrize("clustered", [False, True])
def test_paired_comparisons_share_draws_and_equal_separate_calls(clustered: bool) -> None:
    rng = np.random.default_rng(8)
    n = 300
    passed = [rng.integers(0, 2, n).astype(float).tolist() for _ in range(2)]
    scores = [rng.random(n).tolist() for _ in range(2)]
    clusters = rng.integers(0, 90, n).tolist() if clustered else None
    together = paired_comparisons(
        [(passed[0], passed[1], True), (scores[0], scores[1], None)],
        bootstrap_resamples=500,
        seed=5,
        clusters=clusters,
    )
    alone = (
        paired_comparison(passed[0], passed[1], binary=True, bootstrap_resamples=500, seed=5,
                          clusters=clusters),
        paired_comparison(scores[0], scores[1], bootstrap_resamples=500, seed=5, clusters=clusters),
    )  # fmt: skip
    assert together == alone  # every field, bootstrap ends included, bit for bit
    assert together[0].bootstrap_low != together[1].bootstrap_low


def test_paired_comparisons_need_the_same_number_of_pairs() -> None:
    with pytest.raises(InvalidStatisticError, match="as many pairs"):
        paired_comparisons([([1.0, 0.0], [1.0, 1.0], None), ([1.0], [0.0], None)])
