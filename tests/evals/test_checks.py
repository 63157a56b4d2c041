"""Per-check rates: which check of a combined evaluator fails most, with intervals."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest
from rich.console import Console
from statsmodels.stats.proportion import proportion_confint

from weakincentives.debug import render_html_report
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Metric,
    Sample,
    Score,
    all_of,
    check_rates,
    contains,
    exact_match,
    run_eval,
    stats,
)

# 10 samples: exact match passes for 3, "contains" for 8 (the output holds the expected).
SAMPLES = [
    Sample(id=f"s{i}", input=i, expected="7" if i < 8 else "x", metadata={}) for i in range(10)
]


def answer(i: int) -> str:
    return "7" if i < 3 else ("n=7" if i < 8 else "y")


def test_all_of_children_get_pass_rates_with_wilson_intervals() -> None:
    report = run_eval(SAMPLES, answer, all_of(exact_match, contains))
    rates = check_rates(report.results)
    assert list(rates) == ["exact_match", "contains"]
    exact, found = rates["exact_match"], rates["contains"]
    assert (exact.n, exact.passed, exact.pass_rate) == (10, 3, 0.3)
    assert (found.n, found.passed, found.pass_rate) == (10, 8, 0.8)
    for rate in (exact, found):
        assert rate.passed is not None and rate.pass_rate_ci is not None
        low, high = proportion_confint(rate.passed, rate.n, method="wilson")
        assert rate.pass_rate_ci.low == pytest.approx(low, abs=1e-12)
        assert rate.pass_rate_ci.high == pytest.approx(high, abs=1e-12)


def scored(*metrics: tuple[Metric, ...], error: bool = False) -> EvalReport:
    results: list[EvalResult] = []
    for i, ms in enumerate(metrics):
        score = Score(value=1.0, passed=True, metrics=ms)
        report = run_eval(
            [Sample(id=f"r{i}", input="a", expected="a")],
            (lambda x: x) if not error or i else _boom,
            lambda o, e, score=score: score,
        )
        results.extend(report.results)
    return EvalReport(results=tuple(results))


def _boom(x: Any) -> Any:
    raise RuntimeError("agent failed")


def test_binary_metrics_have_pass_rates_and_others_means_with_intervals() -> None:
    report = scored(
        (Metric("tool_ok", 1.0), Metric("tokens", 100.0)),
        (Metric("tool_ok", 0.0), Metric("tokens", 300.0)),
        (Metric("tool_ok", 1.0), Metric("tokens", 200.0), Metric("rare", 0.5)),
    )
    rates = check_rates(report.results)
    assert (rates["tool_ok"].passed, rates["tool_ok"].n) == (2, 3)
    tokens = rates["tokens"]
    assert (tokens.pass_rate, tokens.pass_rate_ci, tokens.passed) == (None, None, None)
    expected = stats.mean_ci([100.0, 300.0, 200.0])
    assert (tokens.mean, tokens.mean_ci) == (200.0, expected.interval)
    rare = rates["rare"]
    assert (rare.n, rare.mean, rare.pass_rate) == (1, 0.5, None)
    assert math.isnan(rare.mean_ci.low)
    assert rare.to_dict()["pass_rate_ci"] is None


def test_errored_results_are_not_in_a_checks_denominator() -> None:
    report = scored((Metric("ok", 1.0),), (Metric("ok", 0.0),), (Metric("ok", 1.0),), error=True)
    assert report.error_count == 1
    assert (check_rates(report.results)["ok"].n, check_rates(report.results)["ok"].passed) == (
        2, 1,
    )  # fmt: skip


def test_terminal_json_and_html_reports_show_the_same_check_rates() -> None:
    report = run_eval(SAMPLES, answer, all_of(exact_match, contains))
    out = io.StringIO()
    report.render(Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "baseline: checks" in text
    assert text.index("exact_match") < text.index("contains     ")  # lowest pass rate first
    assert "30.0% [10.8%, 60.3%] (n=10)" in text
    block = report.to_dict()["experiments"]["baseline"]["checks"]
    assert block["exact_match"]["pass_rate"] == 0.3
    assert block["exact_match"]["pass_rate_ci"] == pytest.approx([0.1078, 0.6032], abs=1e-4)
    html = render_html_report(report)
    assert "<h2>Checks</h2>" in html and "30.0% [10.8, 60.3]" in html


def test_a_single_evaluator_without_metrics_adds_no_checks_table() -> None:
    report = run_eval(SAMPLES, answer, exact_match)
    out = io.StringIO()
    report.render(Console(file=out, width=200, color_system=None))
    assert "checks" not in out.getvalue()
    assert report.to_dict()["experiments"]["baseline"]["checks"] == {}
    assert "<h2>Checks</h2>" not in render_html_report(report)
