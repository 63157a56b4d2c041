"""Terminal rendering of a report with rich: one table per experiment, then comparisons.

Tables have two columns (what, value), so they read well in an 80-column terminal. rich
drops colour and styles when the output is not a terminal, so piped output is plain text.
rich is imported when a report is rendered, not when `weakincentives.evals` is imported.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from .. import stats
from ._collector import collector_paused
from ._columns import flip_keys
from ._comparison import ExperimentComparison
from ._export import default_baseline, pass_at_k_block
from ._family import compare_all
from ._view import ReportView

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


__all__ = ["checks_table", "comparison_table", "experiment_table", "render_report"]

_SHOWN_FLIPS = 5
"""How many regressed / improved sample ids a comparison lists before "+N more"."""


@collector_paused()
def render_report(
    report: ReportView, console: Console | None = None, *, baseline: str | None = None
) -> None:
    """Print `report` to `console` (a new `Console()` by default).

    One table per experiment (n, pass rate and mean score with intervals, errors by kind,
    latency, tokens, pass@k when samples repeat) and its checks (per-check pass rates of
    a combined evaluator, metric means), then one table per comparison against
    `baseline` (default: `baseline`, else `control`, else the first experiment).
    """
    if console is None:
        from rich.console import Console

        console = Console()
    console.print(_headline(report))
    names = report.experiment_names
    for name in names:
        console.print(experiment_table(report.experiment(name), title=name))
        checks = checks_table(report.experiment(name), title=f"{name}: checks")
        if checks is not None:
            console.print(checks)
    chosen = baseline if baseline is not None else default_baseline(names)
    if chosen is None:
        return
    for comparison in compare_all(report, chosen).values():
        table = comparison_table(comparison)
        delta = report.cost_delta(comparison.baseline_name, comparison.treatment_name)
        if delta is not None:
            table.add_row("Cost delta", delta.describe())
        console.print(table)


def experiment_table(report: ReportView, *, title: str) -> Table:
    """A two-column table of one experiment's statistics."""
    summary = report.summarize()
    table = _table(title)
    errors = ", ".join(f"{kind} {n}" for kind, n in report.errors_by_kind().items())
    table.add_row(
        "Results",
        f"{summary.n}" + (f" ({stats.plural(summary.errors, 'error')})" if errors else ""),
    )
    table.add_row(
        "Pass rate",
        f"{_pct(summary.pass_rate)} {_pct_interval(summary.pass_rate_ci, summary.reason)}",
    )
    if summary.errors:
        table.add_row("Pass rate excl. errors", _pct(report.pass_rate_excluding_errors))
    table.add_row(
        "Mean score", f"{summary.mean:.3f} {_interval(summary.mean_ci, '.3f', summary.reason)}"
    )
    table.add_row("Errors", errors or "none")
    table.add_row(
        "Latency",
        f"p50 {_ms(report.latency_p50_ms)}, p95 {_ms(report.latency_p95_ms)} "
        f"(mean {_ms(report.mean_latency_ms)})",
    )
    table.add_row(
        "Tokens",
        f"{report.total_tokens:,} ({report.total_input_tokens:,} in, "
        f"{report.total_output_tokens:,} out)",
    )
    table.add_row("Cost", report.cost_summary().describe())
    if summary.n_clusters is not None:
        table.add_row("Intervals", f"clustered, {stats.plural(summary.n_clusters, 'cluster')}")
    _add_epochs(table, report)
    return table


def checks_table(report: ReportView, *, title: str) -> Table | None:
    """Per-check pass rates (lowest first) and metric means of one experiment.

    None when the scores have no named metrics (a single evaluator without metrics).
    """
    rates = report.check_rates()
    if not rates:
        return None
    table = _table(title)
    ordered = sorted(rates.values(), key=lambda r: (not r.is_pass_fail, r.pass_rate or 0.0, r.name))
    for rate in ordered:
        if rate.pass_rate is not None and rate.pass_rate_ci is not None:
            text = f"{_pct(rate.pass_rate)} {_pct_interval(rate.pass_rate_ci)} (n={rate.n})"
        else:
            text = f"mean {rate.mean:.4g} {_interval(rate.mean_ci, '.4g')} (n={rate.n})"
        table.add_row(rate.name, text)
    return table


def comparison_table(comparison: ExperimentComparison) -> Table:
    """A two-column table of one paired comparison."""
    c = comparison
    table = _table(f"{c.treatment_name} vs {c.baseline_name}")
    relative = c.relative_improvement
    table.add_row(
        "Pass rate",
        f"{_pct(c.baseline_pass_rate)} -> {_pct(c.treatment_pass_rate)} "
        f"({_pts(c.pass_rate_delta)}"
        + (f", {relative:+.1%} relative)" if relative is not None else ")"),
    )
    if c.paired is None:
        table.add_row("Paired delta", "n/a (no pairs)")
    else:
        pairs = stats.plural(c.n_pairs, "pair")
        if c.n_clusters is not None:
            pairs += f" in {stats.plural(c.n_clusters, 'sample')}"
        bounds = _bounds(c.delta_ci) or f"n/a ({c.why('interval')})"
        table.add_row(
            "Paired delta",
            f"{_pts(c.delta)} {bounds} ({c.paired.confidence:.0%} CI, {pairs}; "
            f"{c.paired.interval_method or 'no interval'})",
        )
    table.add_row("Bootstrap CI", _pts_interval(c.bootstrap_ci, c.why("bootstrap")))
    table.add_row("p-value", _p_value_text(c))
    b, d = c.discordant
    table.add_row("Discordant", f"{b} pass->fail, {d} fail->pass")
    mde = c.minimum_detectable_effect
    table.add_row(
        "Detectable effect",
        f"n/a ({c.why('minimum_detectable_effect')})"
        if math.isnan(mde)
        else f"{mde * 100:.1f} pts (80% power, {_mde_test(c)})",
    )
    if c.score_paired is not None:
        s = c.score_paired
        interval = _interval(s.interval, "+.3f", s.reasons.get("interval", ""))
        p_value = "" if math.isnan(s.p_value) else f" (p {_p(s.p_value)}, {s.test_name})"
        table.add_row("Score delta", f"{stats.format_signed(s.delta, 3)} {interval}{p_value}")
    table.add_row(
        "Unpaired",
        f"{len(c.unpaired_baseline)} baseline only, {len(c.unpaired_treatment)} treatment only",
    )
    both = (c.regressions, c.improvements)
    epochs = any(epoch for flips in both for _, epoch in flip_keys(flips))
    for label, flips in zip(("Regressions", "Improvements"), both, strict=True):
        if flips:
            shown = itertools.islice(flip_keys(flips), _SHOWN_FLIPS)
            ids = [f"{sample_id}@{epoch}" if epochs else sample_id for sample_id, epoch in shown]
            more = len(flips) - _SHOWN_FLIPS
            table.add_row(label, ", ".join(ids) + (f" (+{more} more)" if more > 0 else ""))
    return table


# -- helpers ----------------------------------------------------------------------------


def _headline(report: ReportView) -> str:
    run = f"Run {report.run_id}: " if report.run_id else ""
    if report.expected_count is None:
        return f"{run}{report.total} results"
    status = "complete" if report.complete else f"incomplete, {report.missing} missing"
    return f"{run}{report.distinct_count} of {report.expected_count} results ({status})"


def _add_epochs(table: Table, report: ReportView) -> None:
    block = pass_at_k_block(report)
    if block is None:
        return
    k = block["k"]
    table.add_row(
        f"pass@{k} / pass^{k}",
        f"{_pct(block['pass_at_k'])} / {_pct(block['pass_hat_k'])}, "
        f"{len(report.flaky_samples())} flaky",
    )


def _table(title: str) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, show_header=False, title_justify="left")
    table.add_column("what", no_wrap=True)
    table.add_column("value", overflow="fold")
    return table


def _mde_test(c: ExperimentComparison) -> str:
    return "McNemar" if c.mcnemar is not None else (c.test_name or "")


def _p_value_text(c: ExperimentComparison) -> str:
    if math.isnan(c.p_value):
        return f"n/a ({c.why('p_value')})"
    text = f"{_p(c.p_value)} ({c.test_name})"
    if c.p_value_holm is not None:
        text += f", Holm {_p(c.p_value_holm)}"
    return text


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.1%}"


def _pts(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{stats.format_signed(value, scale=100)} pts"


def _ms(value: float) -> str:
    return f"{value:,.0f} ms"


def _unknown(reason: str) -> str:
    # Not in brackets: rich would read "[n/a: ...]" as markup and drop it.
    return f"(interval n/a: {reason})" if reason else "(interval n/a)"


def _pct_interval(interval: stats.Interval, reason: str = "") -> str:
    if math.isnan(interval.low):
        return _unknown(reason)
    return f"[{interval.low:.1%}, {interval.high:.1%}]"


def _bounds(interval: stats.Interval) -> str:
    if math.isnan(interval.low):
        return ""
    low = stats.format_signed(interval.low, scale=100)
    return f"[{low}, {stats.format_signed(interval.high, scale=100)}]"


def _pts_interval(interval: stats.Interval, reason: str = "") -> str:
    if math.isnan(interval.low):
        return f"n/a ({reason})" if reason else "n/a"
    return f"{_bounds(interval)} pts"


def _interval(interval: stats.Interval, spec: str, reason: str = "") -> str:
    if math.isnan(interval.low):
        return _unknown(reason)
    if spec.startswith("+"):
        digits = int(spec[2:-1])
        return (
            f"[{stats.format_signed(interval.low, digits)}, "
            f"{stats.format_signed(interval.high, digits)}]"
        )
    return f"[{interval.low:{spec}}, {interval.high:{spec}}]"
