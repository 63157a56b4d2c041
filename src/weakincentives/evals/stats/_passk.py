"""pass@k and pass^k from repeated attempts (epochs) at each sample.

For one sample attempted `n` times with `c` passes:

- pass@k is the chance that at least one of `k` attempts drawn without replacement
  passes, `1 - C(n - c, k) / C(n, k)`: the unbiased estimator of Chen et al. (2021),
  "Evaluating Large Language Models Trained on Code". It rewards a capability that
  shows up sometimes.
- pass^k is the chance that all `k` drawn attempts pass, `C(c, k) / C(n, k)`, as in
  tau-bench (Yao et al., 2024). It rewards reliability.

Both are computed as products of ratios, which stay accurate where the binomial
coefficients themselves would overflow a float. Average the per-sample values over a
dataset, e.g. `mean_ci(pass_at_k_by_sample(trials, passes, k))` for an interval.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

from weakincentives.errors import InvalidStatisticError

from ._normal import as_count


def _check(n: int, c: int, k: int) -> tuple[int, int, int]:
    n = as_count("n", n, minimum=1)
    c = as_count("c", c)
    k = as_count("k", k, minimum=1)
    if c > n:
        raise InvalidStatisticError(f"c (passes, {c}) cannot exceed n (attempts, {n})")
    if k > n:
        raise InvalidStatisticError(
            f"k ({k}) cannot exceed n ({n}): run at least k attempts per sample"
        )
    return n, c, k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Return the unbiased pass@k estimate for `c` passes in `n` attempts.

    Raises:
        InvalidStatisticError: `n < 1`, `k < 1`, `c < 0`, `c > n` or `k > n`.
    """
    n, c, k = _check(n, c, k)
    if n - c < k:
        return 1.0
    # C(n-c, k) / C(n, k) = prod over i in (n-c, n] of (1 - k / i).
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Return pass^k, the chance that `k` of the `n` attempts, drawn at random, all pass.

    Raises:
        InvalidStatisticError: `n < 1`, `k < 1`, `c < 0`, `c > n` or `k > n`.
    """
    n, c, k = _check(n, c, k)
    if c < k:
        return 0.0
    # C(c, k) / C(n, k) = prod over i in [0, k) of (c - i) / (n - i).
    result = 1.0
    for i in range(k):
        result *= (c - i) / (n - i)
    return result


def _by_sample(
    trials: Sequence[int] | int, passes: Sequence[int], k: int, *, hat: bool
) -> tuple[float, ...]:
    # numbers.Integral covers numpy's integer scalars without importing numpy; `int` is
    # redundant at run time but is what lets mypy narrow `trials` in the other branch.
    counts = (
        [int(trials)] * len(passes) if isinstance(trials, int | numbers.Integral) else list(trials)
    )
    if len(counts) != len(passes):
        raise InvalidStatisticError(
            f"trials and passes must hold one count per sample, "
            f"got lengths {len(counts)} and {len(passes)}"
        )
    estimator = pass_hat_k if hat else pass_at_k
    results: list[float] = []
    for index, (n, c) in enumerate(zip(counts, passes, strict=True)):
        try:
            results.append(estimator(n, c, k))
        except InvalidStatisticError as exc:
            raise InvalidStatisticError(f"sample {index}: {exc}") from exc
    return tuple(results)


def pass_at_k_by_sample(
    trials: Sequence[int] | int, passes: Sequence[int], k: int
) -> tuple[float, ...]:
    """Return pass@k for every sample; `trials` is one count for all or one per sample.

    Raises:
        InvalidStatisticError: the lengths differ or any sample's counts are invalid.
    """
    return _by_sample(trials, passes, k, hat=False)


def pass_hat_k_by_sample(
    trials: Sequence[int] | int, passes: Sequence[int], k: int
) -> tuple[float, ...]:
    """Return pass^k for every sample; `trials` is one count for all or one per sample.

    Raises:
        InvalidStatisticError: the lengths differ or any sample's counts are invalid.
    """
    return _by_sample(trials, passes, k, hat=True)
