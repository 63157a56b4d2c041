from __future__ import annotations

import io

import pytest
from rich.console import Console

from weakincentives.evals import ErrorKind, EvalReport, EvalResult, Score, render_report, stats
from weakincentives.runtime.session import TokenUsage


def result(
    sample_id: str,
    experiment: str,
    passed: bool,
    *,
    error: ErrorKind | None = None,
    latency: int = 100,
    epoch: int = 0,
) -> EvalResult:
    return EvalResult(
        sample_id=sample_id,
        experiment_name=experiment,
        score=Score(value=float(passed), passed=passed),
        latency_ms=latency,
        error=None if error is None else "failed",
        error_kind=error,
        epoch=epoch,
        usage=TokenUsage(input_tokens=1000, output_tokens=250),
    )


def ab_report() -> EvalReport:
    """baseline passes s0-s4 of 10 (s9 times out); v2 passes s0-s3, s5-s7 (s4 regressed)."""
    base = [
        result(
            f"s{i}", "baseline", i < 5, error="timeout" if i == 9 else None, latency=10 * (i + 1)
        )
        for i in range(10)
    ]
    v2_passes = {0, 1, 2, 3, 5, 6, 7}
    v2 = [result(f"s{i}", "v2", i in v2_passes, latency=50) for i in range(10)]
    return EvalReport(results=(*base, *v2), run_id="run-7", expected_count=20)


def render(report: EvalReport, *, width: int = 100, baseline: str | None = None) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    render_report(report, console, baseline=baseline)
    return console.export_text()


def flat(text: str) -> str:
    """Collapse runs of spaces so assertions do not depend on column widths."""
    return " ".join(text.split())


def test_experiment_tables_show_rates_intervals_errors_latency_and_tokens() -> None:
    report = ab_report()
    text = flat(render(report))
    assert text.startswith("Run run-7: 20 of 20 results (complete) baseline")
    assert "Results 10 (1 error)" in text
    assert "Pass rate 50.0% [23.7%, 76.3%]" in text  # Wilson, 5 of 10
    assert "Pass rate excl. errors 55.6%" in text
    mean = stats.mean_ci([1.0] * 5 + [0.0] * 5)
    assert f"Mean score 0.500 [{mean.low:.3f}, {mean.high:.3f}]" in text
    assert "Errors timeout 1" in text
    p95 = report.experiment("baseline").latency_p95_ms
    assert f"Latency p50 55 ms, p95 {p95:,.0f} ms (mean 55 ms)" in text
    assert "Tokens 12,500 (10,000 in, 2,500 out)" in text
    assert "v2 Results 10 Pass rate 70.0% [39.7%, 89.2%]" in text
    assert "Errors none" in text


def test_comparison_block_shows_delta_p_value_and_discordant_pairs() -> None:
    report = ab_report()
    text = flat(render(report))
    c = report.compare_experiments("baseline", "v2")
    low, high = c.delta_ci.low * 100, c.delta_ci.high * 100
    assert "v2 vs baseline Pass rate 50.0% -> 70.0% (+20.0 pts, +40.0% relative)" in text
    assert f"Paired delta +20.0 pts [{low:+.1f}, {high:+.1f}] (95% CI, 10 pairs;" in text
    assert "Discordant 1 pass->fail, 3 fail->pass" in text
    assert "p-value 0.625 (McNemar exact), Holm 0.625" in text
    # 4 discordant pairs of 10: no effect reaches 80% power with McNemar, and it says so.
    assert "Detectable effect n/a (10 pairs cannot reach 80% power with McNemar)" in text
    assert "Regressions s4 Improvements s5, s6, s7" in text
    assert "Unpaired 0 baseline only, 0 treatment only" in text


def test_single_experiment_has_no_comparison_block() -> None:
    report = EvalReport(results=tuple(result(f"s{i}", "only", i < 3) for i in range(4)))
    text = render(report)
    assert "4 results" in text
    assert " vs " not in text


def test_explicit_baseline_and_incomplete_runs() -> None:
    report = ab_report()
    partial = EvalReport(results=report.results[:15], expected_count=20)
    text = flat(render(partial, baseline="v2"))
    assert "15 of 20 results (incomplete, 5 missing)" in text
    assert "baseline vs v2" in text
    assert "5 treatment only" in text


def test_epochs_add_pass_at_k_and_clustered_intervals() -> None:
    patterns = {"a": [1, 1, 0], "b": [1, 1, 1], "c": [0, 0, 0]}
    report = EvalReport(
        results=tuple(
            result(sid, "x", bool(p), epoch=e)
            for sid, ps in patterns.items()
            for e, p in enumerate(ps)
        )
    )
    text = flat(render(report))
    assert "pass@3 / pass^3 66.7% / 33.3%, 1 flaky" in text
    assert "Intervals clustered, 3 clusters" in text


def test_many_flips_are_cut_short() -> None:
    base = [result(f"s{i}", "baseline", True) for i in range(8)]
    worse = [result(f"s{i}", "worse", False, epoch=0) for i in range(8)]
    text = flat(render(EvalReport(results=(*base, *worse))))
    assert "Regressions s0, s1, s2, s3, s4 (+3 more)" in text


@pytest.mark.parametrize("width", [80, 100])
def test_output_fits_the_terminal_width(width: int) -> None:
    text = render(ab_report(), width=width)
    assert max(len(line) for line in text.splitlines()) <= width


def test_output_is_plain_when_not_a_terminal() -> None:
    buffer = io.StringIO()
    ab_report().render(Console(file=buffer, width=80))
    output = buffer.getvalue()
    assert "\x1b[" not in output
    assert "v2 vs baseline" in output


def test_no_pairs_renders_not_available() -> None:
    report = EvalReport(results=(result("a", "baseline", True), result("b", "v2", True)))
    text = flat(render(report))
    assert "p-value n/a (no pairs)" in text
    assert "Paired delta n/a (no pairs)" in text
    assert "Bootstrap CI n/a" in text
    assert "Unpaired 1 baseline only, 1 treatment only" in text
