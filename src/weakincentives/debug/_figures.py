"""What the HTML report and the viewer both chart: checks, failure groups, flaky samples.

The report reads `EvalResult`s and the viewer reads its index's columns; both hand the
same plain values to these functions, so a number is computed once, one way, for both
pages. Intervals come from `stats.summarize_outcomes`, the function behind every rate of
every view: Wilson for a 0/1 rate, Student t for a mean, cluster-robust by sample when
a sample repeats (epochs).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from weakincentives.evals import result_cost, stats

from ._charts import Curve, Histogram
from ._svg import BarChart, Mark

__all__ = [
    "MAX_CHECKS",
    "MAX_FAILURE_GROUPS",
    "MAX_GROUP_EXAMPLES",
    "MAX_SLICE_VALUES",
    "CheckRate",
    "FailureGroup",
    "check_chart",
    "check_rates_chart",
    "cost_histogram",
    "distribution_note",
    "estimate",
    "estimate_counts",
    "failure_key",
    "flaky_chart",
    "group_failures",
    "is_check",
    "pass_at_k_curve",
    "top_values",
]

MAX_CHECKS = 24
"""Checks charted at most (the first ones by name)."""
MAX_SLICE_VALUES = 30
"""Values of a metadata key drawn at most in a slice chart (those with most results)."""
MAX_FAILURE_GROUPS = 30
"""Failure groups listed at most (the largest)."""
MAX_GROUP_EXAMPLES = 20
"""Results listed per failure group (all are counted)."""
_FAILING = 0.5
"""A check below this value failed (`Score`'s default pass threshold)."""
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")
_MAX_KEY = 160


def estimate(values: Sequence[float], clusters: Sequence[Hashable]) -> tuple[float, float, float]:
    """`(mean, low, high)` of `values` with the interval every view shows.

    `stats.summarize_outcomes`, clustered by `clusters` when one repeats (epochs): for 0/1
    values their pass rate (Wilson, or cluster-robust), for other values their mean
    (Student t, or cluster-robust; inside [0, 1] when every value is). NaN ends mean the
    interval is unknown (one value, or one cluster).
    """
    if not values:
        return 0.0, math.nan, math.nan
    summary = stats.summarize_outcomes(
        [v == 1.0 for v in values], values, clusters=stats.repeated_samples(clusters)
    )
    if all(v in (0.0, 1.0) for v in values):
        return summary.pass_rate, summary.pass_rate_low, summary.pass_rate_high
    return summary.mean, summary.mean_low, summary.mean_high


def estimate_counts(successes: int, n: int) -> tuple[float, float, float]:
    """`estimate` of `n` distinct samples' 0/1 values of which `successes` are 1 (Wilson).

    What `estimate` (`summarize_outcomes` without clusters) gives for such values; a
    store that counts in SQL calls this and reads the values themselves only when a
    sample repeats or a value is not 0/1.
    """
    rate = stats.wilson_interval(successes, n)
    return rate.rate, rate.low, rate.high


@dataclass(frozen=True, slots=True)
class CheckRate:
    """One check's rate in one experiment."""

    name: str
    """The metric's name."""
    experiment: str
    """The experiment."""
    estimate: tuple[float, float, float]
    """`(mean, low, high)` from `estimate`."""
    n: int
    """Results that report the metric."""
    unit: bool
    """Whether every value is in [0, 1]."""


def is_check(name: str, values: Iterable[float]) -> bool:
    """Whether a named metric is a check.

    A check has a top-level name (a combined evaluator's child, not `child.metric`) and
    every value in [0, 1].
    """
    return "." not in name and all(0.0 <= v <= 1.0 for v in values)


def check_chart(
    rows: Iterable[tuple[str, str, float, Hashable]], *, id: str = "chart-checks"
) -> BarChart | None:
    """Per-check pass rates per experiment from `(experiment, metric, value, sample)` rows.

    A check's rate is the mean of its values over the results that report it (for a
    0/1 check, the share of results that passed it; `Summary.metrics` holds the same
    means), with `estimate`'s interval. Metrics that are not checks (`is_check`) are
    left out; None when no check remains.
    """
    values: dict[tuple[str, str], list[float]] = {}
    clusters: dict[tuple[str, str], list[Hashable]] = {}
    for experiment, name, value, sample in rows:
        values.setdefault((name, experiment), []).append(value)
        clusters.setdefault((name, experiment), []).append(sample)
    return check_rates_chart(
        [
            CheckRate(name, experiment, estimate(vs, clusters[(name, experiment)]), len(vs),
                      all(0.0 <= v <= 1.0 for v in vs))
            for (name, experiment), vs in values.items()
        ],
        id=id,
    )  # fmt: skip


def check_rates_chart(rates: Sequence[CheckRate], *, id: str = "chart-checks") -> BarChart | None:
    """The checks chart of `rates` (see `check_chart`), in order of first appearance."""
    unit: dict[str, bool] = {}
    for rate in rates:
        unit[rate.name] = unit.get(rate.name, True) and rate.unit
    checks = sorted(name for name, ok in unit.items() if ok and "." not in name)[:MAX_CHECKS]
    if not checks:
        return None
    found = {(r.name, r.experiment): r for r in rates}
    experiments = list(dict.fromkeys(r.experiment for r in rates))
    marks = []
    for name in checks:
        for experiment in experiments:
            r = found.get((name, experiment))
            if r is not None:
                mean, low, high = r.estimate
                marks.append(
                    Mark(label=name, series=experiment, value=mean, low=low, high=high, n=r.n)
                )
    return BarChart(
        id=id,
        title="Checks: pass rate per check",
        marks=tuple(marks),
        note="Each check of the evaluator (named metrics of the score with values in 0-1): "
        "the mean over the results that report it, with its 95% interval.",
    )


def top_values(chart: BarChart, limit: int = MAX_SLICE_VALUES) -> BarChart:
    """`chart` with the marks of its `limit` labels that have most results (sum of `n`).

    A key with many values (an id, a free-text field) stays readable; the note says how
    many values were left out. Marks keep their order.
    """
    totals: dict[str, int] = {}
    for m in chart.marks:
        totals[m.label] = totals.get(m.label, 0) + (m.n or 0)
    if len(totals) <= limit:
        return chart
    kept = set(sorted(totals, key=lambda label: (-totals[label], label))[:limit])
    more = len(totals) - limit
    return dataclasses.replace(
        chart,
        marks=tuple(m for m in chart.marks if m.label in kept),
        note=f"{chart.note} The {limit} values with most results are drawn; {more} more are not.",
    )


def pass_at_k_curve(
    attempts: Mapping[str, Sequence[tuple[int, int]]],
    *,
    k_max: int = 10,
    id: str = "chart-pass-at-k",
) -> Curve | None:
    """pass@k for k = 1..epochs per experiment from `(attempts, passes)` per sample.

    The mean over samples of `stats.pass_at_k` (what `EvalReport.pass_at_k` averages);
    a k above some sample's attempts has no value (NaN). None without repeated attempts.
    """
    most = max((n for counts in attempts.values() for n, _ in counts), default=0)
    if most < 2:
        return None
    xs = tuple(range(1, min(most, k_max) + 1))
    series = []
    for experiment, counts in attempts.items():
        ys = []
        for k in xs:
            if any(n < k for n, _ in counts):
                ys.append(math.nan)
            else:
                ys.append(sum(stats.pass_at_k(n, c, k) for n, c in counts) / len(counts))
        series.append((experiment, tuple(ys)))
    return Curve(
        id=id,
        title="Epochs: pass@k",
        xs=xs,
        series=tuple(series),
        note="pass@k: the chance that at least one of k attempts at a sample passes, "
        "averaged over samples (unbiased estimator from all attempts).",
    )


def distribution_note(key: str, title: str) -> str:
    """The sentence under a distribution of `key` (`score`, `latency`, `tokens`)."""
    errors = " (errors score 0)" if key == "score" else ""
    return f"{title} of every result per experiment{errors}, on shared bins."


def cost_histogram(
    costs: Mapping[str, Iterable[tuple[float | None, float | None]]], *, id: str = "chart-cost"
) -> Histogram | None:
    """Dollars per result per experiment, from `(cost, judge_cost)` of each result.

    The values are `result_cost` of the priced results (agent plus judge), the values
    whose mean is the report's cost per sample (`summarize_costs`); an unpriced result
    has no cost to draw and is counted in the note, never drawn as $0. None when no
    result is priced.
    """
    values: dict[str, list[float]] = {}
    n = unpriced = 0
    for experiment, pairs in costs.items():
        priced = values[experiment] = []
        for cost, judge_cost in pairs:
            n += 1
            total = result_cost(cost, judge_cost)
            if total is None:
                unpriced += 1
            else:
                priced.append(total)
    if n == unpriced:
        return None
    left_out = f" {unpriced:,} of {n:,} results are unpriced and not drawn." if unpriced else ""
    return Histogram.of(
        values, id=id, title="Distribution: cost per result", format="usd",
        note="Dollars each priced result cost, agent plus judge (their mean is the cost per "
        f"sample), on shared bins.{left_out}",
    )  # fmt: skip


def flaky_chart(
    flaky: Iterable[tuple[str, str, int, int]],
    *,
    id: str = "chart-flaky",
    limit: int = 20,
) -> BarChart | None:
    """The flaky samples' pass rates from `(experiment, sample, attempts, passes)`.

    The `limit` least reliable are drawn (lowest share of passing attempts first); the
    note says how many more there are.
    """
    marks = [
        Mark(label=sample, series=experiment, value=passes / attempts, n=attempts)
        for experiment, sample, attempts, passes in flaky
    ]
    if not marks:
        return None
    shown = sorted(marks, key=lambda m: (m.value, m.label))[:limit]
    more = len(marks) - len(shown)
    return BarChart(
        id=id,
        title=f"Epochs: {len(marks)} flaky samples",
        marks=tuple(shown),
        note="Samples that passed in some epochs and failed in others: the share of "
        "attempts that passed (n = attempts)" + (f"; {more} more not drawn." if more else "."),
    )


# -- failures -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureGroup:
    """Results that did not pass for the same reason."""

    key: str
    """What they have in common: `error kind: message` or `failed check: name, ...`."""
    count: int
    """Results in the group."""
    examples: tuple[tuple[str, str, int, str], ...]
    """The first results: `(experiment, sample_id, epoch, result ref)`; ref is the
    viewer's result id (or empty in the report)."""


def _shape(text: str) -> str:
    """The first line of a message, its numbers replaced by `#`.

    So "expected 3, got 4" and "expected 5, got 7" fall in one group.
    """
    first = text.strip().splitlines()[0] if text.strip() else ""
    shaped = _SPACE.sub(" ", _DIGITS.sub("#", first)).strip()
    return shaped if len(shaped) <= _MAX_KEY else shaped[: _MAX_KEY - 1] + "…"


def failure_key(
    *,
    error: str | None,
    error_kind: str | None,
    reason: str,
    checks: Mapping[str, float],
) -> str:
    """The group of a result that did not pass.

    An error groups by kind and message (numbers masked); a failure by the checks that
    failed (top-level metrics in [0, 1] below 0.5), else by its reason (numbers masked).
    """
    if error is not None:
        return f"{error_kind or 'error'}: {_shape(error) or '(no message)'}"
    failing = sorted(name for name, v in checks.items() if is_check(name, [v]) and v < _FAILING)
    if failing:
        return "failed check: " + ", ".join(failing)
    return f"failed: {_shape(reason) or '(no reason given)'}"


def group_failures(
    items: Iterable[tuple[str, tuple[str, str, int, str]]],
) -> tuple[list[FailureGroup], int]:
    """Group `(key, example)` pairs; returns the largest groups and the number of groups."""
    counts: dict[str, int] = {}
    examples: dict[str, list[tuple[str, str, int, str]]] = {}
    for key, example in items:
        counts[key] = counts.get(key, 0) + 1
        listed = examples.setdefault(key, [])
        if len(listed) < MAX_GROUP_EXAMPLES:
            listed.append(example)
    ranked = sorted(counts, key=lambda k: (-counts[k], k))
    groups = [
        FailureGroup(key=k, count=counts[k], examples=tuple(examples[k]))
        for k in ranked[:MAX_FAILURE_GROUPS]
    ]
    return groups, len(counts)
