"""A self-contained HTML report of an `EvalReport`: one file, no scripts, no external assets.

`wink eval report RUN --html FILE` writes it; `wink debug` serves the same page for a run.
Sections: a summary per experiment (pass rate and mean score with intervals, errors,
latency, tokens), paired comparisons against the baseline, one table per slice of the
samples' metadata, and the flipped samples of each comparison. Every value taken from
the results is HTML-escaped, so a model output cannot inject markup into the report.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Hashable, Iterable, Sequence
from importlib import metadata
from pathlib import Path

from weakincentives.errors import ConfigurationError
from weakincentives.evals import (
    BASELINE,
    CONTROL,
    EvalReport,
    EvalResult,
    ExperimentComparison,
    FlippedSample,
    Summary,
    check_rates,
    cost_delta,
    cost_summary,
    stats,
)

from ._charts import Chart, chart_css
from ._provenance import provenance_rows
from ._report_charts import (
    comparison_charts,
    distribution_charts,
    epoch_charts,
    failures_html,
    figure_html,
    report_checks,
    slice_chart,
    summary_chart,
)

__all__ = ["render_html_report", "write_html_report"]

_MAX_FLIPS = 500
"""Flipped samples listed per comparison and direction before "N more"."""
_MAX_SLICE_VALUES = 20
"""An automatically picked slice key has at most this many distinct values."""
_MAX_SLICE_KEYS = 3
"""How many metadata keys are sliced on automatically."""
_MAX_TEXT = 300

_CSS = """
:root{color-scheme:light dark;--fg:#1b1f24;--bg:#fff;--muted:#57606a;--line:#d0d7de;
--soft:#f6f8fa;--pass:#1a7f37;--fail:#cf222e;--err:#9a6700;--bar:#54aeff;--ci:#0550ae}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--muted:#9198a1;
--line:#30363d;--soft:#161b22;--pass:#3fb950;--fail:#f85149;--err:#d29922;--bar:#1f6feb;
--ci:#79c0ff}}
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;
max-width:1200px;padding:0 1rem;color:var(--fg);background:var(--bg)}
h1{font-size:1.5rem;margin:0 0 .25rem}h2{font-size:1.2rem;margin:1.75rem 0 .5rem;
border-bottom:1px solid var(--line);padding-bottom:.25rem}h3{font-size:1rem;margin:1.25rem 0 .4rem}
.muted{color:var(--muted)}table{border-collapse:collapse;width:100%;margin:.5rem 0}
th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{background:var(--soft);font-weight:600}td.num,th.num{text-align:right;
font-variant-numeric:tabular-nums;white-space:nowrap}
.bar{position:relative;height:.6rem;background:var(--soft);border-radius:3px;min-width:100px}
.fill{position:absolute;top:0;bottom:0;left:0;background:var(--bar);border-radius:3px}
.ci{position:absolute;top:-.15rem;bottom:-.15rem;border-left:2px solid var(--ci);
border-right:2px solid var(--ci)}
.passed{color:var(--pass)}.failed{color:var(--fail)}.error{color:var(--err)}
.wrap{overflow-x:auto}.sig{font-weight:600}code{font-family:ui-monospace,SFMono-Regular,Menlo,
monospace;font-size:.9em}details{margin:.4rem 0}details>summary{cursor:pointer;font-weight:600}
section.block>details>summary{font-size:1.05rem}
.cmp{border:1px solid var(--line);border-radius:8px;padding:.5rem 1rem;margin:.75rem 0}
.cmp table.stats th{width:13rem;background:none}
.group-count{font-variant-numeric:tabular-nums;display:inline-block;min-width:3.5rem}
"""


def write_html_report(
    report: EvalReport,
    path: str | os.PathLike[str],
    *,
    baseline: str | None = None,
    slice_key: str | None = None,
) -> Path:
    """Write `report` as one self-contained HTML file at `path`; returns the path.

    Args:
        report: The report (e.g. `EvalReport.load(run_dir)`).
        path: File to write (its directory must exist).
        baseline: Experiment to compare the others against (default: `baseline`, else
            `control`, else the first experiment).
        slice_key: Metadata key to slice on; by default up to three keys with 2-20
            distinct values are picked.

    Raises:
        ConfigurationError: `baseline` or `slice_key` names nothing in the report.
    """
    target = Path(path)
    text = render_html_report(report, baseline=baseline, slice_key=slice_key)
    target.write_text(text, encoding="utf-8")
    return target


def render_html_report(
    report: EvalReport, *, baseline: str | None = None, slice_key: str | None = None
) -> str:
    """The HTML text `write_html_report` writes (see there for the arguments).

    Raises:
        ConfigurationError: `baseline` or `slice_key` names nothing in the report.
    """
    names = report.experiment_names
    if baseline is not None and baseline not in names:
        known = ", ".join(names) or "none"
        raise ConfigurationError(f"no experiment {baseline!r} in the report; experiments: {known}")
    chosen = baseline if baseline is not None else _default_baseline(names)
    comparisons = list(report.compare_all(chosen).values()) if chosen is not None else []
    keys = _slice_keys(report, slice_key)
    title = f"Eval report: {report.run_id}" if report.run_id else "Eval report"
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="muted">{_e(_headline(report))}</p>',
        _provenance_section(report),
        _run_info(report),
        _summary_section(report),
        _checks_section(report),
        _comparison_section(report, comparisons, keys[0] if keys else None),
        _cost_section(report, comparisons),
        _charts_section(report),
        _slice_section(report, keys),
        failures_html(report),
        _flips_section(comparisons),
        f'<p class="muted">weakincentives {_e(_version())}</p>',
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{_e(title)}</title><style>{_CSS}{chart_css()}</style></head>\n<body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body></html>\n"
    )


def _version() -> str:
    try:
        return metadata.version("weakincentives")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "(development)"


def _default_baseline(names: Sequence[str]) -> str | None:
    if len(names) < 2:
        return None
    for preferred in (BASELINE.name, CONTROL.name):
        if preferred in names:
            return preferred
    return names[0]


def _run_info(report: EvalReport) -> str:
    """What `wink eval run` recorded about the run: dataset, selection, model, tags, note."""
    config = report.config
    inner = config.get("config")
    info = inner if isinstance(inner, dict) and "fingerprint" in config else config
    lines = []
    dataset = info.get("dataset")
    if isinstance(dataset, dict):
        lines.append(f"Dataset: {dataset.get('location')} ({dataset.get('format')})")
    for key, label in (("selection", "Selection"), ("model", "Model"), ("note", "Note")):
        if info.get(key):
            lines.append(f"{label}: {info[key]}")
    tags = info.get("tags")
    if isinstance(tags, list) and tags:
        lines.append(f"Tags: {', '.join(map(str, tags))}")
    return "".join(f'<p class="muted">{_e(line)}</p>' for line in lines)


def _headline(report: EvalReport) -> str:
    parts = [f"{report.total} results", f"{len(report.experiment_names)} experiments"]
    if report.epochs > 1:
        parts.append(f"{report.epochs} epochs")
    if report.expected_count is not None:
        parts.append("complete" if report.complete else f"incomplete: {report.missing} missing")
    return ", ".join(parts)


def _provenance_section(report: EvalReport) -> str:
    rows = provenance_rows(report.config)
    if not rows:
        return ""
    cells = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return (
        f'<details class="provenance"><summary>Run: what produced it</summary>'
        f'<table class="stats">{cells}</table></details>'
    )


# -- summary ------------------------------------------------------------------------------


def _summary_section(report: EvalReport) -> str:
    head = _row(
        ["Experiment", "n", "Passed", "Errors", "Pass rate (95% CI)", "", "Mean score (95% CI)",
         "Latency p50 / p95", "Tokens", "Errors by kind"],
        header=True,
        numeric={1, 2, 3, 4, 6, 7, 8},
    )  # fmt: skip
    reports = {name: report.experiment(name) for name in report.experiment_names}
    summaries = {name: r.summarize() for name, r in reports.items()}
    rows = [_summary_row(name, reports[name], summaries[name]) for name in reports]
    chart = figure_html(summary_chart(summaries)) if summaries else ""
    return "<h2>Summary</h2>\n" + chart + _table(head, rows)


def _summary_row(name: str, report: EvalReport, s: Summary) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in report.errors_by_kind().items()) or "none"
    return _row(
        [
            name, str(s.n), str(s.passed), str(s.errors), _rate(s), _bar_html(s), _mean(s),
            f"{_ms(report.latency_p50_ms)} / {_ms(report.latency_p95_ms)}",
            f"{report.total_tokens:,}", kinds,
        ],
        numeric={1, 2, 3, 4, 6, 7, 8},
        raw={5},
    )  # fmt: skip


def _rate(s: Summary) -> str:
    return f"{_pct(s.pass_rate)} {_pct_interval(s.pass_rate_low, s.pass_rate_high)}"


def _mean(s: Summary) -> str:
    if not math.isfinite(s.mean_low):
        return f"{_num(s.mean)} (interval n/a: {s.reason})" if s.reason else _num(s.mean)
    return f"{_num(s.mean)} [{_num(s.mean_low)}, {_num(s.mean_high)}]"


def _bar_html(summary: Summary) -> str:
    def pct(x: float) -> str:
        return f"{max(0.0, min(1.0, x)) * 100:.1f}%" if math.isfinite(x) else "0%"

    low, high = summary.pass_rate_low, summary.pass_rate_high
    width = f"calc({pct(high)} - {pct(low)})"
    return (
        f'<div class="bar" title="{_pct(summary.pass_rate)}"><div class="fill" '
        f'style="width:{pct(summary.pass_rate)}"></div><div class="ci" '
        f'style="left:{pct(low)};width:{width}"></div></div>'
    )


def _checks_section(report: EvalReport) -> str:
    """Per-check pass rates (each named metric of the scores), lowest first per experiment."""
    head = _row(
        ["Experiment", "Check", "n", "Pass rate (95% CI)", "Mean (95% CI)"],
        header=True, numeric={2, 3, 4},
    )  # fmt: skip
    rows = []
    for name in report.experiment_names:
        rates = check_rates(report.experiment(name).results).values()
        for rate in sorted(rates, key=lambda r: (not r.is_pass_fail, r.pass_rate or 0.0)):
            ci = rate.pass_rate_ci
            passed = "n/a" if rate.pass_rate is None or ci is None else (
                f"{_pct(rate.pass_rate)} {_pct_interval(ci.low, ci.high)}"
            )  # fmt: skip
            mean = f"{_num(rate.mean)} [{_num(rate.mean_ci.low)}, {_num(rate.mean_ci.high)}]"
            rows.append(_row([name, rate.name, str(rate.n), passed, mean], numeric={2, 3, 4}))
    if not rows:
        return ""
    # Collapsed: the comparisons come first on the screen; the checks chart draws the rates.
    return (
        f"<h2>Checks</h2>\n<details><summary>Every check and metric per experiment ({len(rows)} "
        f"rows, lowest pass rate first)</summary>{_table(head, rows)}</details>"
    )


# -- comparisons ------------------------------------------------------------------------


def _comparison_section(
    report: EvalReport, comparisons: Sequence[ExperimentComparison], key: str | None
) -> str:
    if not comparisons:
        return ""
    parts = [_comparison_block(report, c, key) for c in comparisons]
    note = (
        '<p class="muted">Pairs are matched by sample and epoch. With one epoch per sample the '
        "p-value is McNemar's test on the discordant pairs (regressed / improved), exact up to "
        "25 of them; when samples repeat over epochs, the pairs of a sample are not "
        "independent, and the interval and p-value are cluster-robust by sample.</p>"
    )
    return "<h2>Comparisons</h2>\n" + "".join(parts) + note


def _comparison_block(report: EvalReport, c: ExperimentComparison, key: str | None) -> str:
    method = "" if c.test_name is None else f" ({c.test_name})"
    scores = c.score_paired
    score_delta = (
        f"{_signed(scores.delta)} [{_signed(scores.low)}, {_signed(scores.high)}]"
        if scores is not None
        else "n/a"
    )
    rows = [
        ("Pairs", str(c.n_pairs)),
        ("Pass rates", f"{_pct(c.baseline_pass_rate)} → {_pct(c.treatment_pass_rate)}"),
        ("Paired delta (95% CI)",
         f"{_signed_pts(c.delta)} "
         + _pts_interval(c.delta_ci.low, c.delta_ci.high, c.why("interval"))),
        ("Bootstrap CI",
         _pts_interval(c.bootstrap_ci.low, c.bootstrap_ci.high, c.why("bootstrap"))),
        ("p-value", _p(c.p_value) + method),
        ("Holm / BH", f"{_p(c.p_value_holm)} / {_p(c.p_value_bh)}"),
        ("Regressed / improved", f"{len(c.regressions)} / {len(c.improvements)}"),
        ("Detectable effect", _mde(c)),
        ("Score delta (95% CI)", score_delta),
    ]  # fmt: skip
    table = (
        '<table class="stats">'
        + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
        + "</table>"
    )
    charts = comparison_charts(c, _slice_deltas(report, c, key), key=key)
    title = f"{c.treatment_name} vs {c.baseline_name}"
    return (
        f'<div class="cmp"><h3>{_e(title)}</h3><div class="charts"><div>{table}</div>'
        + "".join(figure_html(chart) for chart in charts)
        + "</div></div>"
    )


def _slice_deltas(
    report: EvalReport, c: ExperimentComparison, key: str | None
) -> list[tuple[str, ExperimentComparison]]:
    if key is None:
        return []
    out = []
    groups = report.group_by(key)
    for value, group in sorted(groups.items(), key=lambda kv: _sort_key(kv[0])):
        if {c.baseline_name, c.treatment_name} <= set(group.experiment_names):
            label = "(missing)" if value is None else str(value)
            # The delta and its interval do not use the bootstrap: skip it per slice.
            compared = group.compare_experiments(
                c.baseline_name, c.treatment_name, bootstrap_resamples=0
            )
            out.append((label, compared))
    return out


def _charts_section(report: EvalReport) -> str:
    charts: list[Chart] = []
    checks = report_checks(report)
    if checks is not None:
        charts.append(checks)
    charts += epoch_charts(report)
    charts += distribution_charts(report)
    if not charts:
        return ""
    figures = "".join(figure_html(chart) for chart in charts)
    return f'<h2>Charts</h2>\n<div class="charts">{figures}</div>'


def _cost_section(report: EvalReport, comparisons: Sequence[ExperimentComparison]) -> str:
    head = _row(["Experiment", "Cost"], header=True, numeric=set())
    rows = [
        _row([name, cost_summary(report.experiment(name).results).describe()], numeric=set())
        for name in report.experiment_names
    ]
    for c in comparisons:
        delta = cost_delta(
            report.experiment(c.baseline_name).results, report.experiment(c.treatment_name).results
        )
        text = "n/a (no pair has both costs)" if delta is None else delta.describe()
        label = f"{c.treatment_name} vs {c.baseline_name}"
        rows.append(_row([label, f"delta {text}"], numeric=set()))
    note = (
        '<p class="muted">Dollars from the run\'s price table; a result whose model has no '
        "price is counted as unpriced, never as free. Intervals are 95%.</p>"
    )
    return "<h2>Cost</h2>\n" + _table(head, rows) + note


def _flips_section(comparisons: Sequence[ExperimentComparison]) -> str:
    parts = []
    for c in comparisons:
        for label, flips in (
            ("regressed (pass → fail)", c.regressions),
            ("improved (fail → pass)", c.improvements),
        ):
            title = f"{c.treatment_name} vs {c.baseline_name}: {len(flips)} {label}"
            if flips:
                parts.append(
                    f"<details><summary>{_e(title)}</summary>{_flip_table(flips, c)}</details>"
                )
            else:
                parts.append(f"<p>{_e(title)}</p>")
    if not parts:
        return ""
    return "<h2>Flipped samples</h2>\n" + "\n".join(parts)


def _flip_table(flips: Sequence[FlippedSample], c: ExperimentComparison) -> str:
    head = _row(["Sample", "Epoch", c.baseline_name, c.treatment_name], header=True, numeric={1})
    rows = [
        _row(
            [f.sample_id, str(f.epoch), _verdict(f.baseline), _verdict(f.treatment)],
            numeric={1},
            raw={2, 3},
        )
        for f in flips[:_MAX_FLIPS]
    ]
    more = len(flips) - _MAX_FLIPS
    tail = f'<p class="muted">and {more} more</p>' if more > 0 else ""
    return _table(head, rows) + tail


def _verdict(result: EvalResult) -> str:
    if result.is_error:
        status, detail = "error", f"{result.error_kind or 'error'}: {result.error}"
    else:
        status = "passed" if result.passed else "failed"
        detail = f"{result.score.value:.3g} {result.score.reason}".strip()
    return f'<span class="{status}">{status}</span> {_e(_clip(detail))}'


# -- slices -------------------------------------------------------------------------------


def _slice_keys(report: EvalReport, slice_key: str | None) -> list[str]:
    if slice_key is not None:
        if not any(slice_key in r.metadata for r in report.results):
            raise ConfigurationError(
                f"no result has metadata key {slice_key!r}; pick one of: "
                f"{', '.join(_metadata_keys(report.results)) or 'none (no metadata)'}"
            )
        return [slice_key]
    keys = []
    for key in _metadata_keys(report.results):
        values = {r.metadata.get(key) for r in report.results if _scalar(r.metadata.get(key))}
        if 2 <= len(values) <= _MAX_SLICE_VALUES and all(
            _scalar(r.metadata.get(key)) for r in report.results
        ):
            keys.append(key)
        if len(keys) == _MAX_SLICE_KEYS:
            break
    return keys


def _metadata_keys(results: Iterable[EvalResult]) -> list[str]:
    seen: dict[str, None] = {}
    for result in results:
        seen.update(dict.fromkeys(result.metadata))
    return list(seen)


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _slice_section(report: EvalReport, keys: Sequence[str]) -> str:
    parts = []
    for key in keys:
        head = _row(
            [key, "Experiment", "n", "Pass rate (95% CI)", "", "Mean score (95% CI)", "Errors"],
            header=True,
            numeric={2, 3, 5, 6},
        )
        rows = []
        summaries: list[tuple[str, str, Summary]] = []
        groups = report.group_by(key)
        for value, group in sorted(groups.items(), key=lambda kv: _sort_key(kv[0])):
            label = "(missing)" if value is None else str(value)
            for name in group.experiment_names:
                s = group.experiment(name).summarize()
                summaries.append((label, name, s))
                cells = [label, name, str(s.n), _rate(s), _bar_html(s), _mean(s), str(s.errors)]
                rows.append(_row(cells, numeric={2, 3, 5, 6}, raw={4}))
        parts.append(
            f"<h3>By {_e(key)}</h3>"
            + figure_html(slice_chart(key, summaries, series_order=report.experiment_names))
            + f"<details><summary>By {_e(key)}: table</summary>{_table(head, rows)}</details>"
        )
    if not parts:
        return ""
    return "<h2>Slices</h2>\n" + "\n".join(parts)


def _sort_key(value: Hashable) -> tuple[int, str]:
    return (1, "") if value is None else (0, str(value))


# -- formatting ---------------------------------------------------------------------------


def _table(head: str, rows: Sequence[str]) -> str:
    return '<div class="wrap"><table>' + head + "".join(rows) + "</table></div>"


def _row(
    cells: Sequence[str], *, header: bool = False, numeric: set[int], raw: set[int] | None = None
) -> str:
    tag = "th" if header else "td"
    out = []
    for i, cell in enumerate(cells):
        cls = ' class="num"' if i in numeric else ""
        text = cell if raw and i in raw else _e(cell)
        out.append(f"<{tag}{cls}>{text}</{tag}>")
    return "<tr>" + "".join(out) + "</tr>"


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x * 100:.1f}%"


def _signed_pts(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{stats.format_signed(x, scale=100)} pts"


def _pts_interval(low: float, high: float, why: str = "") -> str:
    """A rate difference's interval in points, as the terminal report prints it."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"n/a ({why})" if why else "n/a"
    return f"[{stats.format_signed(low, scale=100)}, {stats.format_signed(high, scale=100)}]"


def _mde(c: ExperimentComparison) -> str:
    mde = c.minimum_detectable_effect
    if math.isfinite(mde):
        return f"{mde * 100:.1f} pts"
    return f"n/a ({c.why('minimum_detectable_effect')})"


def _pct_interval(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "[n/a]"
    return f"[{low * 100:.1f}, {high * 100:.1f}]"


def _num(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.3f}"


def _signed(x: float) -> str:
    return "n/a" if not math.isfinite(x) else stats.format_signed(x, 3)


def _p(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return "<0.001" if x < 0.001 else f"{x:.3f}"


def _ms(x: float) -> str:
    return f"{x:,.0f} ms" if x >= 10 else f"{x:.1f} ms"
