from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weakincentives.evals.stats import (
    InvalidStatisticError,
    mean_ci,
    pass_at_k,
    pass_at_k_by_sample,
    pass_hat_k,
    pass_hat_k_by_sample,
)


@st.composite
def _counts(draw: st.DrawFn) -> tuple[int, int, int]:
    n = draw(st.integers(1, 400))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


@settings(derandomize=True, max_examples=300)
@given(_counts())
def test_pass_at_k_matches_combinatorics(counts: tuple[int, int, int]) -> None:
    n, c, k = counts
    expected = 1 - Fraction(comb(n - c, k), comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(expected), rel=1e-12, abs=1e-13)


@settings(derandomize=True, max_examples=300)
@given(_counts())
def test_pass_hat_k_matches_combinatorics(counts: tuple[int, int, int]) -> None:
    n, c, k = counts
    expected = Fraction(comb(c, k), comb(n, k))
    assert pass_hat_k(n, c, k) == pytest.approx(float(expected), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize(
    ("n", "c", "k", "at_k", "hat_k"),
    [
        (10, 0, 3, 0.0, 0.0),
        (10, 10, 3, 1.0, 1.0),
        (10, 5, 1, 0.5, 0.5),
        (5, 3, 5, 1.0, 0.0),
        (4, 2, 2, 1 - 1 / 6, 1 / 6),
    ],
)
def test_pass_at_k_and_pass_hat_k_known_values(
    n: int, c: int, k: int, at_k: float, hat_k: float
) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(at_k)
    assert pass_hat_k(n, c, k) == pytest.approx(hat_k)


def test_large_n_stays_finite_where_binomials_overflow_floats() -> None:
    value = pass_at_k(5000, 1, 10)
    assert value == pytest.approx(10 / 5000)
    assert 0.0 < pass_hat_k(5000, 4990, 1000) < 1.0


def test_by_sample_helpers_feed_mean_ci() -> None:
    rng = np.random.default_rng(13)
    passes = rng.integers(0, 11, 50).tolist()
    at_k = pass_at_k_by_sample(10, passes, 3)
    assert at_k == tuple(pass_at_k(10, c, 3) for c in passes)
    per_sample_trials = [10] * 50
    assert pass_hat_k_by_sample(per_sample_trials, passes, 3) == tuple(
        pass_hat_k(10, c, 3) for c in passes
    )
    assert mean_ci(at_k).mean == pytest.approx(sum(at_k) / 50)


@pytest.mark.parametrize(
    ("n", "c", "k", "match"),
    [
        (5, 2, 6, "k \\(6\\) cannot exceed n"),
        (5, 6, 1, "cannot exceed n"),
        (5, 2, 0, "k must be >= 1"),
        (0, 0, 1, "n must be >= 1"),
        (5, -1, 1, "c must be >= 0"),
    ],
)
@pytest.mark.parametrize("estimator", [pass_at_k, pass_hat_k])
def test_pass_k_rejects_impossible_counts(
    estimator: Callable[[int, int, int], float], n: int, c: int, k: int, match: str
) -> None:
    with pytest.raises(InvalidStatisticError, match=match):
        estimator(n, c, k)


def test_by_sample_names_the_bad_sample_and_checks_lengths() -> None:
    with pytest.raises(InvalidStatisticError, match="sample 1"):
        pass_at_k_by_sample(3, [1, 4], 2)
    with pytest.raises(InvalidStatisticError, match="lengths 2 and 3"):
        pass_hat_k_by_sample([3, 3], [1, 2, 3], 2)
