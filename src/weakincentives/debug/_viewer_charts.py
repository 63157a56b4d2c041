"""The viewer's charts and failure groups, from the index's columns.

The run page's pass-rate chart draws the experiment statistics the page's cards show
(`experiment_view`); slices use the same intervals (`_figures.estimate`); checks, flaky
samples, pass@k and failure groups come from `_figures`, which the HTML report uses
too. Everything is SQL over the index plus a little Python per group, so a run of
100,000 results charts in well under a second (`bench/bench_viewer.py`).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from weakincentives.evals import OutcomeComparison, Outcomes, compare_outcomes

from ._charts import Chart, Histogram, chart_json
from ._figures import (
    CheckRate,
    check_rates_chart,
    cost_histogram,
    distribution_note,
    estimate,
    estimate_counts,
    failure_key,
    flaky_chart,
    group_failures,
    pass_at_k_curve,
    top_values,
)
from ._svg import BarChart, Format, Mark
from ._viewer_columns import ExperimentColumns, Gathered
from ._viewer_schema import (
    ATTEMPTS_SQL,
    EPOCHS_SQL,
    FAILED_SQL,
    METRIC_ROWS_SQL,
    METRIC_SQL,
    SLICE_ROWS_SQL,
    SLICE_SQL,
)

__all__ = [
    "MAX_SLICE_VALUES",
    "Chart",
    "IndexCharts",
    "Queryable",
    "comparison_charts",
    "distribution_charts",
    "index_charts",
    "run_charts",
    "slice_chart",
    "slice_comparisons",
    "slice_keys",
    "whole_run_charts",
]

MAX_SLICE_VALUES = 20
"""A metadata key is offered for slicing when it takes 2 to this many values."""

_OUTCOMES_SQL = """
SELECT m.value, r.sample_id, r.epoch, r.status, r.score FROM results r
JOIN meta m ON m.result_id = r.id
WHERE r.run_id = ? AND r.experiment = ? AND m.key = ? ORDER BY r.id
"""


def slice_keys(metadata: Mapping[str, Sequence[str]]) -> list[str]:
    """Every metadata key, those worth slicing on (2 to `MAX_SLICE_VALUES` values) first.

    The first one is the page's default; any can be picked (a slice chart draws the
    values with most results, `_figures.top_values`).
    """
    good = [k for k, values in metadata.items() if 2 <= len(values) < MAX_SLICE_VALUES + 1]
    return good + [k for k in metadata if k not in good]


class Queryable(Protocol):
    """What the charts read: read-only SQL over an index's tables (`ResultIndex.query`)."""

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of `sql` with `params`."""
        ...


@dataclass(frozen=True, slots=True)
class IndexCharts:
    """The run page's charts that SQL over the index makes (`index_charts`)."""

    checks: BarChart | None
    """Pass rate per check, if the scores have checks."""
    slice: BarChart | None
    """Pass rate per value of the slice key, if one is chosen."""
    epochs: list[Chart]
    """pass@k and the flaky samples, with repeated epochs."""
    failures: dict[str, Any]
    """The failure groups."""


def index_charts(
    index: Queryable, run_id: str, *, slice_key: str | None, gathered: Gathered | None = None
) -> IndexCharts:
    """The charts of `run_charts` that come from SQL alone (no experiment statistics).

    They read nothing else, so the viewer makes them on copies of the index beside the
    statistics (`ResultIndex.reader`): `whole_run_charts`, and `slice_chart` for
    `slice_key`.
    """
    made = whole_run_charts(index, run_id, gathered=gathered)
    chart = slice_chart(index, run_id, slice_key) if slice_key else None
    return dataclasses.replace(made, slice=chart)


def whole_run_charts(
    index: Queryable, run_id: str, *, gathered: Gathered | None = None
) -> IndexCharts:
    """`index_charts` without the per-slice chart (which depends on the key chosen).

    The failed results `gathered` while the run was read (the rows of `FAILED_SQL`)
    are not asked of SQL again.
    """
    return IndexCharts(
        checks=_check_chart(index, run_id),
        slice=None,
        epochs=_epoch_charts(index, run_id),
        failures=_failures(index, run_id, gathered.failed if gathered else None),
    )


def run_charts(
    made: IndexCharts,
    experiments: Sequence[Mapping[str, Any]],
    distributions: Sequence[Chart],
    *,
    slice_key: str | None,
) -> dict[str, Any]:
    """The run page's charts (as `chart_json`) and its failure groups.

    `made` are the run's `index_charts` for `slice_key`; `experiments` are the
    `experiment_view`s of its columns, and `distributions` their `distribution_charts`.
    """
    charts: list[Chart] = [_pass_rate_chart(experiments)]
    charts += [chart for chart in (made.checks, made.slice) if chart is not None]
    charts += made.epochs
    names = [e["name"] for e in experiments]
    charts += distributions
    # Each experiment keeps its colour and its place among a label's rows in every chart.
    charts = [
        dataclasses.replace(c, series_order=tuple(names)) if isinstance(c, BarChart) else c
        for c in charts
    ]
    return {
        "slice": slice_key,
        "charts": [chart_json(chart) for chart in charts],
        "failures": made.failures,
    }


def _pass_rate_chart(experiments: Sequence[Mapping[str, Any]]) -> BarChart:
    marks = tuple(
        Mark(label=e["name"], value=e["pass_rate"], low=_float(e["pass_rate_ci"][0]),
             high=_float(e["pass_rate_ci"][1]), n=e["n"])
        for e in experiments
    )  # fmt: skip
    return BarChart(
        id="chart-pass-rate",
        title="Pass rate per experiment",
        marks=marks,
        note="Errors count as not passed; 95% interval (Wilson, or cluster-robust by sample "
        "when epochs repeat).",
    )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _check_chart(index: Queryable, run_id: str) -> BarChart | None:
    rates = []
    for name, experiment, n, total, samples, binary, unit in index.query(METRIC_SQL, (run_id,)):
        if binary == n and samples == n:  # what `estimate` does for such values
            found = estimate_counts(int(total), n)
        else:
            rows = index.query(METRIC_ROWS_SQL, (run_id, name, experiment))
            found = estimate([v for v, _ in rows], [c for _, c in rows])
        rates.append(CheckRate(name, experiment, found, n, bool(unit)))
    return check_rates_chart(rates)


def slice_chart(index: Queryable, run_id: str, key: str) -> BarChart:
    """Pass rate per value of metadata `key` and experiment, with intervals."""
    marks = []
    for value, experiment, n, passes, samples in index.query(SLICE_SQL, (run_id, key)):
        if samples == n:  # what `estimate` does for 0/1 values of distinct samples
            rate, low, high = estimate_counts(passes, n)
        else:
            rows = index.query(SLICE_ROWS_SQL, (run_id, key, value, experiment))
            rate, low, high = estimate([float(p) for p, _ in rows], [c for _, c in rows])
        marks.append(Mark(label=value, series=experiment, value=rate, low=low, high=high, n=n))
    chart = BarChart(
        id="chart-slice",
        title=f"Pass rate by {key}",
        marks=tuple(marks),
        note=f"One row per value of the metadata key {key!r} and experiment, with its 95% "
        "interval; results without the key are left out.",
    )
    return top_values(chart)


def _epoch_charts(index: Queryable, run_id: str) -> list[Chart]:
    ((epochs,),) = index.query(EPOCHS_SQL, (run_id,))
    if epochs < 2:  # one attempt per sample: no pass@k, nothing flaky
        return []
    attempts: dict[str, list[tuple[int, int]]] = {}
    flaky = []
    for experiment, sample, n, passes in index.query(ATTEMPTS_SQL, (run_id,)):
        attempts.setdefault(experiment, []).append((n, passes))
        if 0 < passes < n:
            flaky.append((experiment, sample, n, passes))
    out: list[Chart] = []
    curve = pass_at_k_curve(attempts)
    if curve is not None:
        out.append(curve)
        flaky_samples = flaky_chart(flaky)
        if flaky_samples is not None:
            out.append(flaky_samples)
    return out


def distribution_charts(experiments: Sequence[ExperimentColumns]) -> list[Chart]:
    """Score, latency, token and cost histograms of each experiment's columns."""
    import numpy as np

    columns: dict[str, dict[str, Any]] = {"score": {}, "latency": {}, "tokens": {}}
    costs: dict[str, Iterable[tuple[float | None, float | None]]] = {}
    for c in experiments:
        columns["score"][c.name] = np.asarray(c.scores, dtype=float)
        columns["latency"][c.name] = np.asarray(c.latency_ms, dtype=float)
        columns["tokens"][c.name] = np.asarray(c.tokens, dtype=float)
        # Results with no cost at all are only counted: `cost_histogram` draws none.
        costs[c.name] = itertools.chain(c.costs, itertools.repeat((None, None), c.uncosted))
    out: list[Chart] = []
    specs: tuple[tuple[str, str, Format], ...] = (
        ("score", "Score", "num"),
        ("latency", "Latency", "ms"),
        ("tokens", "Tokens (input + output)", "count"),
    )
    for key, title, fmt in specs:
        chart = Histogram.of(
            columns[key], id=f"chart-{key}", title=f"Distribution: {title.lower()}", format=fmt,
            note=distribution_note(key, title),
        )  # fmt: skip
        if chart.series:
            out.append(chart)
    # Without a single priced result there is no cost to draw (`cost_histogram`).
    cost = cost_histogram(costs) if any(c.costs for c in experiments) else None
    if cost is not None:
        out.append(cost)
    return out


def _failures(
    index: Queryable, run_id: str, gathered: list[tuple[Any, ...]] | None
) -> dict[str, Any]:
    items = []
    found = index.query(FAILED_SQL, (run_id,)) if gathered is None else gathered
    for rid, experiment, sample, epoch, error, kind, reason, failing in found:
        if error is None and failing:  # `failure_key` of these checks, found by SQL
            key = f"failed check: {failing}"
        else:
            key = failure_key(error=error, error_kind=kind, reason=reason, checks={})
        items.append((key, (experiment, sample, epoch, str(rid))))
    groups, total = group_failures(items)
    return {
        "not_passed": len(items),
        "groups_count": total,
        "groups": [
            {
                "key": g.key,
                "count": g.count,
                "examples": [
                    {"experiment": e, "sample_id": s, "epoch": ep, "id": int(rid)}
                    for e, s, ep, rid in g.examples
                ],
            }
            for g in groups
        ],
    }


# -- comparisons ---------------------------------------------------------------------------


def comparison_charts(
    comparison: OutcomeComparison,
    slices: Sequence[tuple[str, OutcomeComparison]],
    *,
    key: str | None,
) -> list[dict[str, Any]]:
    """The paired delta, the discordant counts and the per-slice deltas (`chart_json`)."""
    c = comparison
    charts: list[Chart] = [
        BarChart(
            id="chart-delta",
            title="Paired delta (treatment - baseline)",
            format="pp",
            marks=(
                Mark(
                    label="pass rate",
                    value=c.delta,
                    low=c.delta_ci.low,
                    high=c.delta_ci.high,
                    n=c.n_pairs,
                ),
            ),
            note="Over the paired samples, in percentage points, with its 95% interval.",
        ),
        BarChart(
            id="chart-discordant",
            title="Discordant pairs",
            format="count",
            marks=(
                Mark(label="regressed (pass → fail)", value=float(len(c.regressions))),
                Mark(label="improved (fail → pass)", value=float(len(c.improvements))),
            ),
            note="The pairs McNemar's test reads; the other pairs agree.",
        ),
    ]
    if key is not None and slices:
        charts.append(
            top_values(
                BarChart(
                    id="chart-slice-delta",
                    title=f"Paired delta by {key}",
                    format="pp",
                    marks=tuple(
                        Mark(
                            label=value,
                            value=s.delta,
                            low=s.delta_ci.low,
                            high=s.delta_ci.high,
                            n=s.n_pairs,
                        )
                        for value, s in slices
                    ),
                    note=f"The paired delta within each value of {key!r} (pairs whose baseline "
                    "has the key).",
                )
            )
        )
    return [chart_json(chart) for chart in charts]


def slice_comparisons(
    index: Queryable,
    baseline: tuple[str, str],
    treatment: tuple[str, str],
    key: str,
    names: tuple[str, str],
) -> list[tuple[str, OutcomeComparison]]:
    """`compare_outcomes` within each value of metadata `key` (the baseline's value)."""
    sides = []
    for run_id, experiment in (baseline, treatment):
        columns: dict[str, tuple[list[str], list[int], list[bool], list[float]]] = {}
        for value, sample, epoch, status, score in index.query(
            _OUTCOMES_SQL, (run_id, experiment, key)
        ):
            ids, epochs, passed, scores = columns.setdefault(value, ([], [], [], []))
            ids.append(sample)
            epochs.append(epoch)
            passed.append(status == "passed")
            scores.append(0.0 if status == "error" else score)
        sides.append(columns)
    out = []
    for value in sorted(sides[0]):
        if value not in sides[1]:
            continue
        outcomes = [
            Outcomes(sample_ids=i, epochs=e, passed=p, scores=s)
            for i, e, p, s in (side[value] for side in sides)
        ]
        # The delta's interval does not use the bootstrap: skip it per slice.
        compared = compare_outcomes(
            outcomes[0], outcomes[1], baseline_name=names[0], treatment_name=names[1],
            bootstrap_resamples=0,
        )  # fmt: skip
        if compared.n_pairs:
            out.append((value, compared))
    return out
