from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.power import NormalIndPower, TTestPower
from statsmodels.stats.proportion import proportion_effectsize

from weakincentives.evals.stats import (
    InvalidStatisticError,
    minimum_detectable_effect,
    required_sample_size,
    required_sample_size_proportions,
    t_test_power,
)


@pytest.mark.parametrize("two_sided", [True, False])
def test_minimum_detectable_effect_matches_statsmodels_t_test_power(two_sided: bool) -> None:
    rng = np.random.default_rng(10)
    for _ in range(25):
        n = int(rng.integers(2, 5_000))
        sd = float(rng.uniform(0.01, 3))
        alpha = float(rng.uniform(0.001, 0.2))
        power = float(rng.uniform(0.5, 0.99))
        alternative = "two-sided" if two_sided else "larger"
        mde = minimum_detectable_effect(n, sd=sd, alpha=alpha, power=power, two_sided=two_sided)
        # statsmodels' own solver stops early (and may return the mirrored root): check the
        # power at our answer with its exact noncentral-t power instead.
        achieved = TTestPower().power(mde / sd, n, alpha, alternative=alternative)
        assert achieved == pytest.approx(power, abs=1e-8)


@pytest.mark.parametrize("n", [2, 5, 10, 100, 2500])
def test_minimum_detectable_effect_is_wider_than_the_normal_formula_at_small_n(n: int) -> None:
    normal = (stats.norm.isf(0.025) + stats.norm.ppf(0.8)) / math.sqrt(n)
    mde = minimum_detectable_effect(n, sd=1.0)
    assert mde > normal
    assert mde == pytest.approx(normal, rel=0.01 if n >= 100 else 10)


def test_t_test_power_matches_the_noncentral_t_distribution() -> None:
    for df in (1, 2, 4, 9, 29, 200, 5000):
        n = df + 1
        for d in (0.01, 0.2, 1.0, 3.0):
            for alpha in (0.01, 0.05):
                ours = t_test_power(d, se=1 / math.sqrt(n), df=df, alpha=alpha)
                crit = stats.t.isf(alpha / 2, df)
                ncp = d * math.sqrt(n)
                if ncp > 30:  # scipy's noncentral t returns NaN far out; the power is 1 there
                    assert ours == pytest.approx(1.0, abs=1e-12)
                    continue
                # scipy's lower tail is NaN where it underflows (far below 1e-10).
                wrong_tail = float(np.nan_to_num(stats.nct.cdf(-crit, df, ncp)))
                reference = stats.nct.sf(crit, df, ncp) + wrong_tail
                assert ours == pytest.approx(reference, abs=1e-10)


def test_required_sample_size_is_statsmodels_t_test_sample_size() -> None:
    rng = np.random.default_rng(11)
    for _ in range(30):
        sd = float(rng.uniform(0.2, 2))
        effect = sd * float(rng.uniform(0.05, 2)) * float(rng.choice([-1, 1]))
        power = float(rng.choice([0.8, 0.9]))
        n = required_sample_size(effect, sd=sd, power=power)
        reference = TTestPower().solve_power(abs(effect) / sd, alpha=0.05, power=power)
        assert n == max(2, math.ceil(reference - 1e-6))
        assert TTestPower().power(abs(effect) / sd, n, 0.05) >= power


def test_required_sample_size_of_a_textbook_case() -> None:
    # Half a standard deviation at alpha 0.05 and power 0.8: 34 pairs for the paired
    # t-test (the normal formula's 32 falls short, at 78% power).
    assert required_sample_size(0.5, sd=1.0) == 34


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
        (lambda: minimum_detectable_effect(1, sd=1.0), "n must be >= 2"),
        (lambda: t_test_power(0.1, se=0.0, df=3), "se"),
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
