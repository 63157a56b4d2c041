"""`Floats`: the per-pair differences of a paired comparison, 8 bytes per value."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from weakincentives.evals.stats import Floats, paired_comparison


def test_floats_read_like_the_tuple_they_replace() -> None:
    values = Floats([0.5, -1.0, 0.0])
    assert len(values) == 3
    assert values[1] == -1.0 and values[-1] == 0.0
    assert values[:2] == (0.5, -1.0)
    assert list(values) == [0.5, -1.0, 0.0]
    assert values == (0.5, -1.0, 0.0) and values == [0.5, -1.0, 0.0]
    assert values != (0.5, -1.0) and values != (0.5, -1.0, 1.0)
    assert values == Floats(np.array([0.5, -1.0, 0.0]).tobytes())
    assert hash(values) == hash(Floats((0.5, -1.0, 0.0)))
    assert repr(values) == "Floats(3 values)"
    assert values.index(0.0) == 2 and 0.5 in values
    with pytest.raises(IndexError):
        values[3]


def test_a_paired_comparison_keeps_its_differences_as_floats() -> None:
    rng = np.random.default_rng(7)
    base = rng.random(10_000)
    treat = rng.random(10_000)
    result = paired_comparison(base.tolist(), treat.tolist(), bootstrap_resamples=0)
    assert isinstance(result.differences, Floats)
    assert result.differences == (treat - base).tolist()
    # 8 bytes per pair, not a Python float and a pointer (about 40 bytes).
    buffer = result.differences._values
    assert buffer.itemsize * len(buffer) == 8 * 10_000
    assert sys.getsizeof(buffer) < 8 * 10_000 * 1.1
