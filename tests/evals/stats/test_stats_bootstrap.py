"""The bootstrap drawn by value counts is the bootstrap drawn by index, in distribution.

Pass/fail differences take three values, so the report's bootstrap draws how often each
value is picked (a multinomial) instead of `n` indices per resample. Both must give the
same distribution of resample means: checked here on many resamples, against the
by-index draws and against the exact mean and variance of the bootstrap distribution.
"""

from __future__ import annotations

import numpy as np
import pytest

from weakincentives.evals.stats._bootstrap import _by_counts, _by_index, bootstrap_mean_intervals

RESAMPLES = 40_000


def _differences(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.1, 0.75, 0.15])


def test_by_counts_has_the_by_index_distribution_of_means() -> None:
    x = _differences(2_000, seed=1)
    counted = _by_counts(x, None, RESAMPLES, seed=2)
    assert counted is not None  # three values among 2,000: drawn by counts
    indexed = _by_index([x], None, RESAMPLES, seed=3)[0]
    # The bootstrap distribution's exact mean and variance: the sample's, and var / n.
    assert counted.mean() == pytest.approx(x.mean(), abs=4 * x.std() / np.sqrt(x.size * RESAMPLES))
    assert counted.var() == pytest.approx(x.var() / x.size, rel=0.03)
    for q in (0.025, 0.25, 0.5, 0.75, 0.975):
        assert np.quantile(counted, q) == pytest.approx(np.quantile(indexed, q), abs=1.5e-3)


def test_clustered_by_counts_has_the_by_index_distribution_of_means() -> None:
    rng = np.random.default_rng(4)
    sizes = rng.integers(1, 4, size=900).astype(np.float64)  # 1 to 3 epochs per sample
    sums = np.array([_differences(int(s), seed=i).sum() for i, s in enumerate(sizes)])
    counted = _by_counts(sums, sizes, RESAMPLES, seed=5)
    assert counted is not None
    indexed = _by_index([sums], sizes, RESAMPLES, seed=6)[0]
    for q in (0.025, 0.5, 0.975):
        assert np.quantile(counted, q) == pytest.approx(np.quantile(indexed, q), abs=3e-3)


def test_many_distinct_values_are_drawn_by_index_and_share_the_draws() -> None:
    rng = np.random.default_rng(7)
    scores = rng.normal(size=400)
    passed = _differences(400, seed=8)
    assert _by_counts(scores, None, 100, seed=0) is None
    together = bootstrap_mean_intervals([passed, scores], None, 500, 0.95, seed=9)
    alone = [bootstrap_mean_intervals([x], None, 500, 0.95, seed=9)[0] for x in (passed, scores)]
    assert together == alone
