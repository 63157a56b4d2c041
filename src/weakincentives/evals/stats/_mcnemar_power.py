"""Power of McNemar's test as the report runs it, and the pairs a wanted power needs.

The report tests paired pass/fail outcomes with `mcnemar`: exact binomial up to 25
discordant pairs, chi-square with continuity correction above. Its power is computed
exactly: the number of discordant pairs `M` is Binomial(n, p10 + p01); given `M = m`,
the pairs that moved towards the treatment are Binomial(m, p01 / (p10 + p01)), and the
test rejects on a known set of counts. The power is the sum over `m` of both
probabilities (the values of `m` more than 14 standard deviations from its mean, below
1e-40, are skipped).

**Cost and accuracy.** The rejection tails at consecutive `m` follow one from another by
exact recurrences (`_TailPath`), so a power costs a few vectorized passes over the likely
values of `m` (about 3,000 at 50,000 pairs) rather than a sum over every table; the
binomial probabilities use Loader's saddle-point form (`_binomial`), accurate to about
1e-14 relative at any n. The powers agree with a reference built from scipy's binomial
distribution and `mcnemar`'s own p-values to 1e-12 absolute (the tests check it up to
200,000 pairs). `mcnemar_detectable_effect` computes the distribution of `M` once and
reuses it for every effect its search tries: about 30 ms at 20,000 discordant pairs.

The normal approximation of Connor (1987), "Sample size for testing differences in
proportions for the paired-sample design", Biometrics 43, 207-211, is the starting point
of the search for n; it ignores the continuity correction and the discreteness, so on
its own it falls short (1254 pairs at 79% power where 80% was asked, for rates 0.70 ->
0.75).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from weakincentives.errors import InvalidStatisticError

from ._binomial import log_pmf, stirling_part
from ._mcnemar import EXACT_MCNEMAR_LIMIT
from ._normal import as_count, check_probability, normal_ppf
from ._power import solve_increasing

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "connor_sample_size",
    "discordant_rates",
    "mcnemar_detectable_effect",
    "mcnemar_detectable_rise",
    "mcnemar_power",
    "mcnemar_sample_size",
]

# Binomial terms this many standard deviations from the mean are below 1e-40: skipped.
_SPAN = 14.0
_MAX_PAIRS = 10_000_000


def _check_rates(p10: float, p01: float) -> None:
    check_probability("p10", p10)
    check_probability("p01", p01)
    if p10 + p01 > 1.0 + 1e-12:
        raise InvalidStatisticError(
            f"p10 + p01 is the share of discordant pairs and cannot exceed 1, got {p10 + p01!r}"
        )


@functools.lru_cache(maxsize=16)
def _exact_edges(alpha: float) -> tuple[int, ...]:
    """The rejection edge of the exact test for each `m` up to `EXACT_MCNEMAR_LIMIT`."""
    edges = []
    for m in range(EXACT_MCNEMAR_LIMIT + 1):
        k, tail = -1, 0
        while k + 1 <= m and 2 * (tail + math.comb(m, k + 1)) / 2**m <= alpha:
            k += 1
            tail += math.comb(m, k)
        edges.append(min(k, (m - 1) // 2) if k >= 0 else -1)
    return tuple(edges)


def _rejection_edges(ms: npt.NDArray[np.int64], z: float, alpha: float) -> npt.NDArray[np.int64]:
    """For each discordant count `m`, the largest `b` the test rejects at (or -1).

    The test is symmetric: it rejects at `b <= k` and at `b >= m - k`. Up to 25 discordant
    pairs the exact test rejects when `2 * P(B <= b) <= alpha` under Binomial(m, 1/2);
    above, the chi-square test rejects when `(|m - 2b| - 1)**2 / m >= z**2`. The edge of
    the chi-square test is `floor((m - 1 - z sqrt(m)) / 2)` up to rounding, which the two
    loops settle with the test's own comparison, in exact integer and float arithmetic.
    """
    import numpy as np

    zz = z * z * ms.astype(np.float64)
    k = np.floor((ms - 1.0 - z * np.sqrt(ms)) / 2.0).astype(np.int64)
    while True:
        down = (k >= 0) & ((ms - 2 * k - 1) ** 2 < zz)
        if not down.any():
            break
        k -= down
    while True:
        up = ((ms - 2 * (k + 1) - 1) ** 2 >= zz) & (ms - 2 * (k + 1) >= 1)
        if not up.any():
            break
        k += up
    small = ms <= EXACT_MCNEMAR_LIMIT
    if small.any():
        k[small] = np.asarray(_exact_edges(alpha), dtype=np.int64)[ms[small]]
    return k


class _TailPath:
    """`P(B_i <= k_i)` for `B_i ~ Binomial(m_i, pi)` along consecutive `m_i`, at any `pi`.

    One tail is summed directly (at the first `m`); each next one follows from the one
    before by two exact identities: `P(B_{m+1} <= k) = P(B_m <= k) - pi P(B_m = k)` (one
    more pair) and `P(B <= k + 1) = P(B <= k) + P(B = k + 1)` (the edge moves, by one
    almost always). So a tail costs a few probabilities instead of a sum of thousands of
    terms, and the rounding error stays an absolute one of about `len(ms)` times 1e-16.
    Everything that does not depend on `pi` is computed here, once.
    """

    def __init__(self, ms: npt.NDArray[np.int64], edges: npt.NDArray[np.int64]) -> None:
        import numpy as np

        self.ms, self.edges = ms, edges
        # Step i (i >= 1): one more pair at the edge k_{i-1}, then the edge moves to k_i.
        step = edges[1:] - edges[:-1]
        self.step = step
        # Edges moving by more than one (near the exact test's limit): summed one by one.
        self.jumps = np.flatnonzero(np.abs(step) > 1)
        moved = np.where(step < 0, edges[1:] + 1, edges[1:])
        self.x = np.concatenate((edges[:-1], moved))
        self.n = np.concatenate((ms[:-1], ms[1:]))
        self.part = stirling_part(self.x, self.n)

    def tails(self, pi: float) -> npt.NDArray[np.float64]:
        """The lower tails at `pi` (`0 < pi < 1`)."""
        import numpy as np

        ms, edges = self.ms, self.edges
        probs = np.exp(log_pmf(self.x, self.n, pi, self.part))
        half = ms.size - 1
        steps = -pi * probs[:half] + np.sign(self.step) * np.where(
            self.step != 0, probs[half:], 0.0
        )
        for i in self.jumps.tolist():
            m, low, high = int(ms[i + 1]), int(edges[i]), int(edges[i + 1])
            span = np.arange(min(low, high) + 1, max(low, high) + 1, dtype=np.int64)
            moved = float(np.exp(log_pmf(span, np.full_like(span, m), pi)).sum())
            steps[i] = -pi * probs[i] + (moved if high > low else -moved)
        first = _direct_tail(int(ms[0]), int(edges[0]), pi)
        return np.clip(np.concatenate(([first], first + np.cumsum(steps))), 0.0, 1.0)


def _direct_tail(m: int, k: int, pi: float) -> float:
    """`P(B <= k)` for `B ~ Binomial(m, pi)`, summed over the terms above 1e-40."""
    import numpy as np

    if k < 0:
        return 0.0
    sd = math.sqrt(m * pi * (1.0 - pi))
    start = max(0, min(k, math.floor(m * pi - _SPAN * sd - 2)))
    stop = min(k, math.ceil(m * pi + _SPAN * sd + 2))
    if stop < start:
        return 1.0
    span = np.arange(start, stop + 1, dtype=np.int64)
    return float(np.exp(log_pmf(span, np.full_like(span, m), pi)).sum())


class _PowerGrid:
    """McNemar's power on `n` pairs at a share `psi` of discordant pairs, for any split.

    The discordant count is Binomial(n, psi): its likely values, their probabilities and
    the test's rejection edges at each depend on `(n, psi, alpha)` only, and are computed
    once; `power(pi)` then costs two tail paths (see `_TailPath`).
    """

    def __init__(self, n: int, psi: float, alpha: float) -> None:
        import numpy as np

        z = -normal_ppf(alpha / 2.0)
        spread = _SPAN * math.sqrt(n * psi * (1.0 - psi)) + 2
        low_m = max(0, math.floor(n * psi - spread))
        high_m = min(n, math.ceil(n * psi + spread))
        self.ms = ms = np.arange(low_m, high_m + 1, dtype=np.int64)
        if psi >= 1.0:
            self.weights = (ms == n).astype(np.float64)
        else:
            self.weights = np.exp(log_pmf(ms, np.full_like(ms, n), psi))
        self.edges = _rejection_edges(ms, z, alpha)
        self._path = _TailPath(ms, self.edges)

    def power(self, pi: float) -> float:
        """The power when a discordant pair moves towards the treatment with chance `pi`."""
        import numpy as np

        if pi <= 0.0 or pi >= 1.0:
            # All discordant pairs move one way: the test rejects where the edge allows.
            reject = (self.edges >= 0).astype(np.float64)
        else:
            reject = self._path.tails(pi) + self._path.tails(1.0 - pi)
        return float(min(1.0, float(np.sum(self.weights * reject))))


def mcnemar_power(n: int, *, p10: float, p01: float, alpha: float = 0.05) -> float:
    """Return the power of `mcnemar` on `n` pairs, rejecting when its p-value <= `alpha`.

    `p10` is the chance that a pair goes pass -> fail (baseline passes, treatment fails),
    `p01` fail -> pass; the effect on the pass rate is `p01 - p10`. The power is exact
    for the test as `paired_comparison` runs it, to about 1e-10 (see the module
    docstring).

    Raises:
        InvalidStatisticError: `n < 1`, a rate outside `[0, 1]`, `p10 + p01 > 1`, or
            `alpha` outside `(0, 1)`.
    """
    n = as_count("n", n, minimum=1)
    _check_rates(p10, p01)
    check_probability("alpha", alpha, open_interval=True)
    if n > _MAX_PAIRS:
        raise InvalidStatisticError(f"n must be at most {_MAX_PAIRS:,}, got {n:,}")
    psi = min(p10 + p01, 1.0)
    if psi <= 0.0:
        return 0.0
    return _PowerGrid(n, psi, alpha).power(p01 / psi)


def connor_sample_size(*, p10: float, p01: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Connor's (1987) normal approximation to the pairs McNemar's test needs.

    `n = (z_a sqrt(psi) + z_b sqrt(psi - d**2))**2 / d**2` with `psi = p10 + p01` and
    `d = p01 - p10`. It is the start of `mcnemar_sample_size`'s search, not its answer.

    Raises:
        InvalidStatisticError: `p10 == p01` (no effect), rates out of range, or
            `alpha`/`power` outside `(0, 1)`.
    """
    _check_rates(p10, p01)
    check_probability("alpha", alpha, open_interval=True)
    check_probability("power", power, open_interval=True)
    d = p01 - p10
    if d == 0.0:
        raise InvalidStatisticError("p10 == p01: there is no effect for any n to detect")
    psi = p10 + p01
    z_a, z_b = -normal_ppf(alpha / 2.0), normal_ppf(power)
    root = z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - d * d, 0.0))
    return max(1, math.ceil((root / d) ** 2 - 1e-9))


def mcnemar_sample_size(*, p10: float, p01: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Return the fewest pairs at which `mcnemar_power` reaches `power`.

    The search starts at `connor_sample_size` and bisects on the exact power. The power
    of a discrete test is not monotone in n (it saws up and down by a fraction of a
    percent); the answer is the first n of the bisection with enough power, and the power
    at it is at least `power` exactly (the tests check it by simulation too).

    Raises:
        InvalidStatisticError: as `connor_sample_size`, or more than 10,000,000 pairs.
    """
    start = connor_sample_size(p10=p10, p01=p01, alpha=alpha, power=power)

    def enough(n: int) -> bool:
        return mcnemar_power(n, p10=p10, p01=p01, alpha=alpha) >= power

    low, high = max(1, start // 2), max(2, start)
    while not enough(high):
        low, high = high, high * 2
        if high > _MAX_PAIRS:
            raise InvalidStatisticError(
                f"detecting p01 - p10 = {p01 - p10:g} needs more than {_MAX_PAIRS:,} pairs"
            )
    if enough(low):
        low = 0
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


def mcnemar_detectable_effect(
    n: int, *, discordant: float, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest effect `p01 - p10` that `n` pairs detect with `power`, at a discordance.

    `discordant` is `p10 + p01`, the share of pairs whose outcome differs (in a finished
    run, the observed share). NaN when no effect reaches `power`: with no discordant
    pairs, or too few pairs for the test to ever reject (3 pairs all moving the same way
    give p = 0.25).

    Raises:
        InvalidStatisticError: `n < 1`, `discordant` outside `[0, 1]`, or `alpha`/`power`
            outside `(0, 1)`.
    """
    n = as_count("n", n, minimum=1)
    check_probability("discordant", discordant)
    check_probability("power", power, open_interval=True)

    check_probability("alpha", alpha, open_interval=True)
    if n > _MAX_PAIRS:
        raise InvalidStatisticError(f"n must be at most {_MAX_PAIRS:,}, got {n:,}")
    if discordant <= 0.0:
        return math.nan
    return _detectable_effect(n, discordant, alpha, power)


@functools.lru_cache(maxsize=64)
def _detectable_effect(n: int, discordant: float, alpha: float, power: float) -> float:
    """`mcnemar_detectable_effect` on checked arguments, kept for the same arguments.

    A report asks twice per comparison with the same numbers (its pass/fail and its
    score comparison, when the scores are pass/fail too): the second answer is the
    first one, not a second search of some 20 exact powers.
    """
    # n and the discordant share are fixed: one grid serves every effect tried.
    grid = _PowerGrid(n, min(discordant, 1.0), alpha)

    def power_at(d: float) -> float:
        return grid.power((discordant + d) / 2 / discordant)

    if power_at(discordant) < power:
        return math.nan
    return solve_increasing(power_at, power, 0.0, discordant, rel_tol=1e-7)


def discordant_rates(p1: float, p2: float, correlation: float = 0.0) -> tuple[float, float]:
    """`(p10, p01)` of paired pass/fail outcomes with pass rates `p1`, `p2` and a correlation.

    `P(both pass) = p1 p2 + r sqrt(p1 (1 - p1) p2 (1 - p2))`, `p10 = p1 - P(both pass)`
    (baseline passes, treatment fails) and `p01 = p2 - P(both pass)`. Correlation 0
    (independent outcomes) gives the most discordant pairs: the conservative plan.

    Raises:
        InvalidStatisticError: a rate is outside [0, 1], or no pair of outcomes has these
            rates and this correlation.
    """
    check_probability("p1", p1)
    check_probability("p2", p2)
    both = p1 * p2 + correlation * math.sqrt(p1 * (1 - p1) * p2 * (1 - p2))
    p10, p01 = p1 - both, p2 - both
    if min(p10, p01, both) < -1e-12 or p10 + p01 + both > 1 + 1e-12:
        raise InvalidStatisticError(
            f"correlation {correlation:g} is impossible for pass rates {p1:g} and {p2:g}; "
            "use a smaller correlation"
        )
    return max(p10, 0.0), max(p01, 0.0)


def mcnemar_detectable_rise(
    n: int,
    *,
    baseline_rate: float,
    correlation: float = 0.0,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """Smallest rise of a pass rate above `baseline_rate` that `n` pairs detect with `power`.

    The planning counterpart of `mcnemar_detectable_effect`: the treatment's rate is
    `baseline_rate + effect` and the discordant shares follow from `correlation`
    (`discordant_rates`). NaN when even a treatment that always passes is not detected.

    Raises:
        InvalidStatisticError: `n < 1`, `baseline_rate` outside `(0, 1)`, or `alpha`/`power`
            outside `(0, 1)`.
    """
    check_probability("baseline_rate", baseline_rate, open_interval=True)
    check_probability("power", power, open_interval=True)

    def power_at(effect: float) -> float:
        try:
            p10, p01 = discordant_rates(baseline_rate, baseline_rate + effect, correlation)
        except InvalidStatisticError:
            return 0.0
        return mcnemar_power(n, p10=p10, p01=p01, alpha=alpha)

    top = 1.0 - baseline_rate
    if power_at(top) < power:
        return math.nan
    return solve_increasing(power_at, power, 0.0, top, rel_tol=1e-6)
