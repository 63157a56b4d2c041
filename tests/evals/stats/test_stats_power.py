from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from weakincentives.evals.stats import (
    InvalidStatisticError,
    minimum_detectable_effect,
    required_sample_size,
    required_sample_size_proportions,
)


@pytest.mark.parametrize("two_sided", [True, False])
def test_minimum_detectable_effect_is_the_closed_form(two_sided: bool) -> None:
    rng = np.random.default_rng(10)
    for _ in range(100):
        n = int(rng.integers(1, 10_000))
        sd = float(rng.uniform(0.01, 3))
        alpha = float(rng.uniform(0.001, 0.2))
        power = float(rng.uniform(0.5, 0.99))
        z_alpha = stats.norm.isf(alpha / 2 if two_sided else alpha)
        expected = (z_alpha + stats.norm.ppf(power)) * sd / math.sqrt(n)
        mde = minimum_detectable_effect(n, sd=sd, alpha=alpha, power=power, two_sided=two_sided)
        assert mde == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("n", [10, 100, 2500])
def test_minimum_detectable_effect_agrees_with_statsmodels_power_solver(n: int) -> None:
    # statsmodels also counts the far rejection tail, which moves the answer by < 1e-5.
    effect = NormalIndPower().solve_power(nobs1=n, alpha=0.05, power=0.8, ratio=0)
    assert minimum_detectable_effect(n, sd=1.0) == pytest.approx(effect, rel=1e-4)


def test_required_sample_size_inverts_minimum_detectable_effect() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        sd = float(rng.uniform(0.05, 2))
        effect = float(rng.uniform(0.01, 1)) * float(rng.choice([-1, 1]))
        n = required_sample_size(effect, sd=sd)
        assert minimum_detectable_effect(n, sd=sd) <= abs(effect) * (1 + 1e-9)
        if n > 1:
            assert minimum_detectable_effect(n - 1, sd=sd) > abs(effect)


def test_required_sample_size_of_a_textbook_case() -> None:
    # Detecting half a standard deviation at alpha 0.05 and power 0.8 takes 32 pairs.
    assert required_sample_size(0.5, sd=1.0) == 32


def test_required_sample_size_proportions_matches_statsmodels() -> None:
    rng = np.random.default_rng(12)
    for _ in range(100):
        p1, p2 = (float(x) for x in rng.uniform(0.02, 0.98, 2))
        if abs(p1 - p2) < 0.02:
            continue
        h = proportion_effectsize(p1, p2)
        reference = NormalIndPower().solve_power(effect_size=h, alpha=0.05, power=0.8, ratio=1)
        n = required_sample_size_proportions(p1, p2)
        assert n == math.ceil(reference - 1e-6)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: minimum_detectable_effect(0, sd=1.0), "n must be >= 1"),
        (lambda: minimum_detectable_effect(10, sd=-1.0), "sd"),
        (lambda: minimum_detectable_effect(10, sd=1.0, alpha=0.0), "alpha"),
        (lambda: minimum_detectable_effect(10, sd=1.0, power=1.0), "power"),
        (lambda: required_sample_size(0.0, sd=1.0), "effect"),
        (lambda: required_sample_size(math.nan, sd=1.0), "effect"),
        (lambda: required_sample_size_proportions(0.5, 0.5), "no sample size"),
        (lambda: required_sample_size_proportions(1.2, 0.5), "p1"),
    ],
)
def test_power_functions_reject_bad_input(call: Callable[[], object], match: str) -> None:
    with pytest.raises(InvalidStatisticError, match=match):
        call()
