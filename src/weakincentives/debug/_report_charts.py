"""The charts of the HTML report, drawn from the numbers the report already computed.

Each function takes what the report's tables show (a `Summary` per experiment or slice,
an `ExperimentComparison`) and makes a chart of the same values; only the histograms
count values into bins, and the checks and failure groups come from `_figures`, which
the viewer uses too.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Callable, Hashable, Mapping, Sequence

from weakincentives.errors import InvalidStatisticError
from weakincentives.evals import EvalReport, EvalResult, ExperimentComparison, Summary

from ._charts import Chart, Curve, Histogram
from ._figures import (
    FailureGroup,
    check_chart,
    cost_histogram,
    distribution_note,
    failure_key,
    flaky_chart,
    group_failures,
    top_values,
)
from ._svg import BarChart, Format, Mark

__all__ = [
    "comparison_charts",
    "distribution_charts",
    "epoch_charts",
    "failures_html",
    "figure_html",
    "report_checks",
    "report_failures",
    "slice_chart",
    "summary_chart",
]

_MAX_K = 10


def summary_chart(summaries: Mapping[str, Summary], *, id: str = "chart-pass-rate") -> BarChart:
    """Pass rate per experiment with its interval (the summary table's numbers)."""
    marks = tuple(
        Mark(label=name, value=s.pass_rate, low=s.pass_rate_low, high=s.pass_rate_high, n=s.n)
        for name, s in summaries.items()
    )
    return BarChart(
        id=id,
        title="Pass rate per experiment",
        marks=marks,
        note="Errors count as not passed; 95% interval (Wilson, or cluster-robust by sample "
        "when epochs repeat).",
    )


def slice_chart(
    key: str, rows: Sequence[tuple[str, str, Summary]], *, series_order: Sequence[str] = ()
) -> BarChart:
    """Pass rate per value of metadata `key` per experiment: `(value, experiment, summary)`.

    `series_order`: the report's experiments, so each keeps its colour and place.
    """
    marks = tuple(
        Mark(label=value, series=name, value=s.pass_rate, low=s.pass_rate_low,
             high=s.pass_rate_high, n=s.n)
        for value, name, s in rows
    )  # fmt: skip
    chart = BarChart(
        id=f"chart-slice-{_slug(key)}",
        title=f"Pass rate by {key}",
        marks=marks,
        note=f"One row per value of the metadata key {key!r} and experiment, with its 95% "
        "interval.",
        series_order=tuple(series_order),
    )
    return top_values(chart)


def report_checks(report: EvalReport) -> BarChart | None:
    """Per-check pass rates (see `_figures.check_chart`) of the report's results."""
    rows = (
        (r.experiment_name, m.name, m.value, r.sample_id)
        for r in report.results
        for m in r.score.metrics
    )
    chart = check_chart(rows)
    if chart is None:
        return None
    return dataclasses.replace(chart, series_order=tuple(report.experiment_names))


def distribution_charts(report: EvalReport) -> list[Chart]:
    """Histograms of score, latency, tokens and cost per experiment."""
    by_name = report.by_experiment()
    out: list[Chart] = []
    columns: tuple[tuple[str, str, Format, Callable[[EvalResult], float]], ...] = (
        ("score", "Score", "num", lambda r: 0.0 if r.is_error else r.score.value),
        ("latency", "Latency", "ms", lambda r: r.latency_ms),
        ("tokens", "Tokens (input + output)", "count",
         lambda r: float(r.usage.input_tokens + r.usage.output_tokens)),
    )  # fmt: skip
    for key, title, fmt, value in columns:
        values = {name: [value(r) for r in results] for name, results in by_name.items()}
        chart = Histogram.of(
            values, id=f"chart-{key}", title=f"Distribution: {title.lower()}", format=fmt,
            note=distribution_note(key, title),
        )  # fmt: skip
        if chart.series:
            out.append(chart)
    costs = cost_histogram(
        {name: [(r.cost, r.judge_cost) for r in results] for name, results in by_name.items()}
    )
    if costs is not None:
        out.append(costs)
    return out


def comparison_charts(
    c: ExperimentComparison, slices: Sequence[tuple[str, ExperimentComparison]], *, key: str | None
) -> list[Chart]:
    """The paired delta with its interval, the discordant counts and per-slice deltas."""
    name = f"{c.treatment_name} vs {c.baseline_name}"
    slug = _slug(f"{c.treatment_name}-{c.baseline_name}")
    out: list[Chart] = [
        BarChart(
            id=f"chart-delta-{slug}",
            title=f"{name}: paired delta",
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
            note="Treatment minus baseline over the paired samples, in percentage points, "
            "with its 95% interval.",
        ),
        BarChart(
            id=f"chart-discordant-{slug}",
            title=f"{name}: discordant pairs",
            format="count",
            marks=(
                Mark(label="regressed (pass → fail)", value=float(len(c.regressions))),
                Mark(label="improved (fail → pass)", value=float(len(c.improvements))),
            ),
            note="The pairs McNemar's test reads; the other pairs agree.",
        ),
    ]
    if slices and key is not None:
        out.append(
            top_values(
                BarChart(
                    id=f"chart-slice-delta-{slug}",
                    title=f"{name}: delta by {key}",
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
                    note=f"The paired delta within each value of {key!r}.",
                )
            )
        )
    return out


def epoch_charts(report: EvalReport) -> list[Chart]:
    """pass@k per experiment for k = 1..epochs, and the flaky samples."""
    if report.epochs < 2:
        return []
    xs = tuple(range(1, min(report.epochs, _MAX_K) + 1))
    series = []
    for name in report.experiment_names:
        ys = []
        for k in xs:
            try:
                ys.append(report.pass_at_k(k, experiment=name))
            except InvalidStatisticError:  # a sample has fewer attempts than k
                ys.append(math.nan)
        series.append((name, tuple(ys)))
    out: list[Chart] = [
        Curve(
            id="chart-pass-at-k",
            title="Epochs: pass@k",
            xs=xs,
            series=tuple(series),
            note="pass@k: the chance that at least one of k attempts at a sample passes, "
            "averaged over samples (unbiased estimator from all attempts).",
        )
    ]
    flaky = flaky_chart(
        (f.experiment_name, f.sample_id, f.attempts, f.passes) for f in report.flaky_samples()
    )
    if flaky is not None:
        out.append(dataclasses.replace(flaky, series_order=tuple(report.experiment_names)))
    return out


def report_failures(report: EvalReport) -> tuple[list[FailureGroup], int]:
    """The report's results that did not pass, grouped by failing check or error."""
    return group_failures(
        (
            failure_key(
                error=r.error,
                error_kind=r.error_kind,
                reason=r.score.reason,
                checks={m.name: m.value for m in r.score.metrics},
            ),
            (r.experiment_name, r.sample_id, r.epoch, ""),
        )
        for r in report.results
        if not r.passed
    )


def failures_html(report: EvalReport) -> str:
    """The report's failure groups as an HTML section (each group collapsed)."""
    groups, total = report_failures(report)
    if not groups:
        return ""
    items = []
    for g in groups:
        shown = ", ".join(
            f"{sample}" + (f"@{epoch}" if epoch else "") + f" ({experiment})"
            for experiment, sample, epoch, _ in g.examples
        )
        more = g.count - len(g.examples)
        tail = f" and {more} more" if more > 0 else ""
        items.append(
            f'<details class="failure"><summary><span class="group-count">{g.count}</span> '
            f"{_e(g.key)}</summary><p>{_e(shown)}{tail}</p></details>"
        )
    not_passed = report.failed_count
    omitted = total - len(groups)
    note = f'<p class="muted">and {omitted} smaller groups</p>' if omitted > 0 else ""
    return (
        f'<section class="block"><h2>Failures</h2><p class="muted">{not_passed} results did '
        f"not pass, in {total} groups (by error kind and message, or by the checks that "
        "failed; numbers masked as #).</p>" + "".join(items) + note + "</section>"
    )


def figure_html(chart: Chart) -> str:
    """A chart as an HTML `<figure>`: title, SVG, note, and its data table (collapsed)."""
    head, rows = chart.table()
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    note = f'<p class="chart-note">{_e(chart.note)}</p>' if chart.note else ""
    return (
        f'<figure class="chart" id="{_e(chart.id)}"><figcaption>{_e(chart.title)}</figcaption>'
        f"{chart.svg()}{note}<details><summary>Data table</summary><table>"
        f"<tr>{cells}</tr>{body}</table></details></figure>"
    )


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _slug(text: Hashable) -> str:
    return "".join(c if c.isalnum() else "-" for c in str(text)).strip("-").lower() or "x"
