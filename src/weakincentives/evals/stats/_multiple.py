"""Adjusting p-values when many comparisons are made at once.

Comparing many experiments (or one experiment on many slices) against a baseline makes
some "significant" result likely by chance. Adjust the p-values, then compare the
*adjusted* values with alpha:

- `holm` controls the family-wise error rate (the chance of any false positive). It is
  uniformly more powerful than Bonferroni and needs no assumptions.
- `benjamini_hochberg` controls the false discovery rate (the expected share of false
  positives among the rejections); it is less strict and suits screening many variants.

Both return adjusted p-values in input order and match statsmodels
`multipletests(method="holm")` and `multipletests(method="fdr_bh")`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from weakincentives.errors import InvalidStatisticError

from ._normal import as_values

if TYPE_CHECKING:  # numpy itself is imported on first use (see the package docstring)
    import numpy as np
    import numpy.typing as npt


def _p_values(p_values: Iterable[float]) -> npt.NDArray[np.float64]:
    import numpy as np

    array = as_values("p_values", p_values, allow_empty=True)
    outside = np.flatnonzero((array < 0.0) | (array > 1.0))
    if outside.size:
        first = int(outside[0])
        raise InvalidStatisticError(
            f"p_values[{first}] is {array[first]!r}; p-values lie in [0, 1]"
        )
    return array


def _in_input_order(
    order: npt.NDArray[np.intp], adjusted_sorted: npt.NDArray[np.float64]
) -> tuple[float, ...]:
    import numpy as np

    result = np.empty_like(adjusted_sorted)
    result[order] = np.minimum(adjusted_sorted, 1.0)
    return tuple(result.tolist())


def holm(p_values: Iterable[float]) -> tuple[float, ...]:
    """Return Holm-adjusted p-values (family-wise error rate), in input order.

    Raises:
        InvalidStatisticError: a p-value is outside `[0, 1]` or not a number.
    """
    import numpy as np

    array = _p_values(p_values)
    order = np.argsort(array, kind="stable")
    m = array.size
    # The i-th smallest p-value (0-based) is multiplied by m - i; monotone from below.
    adjusted = np.maximum.accumulate(array[order] * np.arange(m, 0, -1))
    return _in_input_order(order, adjusted)


def benjamini_hochberg(p_values: Iterable[float]) -> tuple[float, ...]:
    """Return Benjamini-Hochberg-adjusted p-values (false discovery rate), in input order.

    Raises:
        InvalidStatisticError: a p-value is outside `[0, 1]` or not a number.
    """
    import numpy as np

    array = _p_values(p_values)
    order = np.argsort(array, kind="stable")
    m = array.size
    # The i-th smallest (1-based) is divided by i / m; monotone from above.
    raw = array[order] / (np.arange(1, m + 1) / float(m))
    adjusted = np.minimum.accumulate(raw[::-1])[::-1]
    return _in_input_order(order, adjusted)
