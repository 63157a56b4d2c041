"""The seeded percentile bootstrap of a mean, over pairs or over whole clusters.

A resample draws `n` units with replacement; its statistic is the mean over the pairs
drawn. Two ways to draw, the same distribution:

- **by index** (`n` random indices per resample): the general way, `resamples * n`
  random numbers (2,000 resamples of 100,000 pairs: 200 million, over a second);
- **by value counts**: how often each unit is drawn is Multinomial(n, 1/n each), so how
  often each *distinct* unit value is drawn is Multinomial(n, count / n) over the distinct
  values. When the units take few distinct values, as the differences of pass/fail
  outcomes do (-1, 0, 1), a resample is `k` counts instead of `n` indices: the same
  bootstrap distribution, exactly, at a cost that does not grow with `n`.

The second is used when there are at most an eighth as many distinct values as units.
Both are seeded; an interval depends only on the sample, the seed and the number of
resamples (and several samples with many distinct values share one set of indices, which
gives each the interval it would get alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["bootstrap_mean_intervals"]

# The bootstrap draws at most this many indices at once, bounding its memory.
_BOOTSTRAP_CHUNK = 1 << 20
# Draw by value counts when the distinct values are at most this share of the units.
_FEW_VALUES = 1 / 8


def bootstrap_mean_intervals(
    samples: Sequence[npt.NDArray[np.float64]],
    sizes: npt.NDArray[np.float64] | None,
    resamples: int,
    confidence: float,
    seed: int,
) -> list[tuple[float, float]]:
    """Percentile intervals of the mean over `resamples` draws with replacement, per sample.

    Unclustered (`sizes` None), a sample holds the differences. Clustered, it holds the
    per-cluster sums of the differences and `sizes` the pairs per cluster: a draw picks
    whole clusters and its mean is over all of their pairs. Every sample must have as many
    units. Each interval equals the one of that sample bootstrapped alone with the same
    seed.
    """
    tail = (1.0 - confidence) / 2.0
    ends: list[tuple[float, float] | None] = [None] * len(samples)
    by_index: list[int] = []
    for k, totals in enumerate(samples):
        means = _by_counts(totals, sizes, resamples, seed)
        if means is None:
            by_index.append(k)
        else:
            ends[k] = _percentiles(means, tail)
    if by_index:
        rows = _by_index([samples[k] for k in by_index], sizes, resamples, seed)
        for k, means in zip(by_index, rows, strict=True):
            ends[k] = _percentiles(means, tail)
    return [end for end in ends if end is not None]  # every sample has its interval


def _percentiles(means: npt.NDArray[np.float64], tail: float) -> tuple[float, float]:
    import numpy as np

    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def _by_counts(
    totals: npt.NDArray[np.float64],
    sizes: npt.NDArray[np.float64] | None,
    resamples: int,
    seed: int,
) -> npt.NDArray[np.float64] | None:
    """The resample means drawn by value counts, or None when the values are too many."""
    import numpy as np

    n = totals.size
    if sizes is None:
        values, counts = np.unique(totals, return_counts=True)
        if values.size > _FEW_VALUES * n:
            return None
        drawn = np.random.default_rng(seed).multinomial(n, counts / n, size=resamples)
        return (drawn @ values) / n
    units, counts = np.unique(np.stack((totals, sizes), axis=1), axis=0, return_counts=True)
    if units.shape[0] > _FEW_VALUES * n:
        return None
    drawn = np.random.default_rng(seed).multinomial(n, counts / n, size=resamples)
    return (drawn @ units[:, 0]) / (drawn @ units[:, 1])


def _by_index(
    samples: Sequence[npt.NDArray[np.float64]],
    sizes: npt.NDArray[np.float64] | None,
    resamples: int,
    seed: int,
) -> npt.NDArray[np.float64]:
    """The resample means of each sample, drawn by index (one set of indices for all)."""
    import numpy as np

    n = samples[0].size
    rng = np.random.default_rng(seed)
    rows = max(1, _BOOTSTRAP_CHUNK // n)
    means = np.empty((len(samples), resamples))
    for start in range(0, resamples, rows):
        stop = min(start + rows, resamples)
        indices = rng.integers(0, n, size=(stop - start, n))
        pairs = None if sizes is None else sizes[indices].sum(axis=1)
        for k, totals in enumerate(samples):
            if pairs is None:
                means[k, start:stop] = totals[indices].mean(axis=1)
            else:
                means[k, start:stop] = totals[indices].sum(axis=1) / pairs
    return means
