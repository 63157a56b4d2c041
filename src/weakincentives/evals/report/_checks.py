"""Per-check rates: which part of a combined evaluator fails most.

Every named metric of the results' scores is a *check*. A check is pass/fail when its
metric says whether it passed (`all_of` and `any_of` record each child's verdict in the
metric's metadata as `passed`) or when every value is 0 or 1; its pass rate then comes
with a Wilson interval. Any other metric (a rating, a token count) gets its mean with an
interval. The denominator is the results that report the metric: errored results have
no score, and so no checks.

`check_rates(results)` computes them; the terminal report, the HTML report and
`EvalReport.to_dict` (under each experiment's `checks`) show the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import stats
from .._records import EvalResult

__all__ = ["CheckRate", "check_rates"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckRate:
    """The rate (or mean) of one named metric over the results that report it."""

    name: str
    """Metric name (`exact_match`, `numeric_close.judge_rating`, ...)."""
    n: int
    """Results that report the metric."""
    passed: int | None
    """Results in which the check passed (None: the metric is not pass/fail)."""
    pass_rate: float | None
    """`passed / n` (None: not pass/fail)."""
    pass_rate_ci: stats.Interval | None
    """Wilson interval of the pass rate (None: not pass/fail)."""
    mean: float
    """Mean value of the metric."""
    mean_ci: stats.Interval
    """Interval of the mean (NaN bounds for a single result)."""

    @property
    def is_pass_fail(self) -> bool:
        """True when the check has a pass rate."""
        return self.pass_rate is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form (intervals as `[low, high]`)."""
        ci = self.pass_rate_ci
        return {
            "n": self.n,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "pass_rate_ci": None if ci is None else [ci.low, ci.high],
            "mean": self.mean,
            "mean_ci": [self.mean_ci.low, self.mean_ci.high],
        }


def check_rates(results: Iterable[EvalResult]) -> dict[str, CheckRate]:
    """Rates of every named metric in `results`, in order of first appearance.

    Examples:
        >>> from weakincentives.evals import all_of, exact_match, contains, Sample
        >>> from weakincentives.evals import run_eval
        >>> report = run_eval([Sample(id="a", input="4", expected="4"),
        ...                    Sample(id="b", input="42", expected="4")],
        ...                   lambda x: x, all_of(exact_match, contains))
        >>> {name: rate.pass_rate for name, rate in check_rates(report.results).items()}
        {'exact_match': 0.5, 'contains': 1.0}
    """
    values: dict[str, list[float]] = {}
    verdicts: dict[str, list[bool | None]] = {}
    for result in results:
        for metric in result.score.metrics:
            name = metric.name
            if name not in values:
                values[name], verdicts[name] = [], []
            values[name].append(metric.value)
            # A check's own verdict, when its metadata records one as a bool.
            metadata = metric.metadata
            passed = metadata.get("passed") if metadata else None
            verdicts[name].append(passed if isinstance(passed, bool) else None)
    return {name: _rate(name, values[name], verdicts[name]) for name in values}


def _rate(name: str, values: list[float], verdicts: list[bool | None]) -> CheckRate:
    n = len(values)
    if all(v is not None for v in verdicts):
        passes: list[bool] | None = [bool(v) for v in verdicts]
    elif all(v in (0.0, 1.0) for v in values):
        passes = [v == 1.0 for v in values]
    else:
        passes = None
    mean = stats.mean_ci(values) if n > 1 else None
    mean_value = math.fsum(values) / n
    mean_interval = mean.interval if mean is not None else stats.Interval(math.nan, math.nan)
    if passes is None:
        return CheckRate(
            name=name, n=n, passed=None, pass_rate=None, pass_rate_ci=None,
            mean=mean_value, mean_ci=mean_interval,
        )  # fmt: skip
    rate = stats.wilson_interval(sum(passes), n)
    return CheckRate(
        name=name, n=n, passed=rate.successes, pass_rate=rate.rate, pass_rate_ci=rate.interval,
        mean=mean_value, mean_ci=mean_interval,
    )  # fmt: skip
