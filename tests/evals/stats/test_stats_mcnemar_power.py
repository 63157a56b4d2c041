"""McNemar's power against a reference built from scipy's binomial distribution.

The reference is independent of the code under test: the discordant counts are weighted by
`scipy.stats.binom.pmf`, the rejection edge at each count is found from `mcnemar`'s own
p-values, and the rejection probability is `scipy.stats.binom.cdf` on both sides.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from weakincentives.evals.stats import mcnemar, mcnemar_detectable_effect, mcnemar_power
from weakincentives.evals.stats._binomial import log_pmf
from weakincentives.evals.stats._mcnemar_power import _rejection_edges

TOLERANCE = 1e-12
"""Absolute agreement of a power with the reference (documented in `_mcnemar_power`)."""


def _edge(m: int, alpha: float) -> int:
    """The largest `b <= m / 2` at which `mcnemar(b, m - b)` rejects, or -1."""
    low, high = -1, m // 2
    while low < high:
        middle = (low + high + 1) // 2
        if mcnemar(middle, m - middle).p_value <= alpha:
            low = middle
        else:
            high = middle - 1
    return low


def _reference_power(n: int, p10: float, p01: float, alpha: float = 0.05) -> float:
    psi = p10 + p01
    pi = p01 / psi
    sd = math.sqrt(n * psi * (1 - psi))
    ms = np.arange(
        max(0, math.floor(n * psi - 20 * sd - 5)), min(n, math.ceil(n * psi + 20 * sd + 5)) + 1
    )
    weights = scipy_stats.binom.pmf(ms, n, psi)
    edges = np.array([_edge(int(m), alpha) for m in ms])
    reject = scipy_stats.binom.cdf(edges, ms, pi) + scipy_stats.binom.cdf(edges, ms, 1 - pi)
    return float(np.sum(weights * reject))


@pytest.mark.parametrize("n", [30, 1000, 12_345, 200_000])
@pytest.mark.parametrize(
    ("p10", "p01"), [(0.1, 0.2), (0.05, 0.05), (0.01, 0.02), (0.1, 0.105), (0.15, 0.155)]
)
def test_mcnemar_power_matches_the_scipy_reference(n: int, p10: float, p01: float) -> None:
    assert mcnemar_power(n, p10=p10, p01=p01) == pytest.approx(
        _reference_power(n, p10, p01), abs=TOLERANCE
    )


def test_mcnemar_power_at_another_alpha_matches_the_reference() -> None:
    assert mcnemar_power(5_000, p10=0.1, p01=0.13, alpha=0.01) == pytest.approx(
        _reference_power(5_000, 0.1, 0.13, alpha=0.01), abs=TOLERANCE
    )


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.2])
def test_rejection_edges_are_where_mcnemar_rejects(alpha: float) -> None:
    ms = np.arange(0, 3_000, dtype=np.int64)
    z = -scipy_stats.norm.ppf(alpha / 2)
    edges = _rejection_edges(ms, z, alpha)
    assert edges.tolist() == [_edge(int(m), alpha) for m in ms]


@pytest.mark.parametrize("n", [1, 16, 40, 1_000, 123_457, 10_000_000])
@pytest.mark.parametrize("p", [1e-6, 0.01, 0.3, 0.5, 0.999])
def test_binomial_probabilities_match_scipy(n: int, p: float) -> None:
    near_mean = (n * p + np.arange(-200, 200)).astype(np.int64)
    spread = np.linspace(0, n, 50).astype(np.int64)
    x = np.unique(np.clip(np.concatenate([np.arange(0, min(n, 40) + 1), spread, near_mean]), 0, n))
    reference = scipy_stats.binom.pmf(x, n, p)
    ours = np.exp(log_pmf(x, np.full_like(x, n), p))
    shown = reference > 1e-250
    np.testing.assert_allclose(ours[shown], reference[shown], rtol=1e-11)
    assert np.all(ours[~shown] < 1e-240)


def test_detectable_effect_at_20k_discordant_pairs_has_the_asked_power() -> None:
    # 50,000 pairs, 40% discordant: 20,000 discordant pairs (took seconds before).
    n, discordant = 50_000, 0.4
    effect = mcnemar_detectable_effect(n, discordant=discordant)
    p10, p01 = (discordant - effect) / 2, (discordant + effect) / 2
    assert _reference_power(n, p10, p01) == pytest.approx(0.8, abs=1e-6)
    assert _reference_power(n, p10 + 2e-5, p01 - 2e-5) < 0.8


def test_detectable_effect_is_searched_once_for_the_same_arguments() -> None:
    # A report asks for its pass/fail and its score comparison with the same numbers.
    from weakincentives.evals.stats._mcnemar_power import _detectable_effect

    _detectable_effect.cache_clear()
    first = mcnemar_detectable_effect(2_500, discordant=0.3)
    again = mcnemar_detectable_effect(2_500, discordant=0.3)
    other = mcnemar_detectable_effect(2_500, discordant=0.3, power=0.9)
    assert again == first
    assert other > first
    info = _detectable_effect.cache_info()
    assert (info.hits, info.misses) == (1, 2)
