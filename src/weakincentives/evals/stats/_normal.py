"""The standard normal distribution without scipy, plus shared input checks.

`normal_ppf` is Wichura's algorithm AS241 (PPND16), accurate to about 1e-16 relative,
which is the precision of a double. Tail probabilities use `math.erfc`, which keeps full
relative precision far into the tails.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from weakincentives.errors import InvalidStatisticError

if TYPE_CHECKING:  # numpy itself is imported on first use (see the package docstring)
    import numpy as np
    import numpy.typing as npt

# AS241 PPND16 coefficients, lowest order first (Wichura 1988, Applied Statistics 37).
_A = (
    3.3871328727963666080e0,
    1.3314166789178437745e2,
    1.9715909503065514427e3,
    1.3731693765509461125e4,
    4.5921953931549871457e4,
    6.7265770927008700853e4,
    3.3430575583588128105e4,
    2.5090809287301226727e3,
)
_B = (
    1.0,
    4.2313330701600911252e1,
    6.8718700749205790830e2,
    5.3941960214247511077e3,
    2.1213794301586595867e4,
    3.9307895800092710610e4,
    2.8729085735721942674e4,
    5.2264952788528545610e3,
)
_C = (
    1.42343711074968357734e0,
    4.63033784615654529590e0,
    5.76949722146069140550e0,
    3.64784832476320460504e0,
    1.27045825245236838258e0,
    2.41780725177450611770e-1,
    2.27238449892691845833e-2,
    7.74545014278341407640e-4,
)
_D = (
    1.0,
    2.05319162663775882187e0,
    1.67638483018380384940e0,
    6.89767334985100004550e-1,
    1.48103976427480074590e-1,
    1.51986665636164571966e-2,
    5.47593808499534494600e-4,
    1.05075007164441684324e-9,
)
_E = (
    6.65790464350110377720e0,
    5.46378491116411436990e0,
    1.78482653991729133580e0,
    2.96560571828504891230e-1,
    2.65321895265761230930e-2,
    1.24266094738807843860e-3,
    2.71155556874348757815e-5,
    2.01033439929228813265e-7,
)
_F = (
    1.0,
    5.99832206555887937690e-1,
    1.36929880922735805310e-1,
    1.48753612908506148525e-2,
    7.86869131145613259100e-4,
    1.84631831751005468180e-5,
    1.42151175831644588870e-7,
    2.04426310338993978564e-15,
)


def _poly(coefficients: tuple[float, ...], x: float) -> float:
    result = 0.0
    for coefficient in reversed(coefficients):
        result = result * x + coefficient
    return result


def normal_ppf(p: float) -> float:
    """Return the inverse of the standard normal CDF at `p` (AS241, double precision).

    Args:
        p: A probability; `0` and `1` give `-inf` and `inf`.

    Raises:
        InvalidStatisticError: `p` is outside `[0, 1]` or not a number.
    """
    if not 0.0 <= p <= 1.0:
        raise InvalidStatisticError(f"probability must be in [0, 1], got {p!r}")
    q = p - 0.5
    if abs(q) <= 0.425:
        r = 0.180625 - q * q
        return q * _poly(_A, r) / _poly(_B, r)
    if p in (0.0, 1.0):
        return math.copysign(math.inf, q)
    # Work with the smaller tail so that 1 - p does not lose digits.
    r = math.sqrt(-math.log(min(p, 1.0 - p)))
    if r <= 5.0:
        r -= 1.6
        x = _poly(_C, r) / _poly(_D, r)
    else:
        r -= 5.0
        x = _poly(_E, r) / _poly(_F, r)
    return -x if q < 0 else x


def normal_sf(x: float) -> float:
    """Return `P(Z > x)` for a standard normal `Z`, precise in the far tail."""
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def two_sided_p(z: float) -> float:
    """Return the two-sided normal p-value `P(|Z| >= |z|)`."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def critical_value(confidence: float) -> float:
    """Return `z` with `P(-z < Z < z) = confidence`, computed from the small tail."""
    check_confidence(confidence)
    return -normal_ppf((1.0 - confidence) / 2.0)


def check_confidence(confidence: float) -> None:
    """Raise unless `0 < confidence < 1`."""
    if not 0.0 < confidence < 1.0:
        raise InvalidStatisticError(
            f"confidence must be strictly between 0 and 1 (e.g. 0.95), got {confidence!r}"
        )


def check_probability(name: str, value: float, *, open_interval: bool = False) -> None:
    """Raise unless `value` is in `[0, 1]` (or `(0, 1)` when `open_interval`)."""
    inside = 0.0 < value < 1.0 if open_interval else 0.0 <= value <= 1.0
    if not inside:
        bounds = "(0, 1)" if open_interval else "[0, 1]"
        raise InvalidStatisticError(f"{name} must be in {bounds}, got {value!r}")


def as_count(name: str, value: int, *, minimum: int = 0) -> int:
    """Return `value` as an int, raising unless it is an integer `>= minimum`."""
    if isinstance(value, bool):
        raise InvalidStatisticError(f"{name} must be an integer count, got the bool {value!r}")
    try:
        count = operator.index(value)
    except TypeError:
        raise InvalidStatisticError(
            f"{name} must be an integer count, got {type(value).__name__} {value!r}"
        ) from None
    if count < minimum:
        raise InvalidStatisticError(f"{name} must be >= {minimum}, got {count}")
    return count


def as_values(
    name: str, values: Iterable[float], *, allow_empty: bool = False
) -> npt.NDArray[np.float64]:
    """Return `values` as a 1-d float array, raising if empty or not finite.

    Booleans are accepted and count as 0 and 1. A numpy array is converted without
    making a Python object per value (the same float64 values as from a list).
    """
    import numpy as np

    try:
        source = values if isinstance(values, np.ndarray) else list(values)
        array = np.asarray(source, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidStatisticError(f"{name} must be a sequence of numbers: {exc}") from exc
    if array.ndim != 1:
        raise InvalidStatisticError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size == 0 and not allow_empty:
        raise InvalidStatisticError(f"{name} is empty; pass at least one value")
    if not np.all(np.isfinite(array)):
        bad = int(np.flatnonzero(~np.isfinite(array))[0])
        raise InvalidStatisticError(
            f"{name}[{bad}] is {array[bad]!r}; drop or impute non-finite values first"
        )
    return array


def check_same_length(
    names: tuple[str, str], first: Sequence[object], second: Sequence[object]
) -> None:
    """Raise unless two sequences that must be aligned have the same length."""
    if len(first) != len(second):
        raise InvalidStatisticError(
            f"{names[0]} and {names[1]} must be aligned one-to-one, "
            f"got lengths {len(first)} and {len(second)}"
        )
