"""Charts: the SVG carries the numbers it draws, and both pages draw the same numbers.

The HTML report charts `EvalReport`'s numbers and the viewer its index's; the tests
read the `data-*` attributes of the drawn marks back and compare them with the report's
own statistics (an independent oracle: `summarize`, `compare_experiments`, `pass_at_k`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from tests.debug.viewer_data import DemoRuns, write_runs
from weakincentives.debug import create_viewer_app, render_html_report
from weakincentives.debug._charts import Histogram
from weakincentives.debug._diff import pair_diff
from weakincentives.debug._figures import estimate, failure_key, group_failures, pass_at_k_curve
from weakincentives.debug._report_charts import distribution_charts, report_failures
from weakincentives.debug._svg import BarChart, Mark, fmt
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Metric,
    Score,
    ToolCallRecord,
    cost_summary,
    result_cost,
    stats,
    summarize,
)
from weakincentives.runtime.session import TokenUsage

_MARK = re.compile(r'<g class="mark [^"]*" data-label="([^"]*)" data-series="([^"]*)" '
                   r'data-value="([^"]*)" data-low="([^"]*)" data-high="([^"]*)"')  # fmt: skip


def marks(svg: str) -> list[tuple[str, str, float, float, float]]:
    """`(label, series, value, low, high)` of every bar mark of an SVG text."""
    return [
        (label, series, float(v), _f(low), _f(high))
        for label, series, v, low, high in _MARK.findall(svg)
    ]


def _f(text: str) -> float:
    return math.nan if text == "" else float(text)


def figure(text: str, chart_id: str) -> str:
    """The `<figure>` with id `chart_id` in an HTML page."""
    start = text.index(f'<figure class="chart" id="{chart_id}"')
    return text[start : text.index("</figure>", start)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return write_runs(tmp_path_factory.mktemp("charts"))


@pytest.fixture(scope="module")
def client(runs: DemoRuns) -> TestClient:
    return TestClient(create_viewer_app(runs.root), base_url="http://127.0.0.1")


# -- the renderer ---------------------------------------------------------------------------


def test_bar_chart_marks_carry_their_numbers_and_escape_labels() -> None:
    chart = BarChart(
        id="c",
        title="<t>",
        marks=(
            Mark(label="<script>x</script>", value=0.25, low=0.1, high=0.4, n=8),
            Mark(label="b", value=1.0, low=math.nan, high=math.nan),
        ),
    )
    svg = chart.svg()
    assert "<script>" not in svg and "&lt;script&gt;x&lt;/script&gt;" in svg
    found = marks(svg)
    assert found[0] == ("&lt;script&gt;x&lt;/script&gt;", "", 0.25, 0.1, 0.4)
    assert found[1][2] == 1.0 and math.isnan(found[1][3])
    head, rows = chart.table()
    assert head == ["", "Value", "95% interval", "n"]
    assert rows == [["<script>x</script>", "25.0%", "[10.0%, 40.0%]", "8"],
                    ["b", "100.0%", "[n/a]", ""]]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "kind", "text"),
    [(0.1234, "pct", "12.3%"), (-0.0001, "pp", "+0.0 pts"), (0.05, "pp", "+5.0 pts"),
     (1234.0, "count", "1,234"), (5.0, "ms", "5.0 ms"), (math.nan, "num", "n/a"),
     (0.000042, "usd", "$0.000042"), (0.0123, "usd", "$0.0123"), (12.345, "usd", "$12.35")],
)  # fmt: skip
def test_values_print_as_the_tables_print_them(value: float, kind: Any, text: str) -> None:
    assert fmt(value, kind) == text


def test_each_series_keeps_its_colour_and_place_whatever_order_the_marks_come_in() -> None:
    chart = BarChart(
        id="s", title="s", series_order=("base", "treat", "other"),
        marks=(Mark(label="x", series="base", value=0.5),
               Mark(label="y", series="treat", value=0.2),
               Mark(label="y", series="base", value=0.4)),
    )  # fmt: skip
    svg = chart.svg()
    drawn = re.findall(r'<g class="mark (s\d)" data-label="(\w)" data-series="(\w+)"', svg)
    assert drawn == [("s0", "x", "base"), ("s0", "y", "base"), ("s1", "y", "treat")]
    legend = re.findall(r'<g class="legend (s\d)">.*?>(\w+)</text>', svg)
    assert legend == [("s0", "base"), ("s1", "treat")]  # "other" has no mark: not listed
    assert [row[:2] for row in chart.table()[1]] == [["x", "base"], ["y", "base"], ["y", "treat"]]


def test_a_signed_chart_is_symmetric_around_zero_and_counts_are_whole() -> None:
    chart = BarChart(id="d", title="d", format="pp", marks=(Mark(label="x", value=0.3),))
    assert chart.domain() == (-0.5, 0.5)
    counts = BarChart(id="n", title="n", format="count", marks=(Mark(label="x", value=5.0),))
    low, high = counts.domain()
    assert low == 0 and high >= 5 and high % 4 == 0


def test_histogram_bins_whole_numbers_one_per_value_and_counts_every_value() -> None:
    scores = Histogram.of({"a": [0.0, 1.0, 1.0], "b": [1.0]}, id="s", title="s")
    assert scores.edges == (-0.5, 0.5, 1.5)
    assert scores.series == (("a", (1, 2)), ("b", (0, 1)))
    rng = np.random.default_rng(0)
    values = {"a": list(rng.normal(100, 20, 500)), "b": list(rng.normal(130, 10, 300))}
    latency = Histogram.of(values, id="l", title="l", format="ms")
    every = np.concatenate([values["a"], values["b"]])
    assert latency.edges == tuple(np.histogram_bin_edges(every, bins=12))
    assert [sum(c) for _, c in latency.series] == [500, 300]
    drawn = [int(c) for c in re.findall(r'data-count="(\d+)"', latency.svg())]
    assert drawn == [*latency.series[0][1], *latency.series[1][1]]


# -- shared numbers -------------------------------------------------------------------------


def test_estimate_gives_the_interval_summarize_gives() -> None:
    once = [1.0, 0.0, 1.0, 1.0]
    rate = stats.wilson_interval(3, 4)
    assert estimate(once, ["a", "b", "c", "d"]) == (rate.rate, rate.low, rate.high)
    results = [
        EvalResult(sample_id=s, experiment_name="x", epoch=e, latency_ms=1,
                   score=Score(value=float(ok), passed=ok))
        for s, e, ok in [("a", 0, True), ("a", 1, False), ("b", 0, True), ("b", 1, True),
                         ("c", 0, False), ("c", 1, False)]
    ]  # fmt: skip
    summary = summarize(results)
    passes = [1.0 if r.passed else 0.0 for r in results]
    mean, low, high = estimate(passes, [r.sample_id for r in results])
    assert (mean, low, high) == (summary.pass_rate, summary.pass_rate_low, summary.pass_rate_high)


def test_failures_group_by_error_message_or_failing_check_with_numbers_masked() -> None:
    assert failure_key(error="timed out after 30 s", error_kind="timeout", reason="", checks={}) \
        == "timeout: timed out after # s"  # fmt: skip
    key = failure_key(
        error=None, error_kind=None, reason="format: ok; answer: wrong",
        checks={"format": 1.0, "answer": 0.0, "answer.distance": 3.0, "turns": 4.0},
    )  # fmt: skip
    assert key == "failed check: answer"
    assert failure_key(error=None, error_kind=None, reason="expected 3, got 4", checks={}) \
        == "failed: expected #, got #"  # fmt: skip
    groups, total = group_failures([("b", ("x", "s1", 0, "")), ("a", ("x", "s2", 0, "")),
                                    ("b", ("x", "s3", 0, ""))])  # fmt: skip
    assert total == 2 and [(g.key, g.count) for g in groups] == [("b", 2), ("a", 1)]


def epoch_results() -> list[EvalResult]:
    out = []
    for experiment, rate in (("baseline", 2), ("v2", 3)):
        for i in range(6):
            for epoch in range(3):
                ok = (i + epoch) % rate != 0
                out.append(
                    EvalResult(sample_id=f"s{i}", experiment_name=experiment, epoch=epoch,
                               latency_ms=1, score=Score(value=float(ok), passed=ok))
                )  # fmt: skip
    return out


def test_pass_at_k_curve_is_the_reports_pass_at_k() -> None:
    report = EvalReport(results=tuple(epoch_results()))
    attempts: dict[str, list[tuple[int, int]]] = {}
    for r in report.results:
        attempts.setdefault(r.experiment_name, [])
    for name in report.experiment_names:
        for group in report.experiment(name).group_by(lambda r: r.sample_id).values():
            attempts[name].append((group.total, group.passed_count))
    curve = pass_at_k_curve(attempts)
    assert curve is not None and curve.xs == (1, 2, 3)
    for name, ys in curve.series:
        assert ys == pytest.approx([report.pass_at_k(k, experiment=name) for k in (1, 2, 3)])
    html = render_html_report(report)
    drawn = re.findall(r'data-x="(\d)" data-value="([^"]+)"', figure(html, "chart-pass-at-k"))
    assert [float(v) for _, v in drawn[:3]] == pytest.approx(list(curve.series[0][1]))
    assert "Epochs: " in html and "flaky samples" in html


# -- the HTML report ------------------------------------------------------------------------


def test_report_charts_draw_the_reports_numbers(runs: DemoRuns) -> None:
    report = EvalReport.load(runs.root / "run-a")
    html = render_html_report(report, slice_key="difficulty")
    drawn = marks(figure(html, "chart-pass-rate"))
    for (label, _, value, low, high), name in zip(drawn, report.experiment_names, strict=True):
        s = report.experiment(name).summarize()
        assert (label, value, low, high) == (name, s.pass_rate, s.pass_rate_low, s.pass_rate_high)
    by_value = {
        (str(v), name): g.experiment(name).summarize()
        for v, g in report.group_by("difficulty").items()
        for name in g.experiment_names
    }
    sliced = marks(figure(html, "chart-slice-difficulty"))
    assert len(sliced) == len(by_value)
    for label, series, value, low, high in sliced:
        s = by_value[(label, series)]
        assert (value, low, high) == (s.pass_rate, s.pass_rate_low, s.pass_rate_high)
    c = report.compare_experiments("baseline", "concise")
    (delta,) = marks(figure(html, "chart-delta-concise-baseline"))
    assert delta[2:] == (c.delta, c.delta_ci.low, c.delta_ci.high)
    counts = [m[2] for m in marks(figure(html, "chart-discordant-concise-baseline"))]
    assert counts == [len(c.regressions), len(c.improvements)]
    checks = {(m[0], m[1]): m[2] for m in marks(figure(html, "chart-checks"))}
    for name in report.experiment_names:
        assert checks[("correct", name)] == report.experiment(name).summarize().metrics["correct"]
    assert "Failures" in html and "failed check: correct" in html


def test_report_per_slice_deltas_are_the_slices_comparisons(runs: DemoRuns) -> None:
    report = EvalReport.load(runs.root / "run-a")
    html = render_html_report(report, slice_key="level")
    drawn = marks(figure(html, "chart-slice-delta-concise-baseline"))
    groups = report.group_by("level")
    assert [m[0] for m in drawn] == ["0", "1", "2"]
    for label, _, value, low, high in drawn:
        c = groups[int(label)].compare_experiments("baseline", "concise")
        assert (value, low, high) == (c.delta, c.delta_ci.low, c.delta_ci.high)


def test_report_of_ten_thousand_results_stays_under_two_megabytes() -> None:
    # The worst case for size: every result fails with its own long message and reason.
    results = [
        EvalResult(
            sample_id=f"sample-with-a-long-identifier-{i:06d}", experiment_name=f"exp{i % 4}",
            latency_ms=i % 997, score=Score(value=0.0, passed=i % 3 == 0,
            reason=f"case {i}: " + "the answer differs from the expected one " * 4,
            metrics=(Metric(f"check{i % 5}", float(i % 2)),)),
            error=f"Error {i} {'x' * 200}" if i % 7 == 0 else None,
            error_kind="agent" if i % 7 == 0 else None,
            usage=TokenUsage(input_tokens=i % 300, output_tokens=i % 50),
            metadata={"topic": f"t{i % 12}", "id": i},
        )
        for i in range(10_000)
    ]  # fmt: skip
    text = render_html_report(EvalReport(results=tuple(results)))
    size = len(text.encode())
    assert size < 2_000_000, size
    assert text.count('<figure class="chart"') >= 8


def test_cost_distribution_bins_what_the_cost_summary_averages() -> None:
    results = [
        EvalResult(
            sample_id=f"s{i // 2}", experiment_name=("a", "b")[i % 2], latency_ms=1,
            score=Score(value=1.0, passed=True), cost=None if i % 5 == 0 else 0.0001 * i,
            judge_cost=0.00005 if i % 3 == 0 else None,
        )
        for i in range(40)
    ]  # fmt: skip
    report = EvalReport(results=tuple(results))
    (chart,) = [c for c in distribution_charts(report) if c.id == "chart-cost"]
    assert isinstance(chart, Histogram) and chart.format == "usd"
    for name, counts in chart.series:
        summary = cost_summary(report.experiment(name).results)
        values = [
            cost
            for r in report.experiment(name).results
            if (cost := result_cost(r.cost, r.judge_cost)) is not None
        ]
        assert sum(counts) == summary.priced == len(values)
        assert tuple(np.histogram(values, bins=chart.edges)[0]) == counts
        assert np.mean(values) == pytest.approx(summary.mean_usd)
    assert "8 of 40 results are unpriced" in chart.note  # i % 5 == 0
    html = render_html_report(report)
    assert '<figure class="chart" id="chart-cost">' in html
    assert "$0.0" in _table_rows(figure(html, "chart-cost"))[0][0]
    unpriced = EvalReport(results=tuple(dataclasses.replace(r, cost=None) for r in results))
    assert "chart-cost" not in {c.id for c in distribution_charts(unpriced)}


# -- the viewer -----------------------------------------------------------------------------


def test_viewer_charts_draw_the_same_numbers_as_the_report(
    runs: DemoRuns, client: TestClient
) -> None:
    report = EvalReport.load(runs.root / "run-a")
    html = render_html_report(report, slice_key="difficulty")
    data = client.get("/api/runs/run-a/charts", params={"slice": "difficulty"}).json()
    charts = {c["id"]: c for c in data["charts"]}
    assert data["slice"] == "difficulty" and data["slice_keys"] == ["difficulty", "level"]
    assert marks(charts["chart-pass-rate"]["svg"]) == marks(figure(html, "chart-pass-rate"))
    assert marks(charts["chart-checks"]["svg"]) == marks(figure(html, "chart-checks"))
    assert marks(charts["chart-slice"]["svg"]) == marks(figure(html, "chart-slice-difficulty"))
    for key in ("score", "latency", "tokens", "cost"):
        assert charts[f"chart-{key}"]["rows"] == _table_rows(figure(html, f"chart-{key}"))
    failures = data["failures"]
    assert failures["not_passed"] == report.failed_count
    assert failures["groups"][0]["key"] == "failed check: correct"
    assert {g["key"]: g["count"] for g in failures["groups"]} == {
        g.key: g.count for g in report_failures(report)[0]
    }


def _table_rows(fig: str) -> list[list[str]]:
    table = fig.split("<table>", 1)[1]
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    return [re.findall(r"<td>(.*?)</td>", row) for row in rows]


def test_viewer_slice_choice_and_bad_key(client: TestClient) -> None:
    none = client.get("/api/runs/run-a/charts", params={"slice": ""}).json()
    assert "chart-slice" not in {c["id"] for c in none["charts"]}
    level = client.get("/api/runs/run-a/charts", params={"slice": "level"}).json()
    sliced = next(c for c in level["charts"] if c["id"] == "chart-slice")
    assert sliced["title"] == "Pass rate by level"
    response = client.get("/api/runs/run-a/charts", params={"slice": "nope"})
    assert response.status_code == 400 and "nope" in response.json()["error"]


def test_viewer_compare_charts_are_the_comparisons_numbers(
    runs: DemoRuns, client: TestClient
) -> None:
    report = EvalReport.load(runs.root / "run-a")
    sides = {"base_run": "run-a", "base": "baseline", "treat": "concise", "slice": "difficulty"}
    data = client.get("/api/compare", params=sides).json()
    charts = {c["id"]: c for c in data["charts"]}
    c = report.compare_experiments("baseline", "concise")
    assert marks(charts["chart-delta"]["svg"])[0][2:] == (c.delta, c.delta_ci.low, c.delta_ci.high)
    counts = [m[2] for m in marks(charts["chart-discordant"]["svg"])]
    assert counts == [len(c.regressions), len(c.improvements)]
    groups = report.group_by("difficulty")
    for label, _, value, low, high in marks(charts["chart-slice-delta"]["svg"]):
        s = groups[label].compare_experiments("baseline", "concise")
        assert (value, low, high) == pytest.approx((s.delta, s.delta_ci.low, s.delta_ci.high))


def test_pair_diffs_the_outputs_and_tool_calls_of_a_flipped_sample(
    runs: DemoRuns, client: TestClient
) -> None:
    compared = client.get(
        "/api/compare", params={"base_run": "run-a", "base": "baseline", "treat": "concise"}
    ).json()
    flip = next(f for f in compared["regressions"] if f["sample_id"] == "s05")
    ids = {"base_run": "run-a", "base": flip["baseline"]["id"], "treat": flip["treatment"]["id"]}
    data = client.get("/api/pair", params=ids).json()
    assert data["baseline"]["result"]["experiment_name"] == "baseline"
    assert data["treatment"]["result"]["experiment_name"] == "concise"
    assert data["diff"]["output"] == [{"op": "replace", "a": ["7"], "b": ["8"]}]
    assert data["diff"]["output_same"] is False and data["diff"]["tool_calls_same"] is True
    bad = client.get("/api/pair", params={**ids, "treat": "x"})
    assert bad.status_code == 400 and "result id" in bad.json()["error"]
    assert client.get("/api/pair", params={**ids, "treat": "99999"}).status_code == 404
    assert client.get("/api/pair", params={"base_run": "run-a"}).status_code == 400


def test_pair_diff_of_structured_outputs_and_different_tool_calls() -> None:
    base = EvalResult(
        sample_id="s", experiment_name="a", latency_ms=1, score=Score(value=1.0, passed=True),
        output={"answer": 3, "why": "sum"},
        tool_calls=(ToolCallRecord(name="add", params={"a": 1}, message="", success=True),),
    )  # fmt: skip
    treat = dataclasses.replace(
        base, experiment_name="b", output={"answer": 4, "why": "sum"},
        tool_calls=(ToolCallRecord(name="mul", params={"a": 1}, message="", success=False,
                                   error="boom"),),
    )  # fmt: skip
    diff = pair_diff(base, treat)
    changed = [b for b in diff["output"] if b["op"] != "equal"]
    assert changed == [{"op": "replace", "a": ['  "answer": 3,'], "b": ['  "answer": 4,']}]
    assert diff["tool_calls"] == [
        {"op": "replace", "a": ['add {"a": 1}'], "b": ['mul {"a": 1}  [failed: boom]']}
    ]


# -- provenance -----------------------------------------------------------------------------


def test_provenance_rows_show_what_the_manifest_records() -> None:
    from weakincentives.debug._provenance import provenance_rows

    manifest = {
        "format_version": 1, "run_id": "r", "created_at": "2026-01-02T03:04:05Z",
        "status": "complete",
        "fingerprint": {
            "dataset_sha256": "ab" * 32, "target": "agent.run", "evaluators": ["exact", "judge"],
            "experiments": [{"name": "baseline", "overrides_tag": None, "flags": {}},
                            {"name": "careful", "overrides_tag": "careful", "flags": {}}],
            "package_version": "0.1.0", "git_commit": "abc123", "epochs": 3,
            "extra": {"model": "gpt-x", "temperature": 0.2},
        },
        "counts": {"results": 3}, "config": {"max_concurrent": 16},
        "provenance": {"command_line": "wink eval run ..."},
    }  # fmt: skip
    rows = dict(provenance_rows(manifest))
    assert rows["Created"] == "2026-01-02T03:04:05Z"
    assert rows["Evaluators"] == "exact, judge"
    assert rows["Experiments"] == 'baseline, careful {"overrides_tag": "careful"}'
    assert (rows["Git commit"], rows["Epochs"], rows["model"]) == ("abc123", "3", "gpt-x")
    assert rows["command_line"] == "wink eval run ..."
    assert rows["config: max_concurrent"] == "16"
    assert "counts" not in rows and "format_version" not in rows


def test_run_page_and_report_carry_the_provenance(runs: DemoRuns, client: TestClient) -> None:
    rows = dict(map(tuple, client.get("/api/runs/run-a").json()["provenance"]))
    assert rows["Dataset sha256"] == "0" * 64 and rows["Epochs"] == "1"
    html = render_html_report(EvalReport.load(runs.root / "run-a"))
    assert "Run: what produced it" in html and "0" * 64 in html


def test_a_check_of_values_in_the_unit_range_keeps_its_interval_in_it() -> None:
    mean, low, high = estimate([1.0, 1.0, 1.0, 0.9], ["a", "b", "c", "d"])
    assert mean == pytest.approx(0.975) and 0.0 <= low < mean < high == 1.0


def test_provenance_rows_read_the_recorded_run_provenance() -> None:
    from weakincentives.debug._provenance import provenance_rows

    manifest = {
        "created_at": "2026-01-02T03:04:05Z",
        "fingerprint": {"dataset_sha256": "cd" * 32, "package_version": "0.1.0", "epochs": 1,
                        "models": {"agent": {"model": "gpt-x"}}},
        "provenance": {
            "agent": {"provider": "openai", "model": "gpt-x", "base_url": "http://h/v1",
                      "parameters": {"temperature": 0.2}, "adapter": "OpenAIAdapter",
                      "version": "1.0"},
            "judges": [{"provider": "anthropic", "model": "claude-y", "parameters": {}}],
            "dataset": {"path": "data/q.jsonl", "sha256": "cd" * 32},
            "command": ["wink", "eval", "run", "my agent.py"], "git_commit": "abc",
            "git_dirty": True, "package_version": "0.1.0", "python_version": "3.11.7",
            "host": "box", "tags": ["nightly"],
        },
    }  # fmt: skip
    rows = provenance_rows(manifest)
    labels = [label for label, _ in rows]
    assert labels[:4] == ["Created", "Model", "Base URL", "Parameters"]
    found = dict(rows)
    assert found["Model"] == "openai gpt-x" and found["Judge"] == "anthropic claude-y"
    assert found["Command line"] == "wink eval run 'my agent.py'"
    assert found["Git commit"] == "abc (dirty)" and found["tags"] == "nightly"
    assert labels.count("Dataset sha256") == 1 and labels.count("Package version") == 1
    assert "models" not in labels  # the fingerprint's copy of what Model and Judge say


def test_the_flaky_chart_draws_the_least_reliable_and_counts_the_rest() -> None:
    from weakincentives.debug._figures import flaky_chart

    flaky = [("x", f"s{i:02d}", 4, 1 + i % 3) for i in range(25)]
    chart = flaky_chart(flaky)
    assert chart is not None and chart.title == "Epochs: 25 flaky samples"
    assert len(chart.marks) == 20 and "5 more not drawn" in chart.note
    assert [m.value for m in chart.marks][:9] == [0.25] * 9
    assert flaky_chart([]) is None


def test_a_slice_of_many_values_draws_those_with_most_results() -> None:
    results = tuple(
        EvalResult(sample_id=f"s{i}-{j}", experiment_name="x", latency_ms=1,
                   score=Score(value=1.0, passed=True), metadata={"user": f"u{i:02d}"})
        for i in range(40)
        for j in range(1 + (i < 5))  # u00-u04 have two results each
    )  # fmt: skip
    html = render_html_report(EvalReport(results=results), slice_key="user")
    fig = figure(html, "chart-slice-user")
    labels = [m[0] for m in marks(fig)]
    assert len(labels) == 30 and {f"u{i:02d}" for i in range(5)} <= set(labels)
    assert "10 more are not" in fig


def test_the_reports_slice_chart_keeps_the_experiments_order() -> None:
    results = []
    for i in range(4):
        pair = [("base", "u"), ("treat", "u")] if i < 2 else [("treat", "v"), ("base", "v")]
        for experiment, kind in pair:
            results.append(
                EvalResult(
                    sample_id=f"s{i}", experiment_name=experiment, latency_ms=1,
                    score=Score(value=1.0, passed=True), metadata={"kind": kind},
                )
            )  # fmt: skip
    html = render_html_report(EvalReport(results=tuple(results)), slice_key="kind")
    drawn = [(m[0], m[1]) for m in marks(figure(html, "chart-slice-kind"))]
    assert drawn == [("u", "base"), ("u", "treat"), ("v", "base"), ("v", "treat")]
