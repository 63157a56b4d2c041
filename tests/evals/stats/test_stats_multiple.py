from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from weakincentives.evals.stats import InvalidStatisticError, benjamini_hochberg, holm

Adjust = Callable[[Iterable[float]], tuple[float, ...]]
_METHODS: list[tuple[Adjust, str]] = [(holm, "holm"), (benjamini_hochberg, "fdr_bh")]


def _random_p_values(rng: np.random.Generator) -> np.ndarray:
    m = int(rng.integers(1, 60))
    p = rng.uniform(0, 1, m) ** rng.uniform(0.5, 6)  # skew towards small p-values
    ties = rng.integers(0, m, m // 4)
    p[ties] = p[0]  # some exact ties
    p[rng.integers(0, m)] = float(rng.choice([0.0, 1.0, p[0]]))
    return p


@pytest.mark.parametrize(("adjust", "method"), _METHODS)
def test_adjustment_matches_statsmodels_in_input_order(adjust: Adjust, method: str) -> None:
    rng = np.random.default_rng(14)
    # Few rounds: statsmodels' holm runs gc.collect() on every call.
    for _ in range(40):
        p = _random_p_values(rng)
        ours = adjust(p.tolist())
        reference = multipletests(p, method=method)[1]
        np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-12)


def test_holm_and_bh_on_a_worked_example() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])


@pytest.mark.parametrize(("adjust", "method"), _METHODS)
def test_adjusted_p_values_never_shrink_and_stay_at_most_one(adjust: Adjust, method: str) -> None:
    p = [0.9, 0.5, 0.001, 0.7]
    adjusted = adjust(p)
    assert all(a >= raw for a, raw in zip(adjusted, p, strict=True))
    assert max(adjusted) <= 1.0


@pytest.mark.parametrize(("adjust", "method"), _METHODS)
def test_no_p_values_give_no_adjusted_values(adjust: Adjust, method: str) -> None:
    assert adjust([]) == ()


@pytest.mark.parametrize(("adjust", "method"), _METHODS)
@pytest.mark.parametrize("bad", [-0.01, 1.01, math.nan])
def test_p_values_outside_unit_interval_are_rejected(
    adjust: Adjust, method: str, bad: float
) -> None:
    with pytest.raises(InvalidStatisticError, match=r"p_values\[1\]"):
        adjust([0.5, bad])
