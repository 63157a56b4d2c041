"""Issue 16: what a report shows for small or degenerate data, case by case.

Each test is one case the issue found, rendered through the terminal report (and `--json`
where the number lands there); the numbers beside each assertion are what the report
printed before.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console
from scipy import stats as scipy_stats

from weakincentives.evals import EvalReport, EvalResult, Score, render_report, stats


def result(sample: str, experiment: str, passed: bool, *, value: float | None = None,
           epoch: int = 0) -> EvalResult:  # fmt: skip
    score = Score(value=float(passed) if value is None else value, passed=passed)
    return EvalResult(
        sample_id=sample, experiment_name=experiment, score=score, latency_ms=10, epoch=epoch
    )


def lines(report: EvalReport) -> dict[str, str]:
    """The rendered rows as `{label: value}` (later tables win), whitespace collapsed."""
    console = Console(record=True, width=200, file=io.StringIO())
    render_report(report, console)
    rows: dict[str, str] = {}
    for line in console.export_text().splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2:
            label_and_value = " ".join(line.split())
            for label in (
                "Paired delta", "Bootstrap CI", "Detectable effect", "Score delta", "Pass rate",
                "Mean score", "Intervals", "p-value", "Results",
            ):  # fmt: skip
                if label_and_value.startswith(label + " "):
                    rows[label] = label_and_value[len(label) + 1 :]
    return rows


def test_three_samples_that_all_improve_have_no_zero_width_interval() -> None:
    # Before: "+100.0 pts [+100.0, +100.0]", bootstrap the same, "Detectable effect 0.0 pts".
    report = EvalReport(
        results=(
            *(result(f"s{i}", "baseline", False) for i in range(3)),
            *(result(f"s{i}", "v2", True) for i in range(3)),
        )
    )
    rows = lines(report)
    assert rows["Paired delta"].startswith("+100.0 pts [+20.6, +100.0] (95% CI, 3 pairs;")
    assert "Newcombe hybrid score" in rows["Paired delta"]
    assert rows["Bootstrap CI"].startswith("n/a (no spread")
    assert rows["p-value"].startswith("0.250 (McNemar exact)")
    assert rows["Detectable effect"] == "n/a (3 pairs cannot reach 80% power with McNemar)"


def test_identical_outcomes_on_six_samples_have_a_real_interval() -> None:
    # Before: "+0.0 pts [+0.0, +0.0]" and "Score delta +0.000 [+0.000, +0.000]".
    report = EvalReport(
        results=tuple(result(f"s{i}", e, i % 2 == 0) for e in ("baseline", "v2") for i in range(6))
    )
    rows = lines(report)
    assert rows["Paired delta"].startswith("+0.0 pts [-25.5, +25.5] (95% CI, 6 pairs;")
    assert rows["Detectable effect"] == "n/a (no discordant pairs to estimate it from)"
    assert rows["Score delta"].startswith("+0.000 [-0.255, +0.255]")


def test_epochs_that_all_pass_show_the_wilson_interval_over_samples() -> None:
    # Before: "Pass rate 100.0% [100.0%, 100.0%]".
    report = EvalReport(
        results=tuple(
            result(f"s{i}", "baseline", True, epoch=k) for i in range(5) for k in range(3)
        )
    )
    rows = lines(report)
    assert rows["Pass rate"] == "100.0% [56.6%, 100.0%]"
    assert rows["Mean score"] == "1.000 [0.566, 1.000]"
    assert rows["Intervals"] == "clustered, 5 clusters"
    exported = json.loads(report.to_json())["experiments"]["baseline"]
    assert exported["pass_rate_ci"] == [stats.wilson_interval(5, 5).low, 1.0]


def test_five_scored_samples_get_a_paired_t_interval() -> None:
    # Before: "Score delta +0.210 [+0.048, +0.372]" with p = 0.011 (a z-test at n = 5).
    base = [0.3, 0.4, 0.2, 0.5, 0.3]
    diffs = [-0.05, 0.15, 0.2, 0.3, 0.45]
    treat = [b + d for b, d in zip(base, diffs, strict=True)]
    report = EvalReport(
        results=(
            *(result(f"s{i}", "baseline", b >= 0.5, value=b) for i, b in enumerate(base)),
            *(result(f"s{i}", "v2", t >= 0.5, value=t) for i, t in enumerate(treat)),
        )
    )
    reference = scipy_stats.ttest_rel(treat, base)
    low, high = reference.confidence_interval(0.95)
    rows = lines(report)
    assert rows["Score delta"] == (
        f"+0.210 [{low:+.3f}, {high:+.3f}] (p {reference.pvalue:.3f}, paired t-test)"
    )
    assert rows["Score delta"].startswith("+0.210 [-0.020, +0.440] (p 0.064")


def test_an_all_fail_run_has_an_exact_zero_lower_bound_in_json() -> None:
    # Before: 2.7755575615628914e-17.
    report = EvalReport(results=tuple(result(f"s{i}", "baseline", False) for i in range(10)))
    exported = json.loads(report.to_json())["experiments"]["baseline"]
    assert exported["pass_rate_ci"][0] == 0.0
    assert lines(report)["Pass rate"] == "0.0% [0.0%, 27.8%]"


def test_a_zero_one_score_interval_stays_below_one() -> None:
    # Before: [0.763, 1.077] (a normal interval past the score's range).
    values = [1.0, 1.0, 1.0, 0.6, 1.0]
    report = EvalReport(
        results=tuple(result(f"s{i}", "baseline", True, value=v) for i, v in enumerate(values))
    )
    summary = report.summarize()
    assert summary.mean_ci.high == 1.0
    assert lines(report)["Mean score"] == f"0.920 [{summary.mean_ci.low:.3f}, 1.000]"


def test_one_sample_with_three_epochs_says_why_nothing_is_known() -> None:
    # Before: "Paired delta +0.0 pts (95% CI, 3 pairs in 1 samples)", "1 clusters".
    report = EvalReport(
        results=tuple(result("s0", e, True, epoch=k) for e in ("baseline", "v2") for k in range(3))
    )
    rows = lines(report)
    why = "1 sample: no spread between samples to estimate"
    assert (
        rows["Paired delta"] == f"+0.0 pts n/a ({why}) (95% CI, 3 pairs in 1 sample; no interval)"
    )
    assert rows["p-value"] == f"n/a ({why})"
    assert rows["Intervals"] == "clustered, 1 cluster"


def test_a_bound_that_rounds_to_zero_prints_without_a_minus_sign() -> None:
    # Before: "Bootstrap CI [-0.0, +0.3] pts" and "Paired delta +0.1 pts [-0.0, +0.3]".
    # 1 regression and 4 improvements in 3,000 pairs: the seeded bootstrap's lower end is
    # -1/3000, which rounds to zero.
    n = 3000
    report = EvalReport(
        results=(
            *(result(f"s{i}", "baseline", not 1 <= i <= 4) for i in range(n)),
            *(result(f"s{i}", "v2", i >= 1) for i in range(n)),
        )
    )
    comparison = report.compare_experiments("baseline", "v2")
    assert -0.0005 < comparison.bootstrap_ci.low < 0  # rounds to zero, below it
    rows = lines(report)
    assert rows["Bootstrap CI"].startswith("[+0.0, ")
    # No zero with a minus sign ("-0.0", "-0.000"); a true negative ("-0.001") may show.
    assert re.search(r"-0\.0+(?![0-9])", " ".join(rows.values())) is None


@pytest.mark.parametrize(("errors", "text"), [(1, "(1 error)"), (2, "(2 errors)")])
def test_error_counts_have_correct_plurals(errors: int, text: str) -> None:
    from weakincentives.evals import ErrorKind

    kind: ErrorKind = "timeout"
    failed = tuple(
        EvalResult(sample_id=f"e{i}", experiment_name="baseline", score=Score(value=0.0),
                   latency_ms=1, error="boom", error_kind=kind)
        for i in range(errors)
    )  # fmt: skip
    report = EvalReport(results=(result("s0", "baseline", True), *failed))
    assert lines(report)["Results"] == f"{errors + 1} {text}"
