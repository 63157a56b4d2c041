from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import DescrStatsW

from weakincentives.evals.stats import (
    Interval,
    InvalidStatisticError,
    clustered_mean,
    mean_ci,
    wilson_interval,
)


def test_wilson_matches_statsmodels_on_random_counts() -> None:
    rng = np.random.default_rng(2)
    for _ in range(500):
        n = int(rng.integers(1, 5000))
        successes = int(rng.integers(0, n + 1))
        confidence = float(rng.choice([0.8, 0.9, 0.95, 0.99]))
        estimate = wilson_interval(successes, n, confidence=confidence)
        low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
        assert estimate.low == pytest.approx(low, abs=1e-12)
        assert estimate.high == pytest.approx(high, abs=1e-12)
        assert estimate.rate == successes / n
        assert (estimate.successes, estimate.n, estimate.confidence) == (successes, n, confidence)


@pytest.mark.parametrize(("successes", "n"), [(0, 1), (0, 30), (30, 30), (1, 1)])
def test_wilson_at_the_edges_stays_inside_unit_interval(successes: int, n: int) -> None:
    estimate = wilson_interval(successes, n)
    assert 0.0 <= estimate.low <= estimate.rate <= estimate.high <= 1.0
    assert estimate.high - estimate.low > 0.0


def test_wilson_with_no_trials_is_the_whole_unit_interval() -> None:
    estimate = wilson_interval(0, 0)
    assert (estimate.rate, estimate.low, estimate.high) == (0.0, 0.0, 1.0)
    assert estimate.interval == Interval(0.0, 1.0)


@pytest.mark.parametrize(
    ("successes", "n", "confidence", "match"),
    [
        (-1, 10, 0.95, "successes"),
        (11, 10, 0.95, "exceed"),
        (1.5, 10, 0.95, "integer"),
        (True, 10, 0.95, "bool"),
        (1, 10, 1.0, "confidence"),
        (1, 10, 0.0, "confidence"),
    ],
)
def test_wilson_rejects_bad_input(successes: int, n: int, confidence: float, match: str) -> None:
    with pytest.raises(InvalidStatisticError, match=match):
        wilson_interval(successes, n, confidence=confidence)


def test_wilson_accepts_numpy_integers() -> None:
    # Typed as int, but numpy integers from array counts are accepted too.
    estimate = wilson_interval(np.int64(3), np.int64(10))  # type: ignore[arg-type]
    assert estimate.rate == 0.3


def test_mean_ci_matches_statsmodels_t_interval() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        values = rng.normal(rng.uniform(-5, 5), rng.uniform(0.1, 3), int(rng.integers(2, 300)))
        confidence = float(rng.choice([0.9, 0.95, 0.99]))
        estimate = mean_ci(values.tolist(), confidence=confidence)
        reference = DescrStatsW(values)
        low, high = reference.tconfint_mean(alpha=1 - confidence)
        assert estimate.mean == pytest.approx(reference.mean, abs=1e-12)
        assert estimate.se == pytest.approx(reference.std_mean, rel=1e-9)
        assert estimate.std == pytest.approx(np.std(values, ddof=1), rel=1e-12)
        assert estimate.low == pytest.approx(low, abs=1e-9)
        assert estimate.high == pytest.approx(high, abs=1e-9)
        assert estimate.mean in estimate.interval
        assert estimate.df == values.size - 1


def test_mean_ci_of_one_value_has_unknown_spread() -> None:
    estimate = mean_ci([0.7])
    assert estimate.mean == 0.7
    assert estimate.n == 1
    assert all(math.isnan(x) for x in (estimate.std, estimate.se, estimate.low, estimate.high))
    assert estimate.reason == "1 value: no spread to estimate"


def test_mean_ci_accepts_booleans() -> None:
    assert mean_ci([True, False, True, True]).mean == 0.75


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([], "empty"),
        ([1.0, math.nan], r"values\[1\]"),
        ([1.0, math.inf], "non-finite"),
        (["x"], "numbers"),
    ],
)
def test_mean_ci_rejects_bad_values(values: list[float], match: str) -> None:
    with pytest.raises(InvalidStatisticError, match=match):
        mean_ci(values)


def _statsmodels_cluster(
    values: np.ndarray, groups: np.ndarray, confidence: float
) -> tuple[float, float, float]:
    fit = sm.OLS(values, np.ones_like(values)).fit(
        cov_type="cluster", cov_kwds={"groups": groups}, use_t=True
    )
    low, high = fit.conf_int(alpha=1 - confidence)[0]
    return float(fit.bse[0]), float(low), float(high)


def test_clustered_mean_matches_statsmodels_cluster_robust_ols() -> None:
    rng = np.random.default_rng(4)
    for _ in range(100):
        n_clusters = int(rng.integers(2, 40))
        groups = rng.integers(0, n_clusters, int(rng.integers(n_clusters, 400)))
        groups[:n_clusters] = np.arange(n_clusters)  # every cluster appears
        effects = rng.normal(0, 1, n_clusters)
        values = effects[groups] + rng.normal(0, 0.5, groups.size)
        confidence = float(rng.choice([0.9, 0.95]))
        keys = [f"task-{g}" for g in groups]
        estimate = clustered_mean(values.tolist(), keys, confidence=confidence)
        se, low, high = _statsmodels_cluster(values, groups, confidence)
        assert estimate.se == pytest.approx(se, rel=1e-9)
        assert estimate.low == pytest.approx(low, abs=1e-9)
        assert estimate.high == pytest.approx(high, abs=1e-9)
        assert estimate.n_clusters == n_clusters
        assert estimate.df == n_clusters - 1
        assert estimate.naive_se == pytest.approx(np.std(values, ddof=1) / math.sqrt(values.size))
        assert estimate.design_effect == pytest.approx((se / estimate.naive_se) ** 2)


def test_clustering_of_correlated_values_widens_the_interval() -> None:
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(20), 10)
    values = rng.normal(0, 1, 20)[groups] + rng.normal(0, 0.1, groups.size)
    estimate = clustered_mean(values.tolist(), groups.tolist())
    assert estimate.design_effect > 3.0
    assert estimate.interval.width > mean_ci(values.tolist()).interval.width


def test_clustered_mean_with_one_cluster_has_unknown_se() -> None:
    estimate = clustered_mean([1.0, 2.0, 3.0], ["a", "a", "a"])
    assert estimate.mean == 2.0
    assert math.isnan(estimate.se)
    assert math.isnan(estimate.low)
    assert estimate.naive_se > 0
    assert estimate.reason == "1 cluster: no spread between clusters to estimate"


def test_clustered_mean_rejects_misaligned_clusters() -> None:
    with pytest.raises(InvalidStatisticError, match="lengths 2 and 1"):
        clustered_mean([1.0, 2.0], ["a"])


# -- issue 16: small n and degenerate cases ------------------------------------------------


@pytest.mark.parametrize("n", [1, 5, 10, 2000])
def test_wilson_edges_are_exactly_zero_and_one(n: int) -> None:
    # 0 of 10 used to give a lower bound of 2.8e-17, outside its own rate.
    none, every = wilson_interval(0, n), wilson_interval(n, n)
    assert (none.rate, none.low) == (0.0, 0.0)
    assert (every.rate, every.high) == (1.0, 1.0)
    assert none.rate in none.interval and every.rate in every.interval


def test_epochs_that_all_pass_fall_back_to_wilson_over_the_samples() -> None:
    # 5 samples x 3 epochs, all passed: printed "100.0% [100.0%, 100.0%]" before.
    estimate = clustered_mean([1.0] * 15, [f"s{i // 3}" for i in range(15)], bounds=(0.0, 1.0))
    wilson = wilson_interval(5, 5)
    assert (estimate.low, estimate.high) == (wilson.low, wilson.high)
    assert estimate.low == pytest.approx(0.566, abs=5e-4)
    assert estimate.method == "Wilson (no spread)"


def test_equal_cluster_means_that_are_not_all_equal_values_also_fall_back() -> None:
    # Every sample passes 2 of 3 epochs: CR1 SE is 0, the interval is Wilson over 4 samples.
    values = [1.0, 1.0, 0.0] * 4
    estimate = clustered_mean(values, [i // 3 for i in range(12)], bounds=(0.0, 1.0))
    assert estimate.high - estimate.low > 0.3
    assert estimate.method == "Wilson (no spread)"


def test_clustered_mean_uses_t_with_clusters_minus_one_df() -> None:
    values = [0.1, 0.2, 0.9, 0.8, 0.4, 0.5, 0.7, 0.6, 0.3, 0.35]
    keys = [i // 2 for i in range(10)]
    estimate = clustered_mean(values, keys)
    half = stats.t.ppf(0.975, 4) * estimate.se
    assert estimate.low == pytest.approx(estimate.mean - half, rel=1e-12)


def test_bounded_mean_interval_stays_inside_the_score_range() -> None:
    # A 0-1 score's interval reached 1.064 in the viewer.
    values = [1.0, 1.0, 1.0, 0.6, 1.0]
    unbounded = mean_ci(values)
    bounded = mean_ci(values, bounds=(0.0, 1.0))
    assert unbounded.high > 1.0
    assert bounded.high == 1.0 and bounded.low == unbounded.low


def test_bounded_mean_of_equal_values_is_not_zero_width() -> None:
    estimate = mean_ci([1.0] * 5, bounds=(0.0, 1.0))
    assert (estimate.low, estimate.high) == (wilson_interval(5, 5).low, 1.0)
    assert mean_ci([0.5] * 4).interval.width == 0.0  # unbounded: nothing bounds the spread


@pytest.mark.parametrize("bounds", [(1.0, 0.0), (0.0, math.inf)])
def test_bounds_must_be_an_ordered_finite_pair(bounds: tuple[float, float]) -> None:
    with pytest.raises(InvalidStatisticError, match="bounds"):
        mean_ci([0.5, 0.6], bounds=bounds)


@pytest.mark.parametrize("seed", range(5))
def test_numpy_arrays_give_the_same_codes_and_values_as_lists(seed: int) -> None:
    from weakincentives.evals.stats import clustered_mean
    from weakincentives.evals.stats._intervals import cluster_codes
    from weakincentives.evals.stats._normal import as_values

    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 40, size=300)
    values = rng.choice([0.0, 0.25, 1.0, -0.0, 3.5], size=300)
    listed = cluster_codes(keys.tolist())
    arrayed = cluster_codes(keys)  # type: ignore[arg-type]  # an array: the fast path
    assert arrayed[1] == listed[1]
    assert arrayed[0].tolist() == listed[0].tolist()  # first-seen order
    assert as_values("v", values).tobytes() == as_values("v", values.tolist()).tobytes()
    pairs = ((values, keys), (values.tolist(), keys.tolist()))
    clustered = [clustered_mean(v, c) for v, c in pairs]  # type: ignore[arg-type]  # arrays
    assert repr(clustered[0]) == repr(clustered[1])
