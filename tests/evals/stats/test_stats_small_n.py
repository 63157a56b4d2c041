"""Student t, Newcombe's paired interval, McNemar power and the shared outcome summary."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from weakincentives.evals.stats import (
    InvalidStatisticError,
    connor_sample_size,
    mcnemar,
    mcnemar_detectable_effect,
    mcnemar_power,
    mcnemar_sample_size,
    newcombe_paired_interval,
    repeated_samples,
    summarize_outcomes,
    t_ppf,
    t_sf,
    wilson_interval,
)

_DFS = (1, 2, 3, 4, 7, 29, 120, 5000)


@pytest.mark.parametrize("df", _DFS)
def test_t_quantile_matches_scipy(df: int) -> None:
    for p in (1e-9, 1e-4, 0.005, 0.025, 0.1, 0.3, 0.5, 0.7, 0.975, 0.9995):
        assert t_ppf(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("df", _DFS)
def test_t_tail_matches_scipy(df: int) -> None:
    for t in (-3.0, -0.5, 0.0, 0.4, 1.0, 2.0, 4.5, 12.0, 60.0):
        assert t_sf(t, df) == pytest.approx(stats.t.sf(t, df), rel=1e-10, abs=1e-300)


def test_t_edges_and_bad_input() -> None:
    assert (t_ppf(0.0, 3), t_ppf(1.0, 3), t_ppf(0.5, 3)) == (-math.inf, math.inf, 0.0)
    assert (t_sf(math.inf, 3), t_sf(-math.inf, 3)) == (0.0, 1.0)
    with pytest.raises(InvalidStatisticError, match="degrees of freedom"):
        t_ppf(0.3, 0)
    with pytest.raises(InvalidStatisticError, match=r"p must be in \[0, 1\]"):
        t_ppf(1.5, 3)


# -- Newcombe's paired interval ---------------------------------------------------------------


def test_newcombe_matches_the_published_worked_example() -> None:
    # Cavo et al. (2012): complete response before (rows) and after (columns) consolidation
    # therapy, 161 patients. Fagerland, Lydersen and Laake (2014, Statistics in Medicine 33,
    # 2850-2875, Table VI) give the Newcombe square-and-add interval as
    # -0.0621 (-0.1186 to -0.0046).
    interval = newcombe_paired_interval(59, 6, 16, 80)
    assert (round(interval.low, 4), round(interval.high, 4)) == (-0.1186, -0.0046)


def _newcombe_reference(a: float, b: float, c: float, d: float, z: float) -> tuple[float, float]:
    """Newcombe's method 10 written out from the paper, Wilson margins from statsmodels."""
    from statsmodels.stats.proportion import proportion_confint

    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    alpha = 2 * stats.norm.sf(z)
    l1, u1 = proportion_confint(a + b, n, alpha=alpha, method="wilson")
    l2, u2 = proportion_confint(a + c, n, alpha=alpha, method="wilson")
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    corrected = cross - n / 2 if cross > n / 2 else (0.0 if cross >= 0 else cross)
    phi = corrected / math.sqrt(margins) if margins else 0.0
    dl = math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    du = math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    return p1 - p2 - dl, p1 - p2 + du


def test_newcombe_matches_the_formula_on_random_tables() -> None:
    rng = np.random.default_rng(31)
    z = stats.norm.isf(0.025)
    for _ in range(200):
        a, b, c, d = (int(x) for x in rng.integers(0, 40, 4))
        if a + b + c + d == 0:
            continue
        interval = newcombe_paired_interval(a, b, c, d)
        low, high = _newcombe_reference(a, b, c, d, z)
        assert interval.low == pytest.approx(max(low, -1.0), abs=1e-12)
        assert interval.high == pytest.approx(min(high, 1.0), abs=1e-12)
        assert interval.low <= (b - c) / (a + b + c + d) <= interval.high


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ((0, 3, 0, 0), (0.2059, 1.0)),  # 3 samples that all improve
        ((6, 0, 0, 0), (-0.3903, 0.3903)),  # 6 identical passes
        ((3, 0, 0, 3), (-0.2551, 0.2551)),  # 6 identical outcomes, mixed
    ],
)
def test_newcombe_is_never_zero_width(
    table: tuple[int, int, int, int], expected: tuple[float, float]
) -> None:
    interval = newcombe_paired_interval(*table)
    assert (round(interval.low, 4), round(interval.high, 4)) == expected


def test_newcombe_rejects_an_empty_or_negative_table() -> None:
    with pytest.raises(InvalidStatisticError, match="empty"):
        newcombe_paired_interval(0, 0, 0, 0)
    with pytest.raises(InvalidStatisticError, match=">= 0"):
        newcombe_paired_interval(1, -1, 0, 0)


# -- McNemar power --------------------------------------------------------------------------


def _brute_force_power(n: int, p10: float, p01: float, alpha: float = 0.05) -> float:
    """Sum the multinomial probability of every table McNemar rejects."""
    total = 0.0
    p11 = 1.0 - p10 - p01
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if mcnemar(b, c).p_value <= alpha:
                total += (
                    math.comb(n, b) * math.comb(n - b, c) * p10**b * p01**c * p11 ** (n - b - c)
                )
    return total


@pytest.mark.parametrize(
    ("n", "p10", "p01"), [(3, 0.0, 1.0), (10, 0.1, 0.4), (30, 0.2, 0.1), (60, 0.15, 0.3)]
)
def test_mcnemar_power_is_the_exact_sum_over_tables(n: int, p10: float, p01: float) -> None:
    assert mcnemar_power(n, p10=p10, p01=p01) == pytest.approx(
        _brute_force_power(n, p10, p01), abs=1e-12
    )


def test_power_planning_for_the_issue_case() -> None:
    # --baseline-rate 0.7 --effect 0.05, independent outcomes: the z-test planner printed
    # 1248 pairs, where McNemar's power is 0.786; Connor's formula gives 1254 (0.788).
    p10, p01 = 0.7 * 0.25, 0.75 * 0.3
    assert mcnemar_power(1248, p10=p10, p01=p01) == pytest.approx(0.786, abs=5e-4)
    assert connor_sample_size(p10=p10, p01=p01) == 1254
    n = mcnemar_sample_size(p10=p10, p01=p01)
    assert n == 1291
    assert mcnemar_power(n, p10=p10, p01=p01) >= 0.8 > mcnemar_power(n - 1, p10=p10, p01=p01)


def test_mcnemar_detectable_effect_is_unknown_when_no_effect_can_be_detected() -> None:
    # 3 pairs that all improve give p = 0.25: no effect reaches 80% power.
    assert math.isnan(mcnemar_detectable_effect(3, discordant=1.0))
    assert math.isnan(mcnemar_detectable_effect(500, discordant=0.0))
    effect = mcnemar_detectable_effect(500, discordant=0.2)
    p10, p01 = (0.2 - effect) / 2, (0.2 + effect) / 2
    assert mcnemar_power(500, p10=p10, p01=p01) == pytest.approx(0.8, abs=1e-6)


def test_mcnemar_power_rejects_impossible_rates() -> None:
    with pytest.raises(InvalidStatisticError, match="cannot exceed 1"):
        mcnemar_power(10, p10=0.6, p01=0.6)
    with pytest.raises(InvalidStatisticError, match="no effect"):
        mcnemar_sample_size(p10=0.2, p01=0.2)


# -- the shared outcome summary ---------------------------------------------------------


def test_summary_without_repeats_is_wilson_and_t() -> None:
    passed = [True, False, True, True, False]
    scores = [1.0, 0.2, 0.9, 0.8, 0.1]
    summary = summarize_outcomes(passed, scores, clusters=repeated_samples(list("abcde")))
    wilson = wilson_interval(3, 5)
    assert (summary.pass_rate_low, summary.pass_rate_high) == (wilson.low, wilson.high)
    half = stats.t.ppf(0.975, 4) * stats.sem(scores)
    assert summary.mean_low == pytest.approx(max(np.mean(scores) - half, 0.0))
    assert summary.n_clusters is None
    assert summary.rate().interval == wilson.interval


def test_summary_with_epochs_that_all_pass_is_never_zero_width() -> None:
    samples = [f"s{i}" for i in range(5) for _ in range(3)]
    summary = summarize_outcomes([True] * 15, [1.0] * 15, clusters=repeated_samples(samples))
    assert summary.n_clusters == 5
    assert (summary.pass_rate_low, summary.pass_rate_high) == (wilson_interval(5, 5).low, 1.0)
    assert summary.pass_rate_method == "Wilson (no spread)"
    assert summary.mean_high == 1.0


def test_summary_of_nothing_and_of_one_sample() -> None:
    empty = summarize_outcomes([], [])
    assert (empty.pass_rate_low, empty.pass_rate_high, empty.reason) == (0.0, 1.0, "no results")
    one = summarize_outcomes([True, False], [1.0, 0.0], clusters=["a", "a"])
    assert math.isnan(one.pass_rate_low)
    assert one.reason.startswith("1 cluster")
