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

__all__ = ["CheckRate", "CheckTally", "check_rates"]


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
    tally = CheckTally()
    for result in results:
        tally.add(result)
    return tally.rates()


class CheckTally:
    """What `check_rates` keeps while results stream past, per metric name.

    Each metric's values as `{value: count}`, how many results report it, how many of
    them record a verdict and how many of those passed: a few entries per metric, not a
    list per result.
    """

    __slots__ = ("_metrics",)

    def __init__(self) -> None:
        """Start with no results."""
        # name -> [values as {value: count}, n, verdicts recorded, verdicts passed]
        self._metrics: dict[str, list[Any]] = {}

    def add(self, result: EvalResult) -> None:
        """Count the metrics of one result's score."""
        for metric in result.score.metrics:
            entry = self._metrics.get(metric.name)
            if entry is None:
                entry = self._metrics[metric.name] = [{}, 0, 0, 0]
            values = entry[0]
            values[metric.value] = values.get(metric.value, 0) + 1
            entry[1] += 1
            # A check's own verdict, when its metadata records one as a bool.
            metadata = metric.metadata
            passed = metadata.get("passed") if metadata else None
            if isinstance(passed, bool):
                entry[2] += 1
                entry[3] += passed

    def rates(self) -> dict[str, CheckRate]:
        """The rate of every metric counted, in order of first appearance."""
        return {name: _rate(name, *entry) for name, entry in self._metrics.items()}


def _rate(name: str, values: dict[float, int], n: int, verdicts: int, passes: int) -> CheckRate:
    passed: int | None
    if verdicts == n:  # every result recorded the check's verdict
        passed = passes
    elif all(v in (0.0, 1.0) for v in values):
        passed = values.get(1.0, 0)
    else:
        passed = None
    mean = stats.mean_ci_counts(values) if n > 1 else None
    mean_value = stats.fsum_counts(values) / n
    mean_interval = mean.interval if mean is not None else stats.Interval(math.nan, math.nan)
    if passed is None:
        return CheckRate(
            name=name, n=n, passed=None, pass_rate=None, pass_rate_ci=None,
            mean=mean_value, mean_ci=mean_interval,
        )  # fmt: skip
    rate = stats.wilson_interval(passed, n)
    return CheckRate(
        name=name, n=n, passed=rate.successes, pass_rate=rate.rate, pass_rate_ci=rate.interval,
        mean=mean_value, mean_ci=mean_interval,
    )  # fmt: skip
