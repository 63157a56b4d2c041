from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

import weakincentives.evals.stats as wstats
from weakincentives.evals.stats import InvalidStatisticError, normal_ppf


def test_all_is_sorted_and_importable() -> None:
    assert wstats.__all__ == sorted(wstats.__all__)
    for name in wstats.__all__:
        assert getattr(wstats, name) is not None
        assert name in (wstats.__doc__ or "") or name[0].isupper()


def test_invalid_statistic_error_is_an_eval_value_error() -> None:
    from weakincentives.errors import EvalError

    assert issubclass(InvalidStatisticError, EvalError)
    assert issubclass(InvalidStatisticError, ValueError)


def test_normal_ppf_matches_scipy_to_double_precision() -> None:
    rng = np.random.default_rng(1)
    central = rng.uniform(0.0, 1.0, 2000)
    tails = 10.0 ** -rng.uniform(1.0, 300.0, 500)
    for p in [*central, *tails, *(1.0 - tails[:100]), 0.5, 0.075, 0.925, 1e-300]:
        expected = float(special.ndtri(p))
        assert normal_ppf(float(p)) == pytest.approx(expected, rel=2e-15, abs=1e-300)


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_normal_ppf_gives_the_usual_critical_values(confidence: float) -> None:
    tail = (1.0 - confidence) / 2.0
    assert -normal_ppf(tail) == pytest.approx(stats.norm.isf(tail), rel=1e-15)


def test_normal_ppf_ends_and_symmetry() -> None:
    assert normal_ppf(0.0) == -math.inf
    assert normal_ppf(1.0) == math.inf
    assert normal_ppf(0.5) == 0.0
    assert normal_ppf(0.3) == -normal_ppf(0.7)


@pytest.mark.parametrize("p", [-0.1, 1.5, math.nan])
def test_normal_ppf_rejects_values_outside_unit_interval(p: float) -> None:
    with pytest.raises(InvalidStatisticError, match="probability"):
        normal_ppf(p)
