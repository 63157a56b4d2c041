from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa

from weakincentives.evals.stats import (
    InvalidStatisticError,
    cohens_kappa,
    corrected_pass_rate,
    judge_agreement,
)


def _confusion(a: list[str], b: list[str]) -> np.ndarray:
    labels = sorted(set(a) | set(b))
    table = np.zeros((len(labels), len(labels)))
    for x, y in zip(a, b, strict=True):
        table[labels.index(x), labels.index(y)] += 1
    return table


def test_cohens_kappa_matches_statsmodels_on_the_confusion_table() -> None:
    rng = np.random.default_rng(15)
    for _ in range(200):
        k = int(rng.integers(2, 5))
        n = int(rng.integers(2, 200))
        a = [f"label-{x}" for x in rng.integers(0, k, n)]
        agree = rng.uniform(0, 1, n) < rng.uniform(0, 1)
        b = [
            x if same else f"label-{y}"
            for x, same, y in zip(a, agree, rng.integers(0, k, n), strict=True)
        ]
        table = _confusion(a, b)
        expected = float(sm_cohens_kappa(table)["kappa"])
        if math.isnan(expected):
            continue
        assert cohens_kappa(a, b) == pytest.approx(expected, abs=1e-12)


def test_cohens_kappa_known_values() -> None:
    assert cohens_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == 1.0
    assert cohens_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == -1.0
    assert cohens_kappa([1, 1, 0, 0], [1, 0, 1, 0]) == 0.0


def test_cohens_kappa_is_undefined_when_both_raters_use_one_label() -> None:
    assert math.isnan(cohens_kappa(["pass"] * 3, ["pass"] * 3))


@pytest.mark.parametrize(
    ("a", "b", "match"), [([], [], "at least one"), ([1], [1, 0], "lengths 1 and 2")]
)
def test_cohens_kappa_rejects_bad_input(a: list[int], b: list[int], match: str) -> None:
    with pytest.raises(InvalidStatisticError, match=match):
        cohens_kappa(a, b)


def test_judge_agreement_counts_and_rates() -> None:
    judge = [True, True, True, False, False, True, False, False, True, True]
    human = [True, True, False, False, False, True, True, False, True, False]
    result = judge_agreement(judge, human)
    assert (result.true_positives, result.false_positives) == (4, 2)
    assert (result.true_negatives, result.false_negatives) == (3, 1)
    assert (result.n_positive, result.n_negative, result.n) == (5, 5, 10)
    assert result.tpr == 0.8
    assert result.tnr == 0.6
    assert result.accuracy == 0.7
    assert result.kappa == pytest.approx(cohens_kappa(judge, human))
    assert result.tpr_estimate().rate == 0.8
    assert result.tnr_estimate().n == 5


def test_judge_agreement_without_negatives_has_unknown_tnr_and_cannot_correct() -> None:
    result = judge_agreement([True, False], [True, True])
    assert math.isnan(result.tnr)
    with pytest.raises(InvalidStatisticError, match="0 fails"):
        result.correct(5, 10)


@pytest.mark.parametrize(
    ("judge", "human", "match"),
    [([True, 2], [True, True], r"judge\[1\]"), ([], [], "at least one")],
)
def test_judge_agreement_rejects_non_boolean_labels(
    judge: list[object], human: list[bool], match: str
) -> None:
    with pytest.raises(InvalidStatisticError, match=match):
        judge_agreement(judge, human)  # type: ignore[arg-type]  # wrong on purpose


def test_corrected_pass_rate_point_estimate_is_rogan_gladen() -> None:
    result = corrected_pass_rate(
        70, 100, tpr=0.9, tnr=0.8, n_positive_labels=50, n_negative_labels=40
    )
    assert result.raw_rate == 0.7
    assert result.rate == pytest.approx((0.7 + 0.8 - 1) / (0.9 + 0.8 - 1))
    assert result.low < result.rate < result.high


def test_perfect_judge_leaves_the_rate_and_binomial_se_unchanged() -> None:
    result = corrected_pass_rate(
        30, 100, tpr=1.0, tnr=1.0, n_positive_labels=10, n_negative_labels=10
    )
    assert result.rate == 0.3
    assert result.se == pytest.approx(math.sqrt(0.3 * 0.7 / 100))


@pytest.mark.parametrize(("passes", "expected"), [(2, 0.0), (99, 1.0)])
def test_corrected_rate_is_clipped_to_the_unit_interval(passes: int, expected: float) -> None:
    result = corrected_pass_rate(
        passes, 100, tpr=0.9, tnr=0.9, n_positive_labels=50, n_negative_labels=50
    )
    assert result.rate == expected
    assert 0.0 <= result.low <= result.high <= 1.0


def _rogan_gladen(p: float, tpr: float, tnr: float) -> float:
    return (p + tnr - 1) / (tpr + tnr - 1)


def test_corrected_se_matches_a_numerical_delta_method() -> None:
    rng = np.random.default_rng(16)
    for _ in range(50):
        n, n_pos, n_neg = (int(x) for x in rng.integers(20, 500, 3))
        tpr, tnr = (float(x) for x in rng.uniform(0.65, 0.99, 2))
        passes = int(rng.integers(0, n + 1))
        p = passes / n
        h = 1e-6
        gradient = [
            (_rogan_gladen(p + h, tpr, tnr) - _rogan_gladen(p - h, tpr, tnr)) / (2 * h),
            (_rogan_gladen(p, tpr + h, tnr) - _rogan_gladen(p, tpr - h, tnr)) / (2 * h),
            (_rogan_gladen(p, tpr, tnr + h) - _rogan_gladen(p, tpr, tnr - h)) / (2 * h),
        ]
        variances = [p * (1 - p) / n, tpr * (1 - tpr) / n_pos, tnr * (1 - tnr) / n_neg]
        expected = math.sqrt(sum(g * g * v for g, v in zip(gradient, variances, strict=True)))
        result = corrected_pass_rate(
            passes, n, tpr=tpr, tnr=tnr, n_positive_labels=n_pos, n_negative_labels=n_neg
        )
        assert result.se == pytest.approx(expected, rel=1e-6)


def test_corrected_se_matches_a_simulation_within_five_percent() -> None:
    rng = np.random.default_rng(17)
    truth, tpr, tnr, n, n_pos, n_neg, rounds = 0.6, 0.85, 0.8, 2000, 300, 200, 20_000
    observed = rng.binomial(n, tpr * truth + (1 - tnr) * (1 - truth), rounds) / n
    tpr_hat = rng.binomial(n_pos, tpr, rounds) / n_pos
    tnr_hat = rng.binomial(n_neg, tnr, rounds) / n_neg
    simulated_sd = float(np.std((observed + tnr_hat - 1) / (tpr_hat + tnr_hat - 1)))
    passes = round((tpr * truth + (1 - tnr) * (1 - truth)) * n)
    result = corrected_pass_rate(
        passes, n, tpr=tpr, tnr=tnr, n_positive_labels=n_pos, n_negative_labels=n_neg
    )
    assert result.se == pytest.approx(simulated_sd, rel=0.05)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tpr": 0.5, "tnr": 0.5}, "tpr \\+ tnr must exceed 1"),
        ({"tpr": 0.3, "tnr": 0.6}, "no better than chance"),
        ({"tpr": 1.2, "tnr": 0.6}, "tpr must be in"),
        ({"n_positive_labels": 0}, "n_positive_labels"),
        ({"observed_passes": 11}, "cannot exceed n"),
    ],
)
def test_corrected_pass_rate_rejects_bad_input(kwargs: dict[str, Any], match: str) -> None:
    arguments: dict[str, Any] = {
        "observed_passes": 5,
        "n": 10,
        "tpr": 0.9,
        "tnr": 0.9,
        "n_positive_labels": 10,
        "n_negative_labels": 10,
    } | kwargs
    with pytest.raises(InvalidStatisticError, match=match):
        corrected_pass_rate(**arguments)
