from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from weakincentives import serde
from weakincentives.errors import ConfigurationError, InvalidReportError, InvalidStatisticError
from weakincentives.evals import (
    REPORT_FORMAT,
    ErrorKind,
    EvalReport,
    EvalResult,
    Metric,
    Score,
    Summary,
    stats,
)
from weakincentives.runtime.session import TokenUsage


def result(
    sample_id: str,
    *,
    passed: bool = True,
    value: float | None = None,
    experiment: str = "baseline",
    epoch: int = 0,
    error: ErrorKind | None = None,
    latency: int = 10,
    tokens: tuple[int, int] = (0, 0),
    metadata: Mapping[str, Any] | None = None,
) -> EvalResult:
    score = Score(value=(1.0 if passed else 0.0) if value is None else value, passed=passed)
    return EvalResult(
        sample_id=sample_id,
        experiment_name=experiment,
        score=score,
        latency_ms=latency,
        epoch=epoch,
        error=None if error is None else f"{error} failure",
        error_kind=error,
        usage=TokenUsage(input_tokens=tokens[0], output_tokens=tokens[1]),
        metadata=metadata or {},
    )


def ten_with_two_errors() -> EvalReport:
    """5 passed (value 1.0), 3 failed (value 0.25), 2 errors (one with a stale value 0.9)."""
    results = [result(f"p{i}", latency=10 * (i + 1)) for i in range(5)]
    results += [result(f"f{i}", passed=False, value=0.25, latency=60 + 10 * i) for i in range(3)]
    results.append(result("e0", passed=False, value=0.0, error="timeout", latency=90))
    results.append(result("e1", passed=True, value=0.9, error="agent", latency=100))
    return EvalReport(results=tuple(results))


# -- counts and rates ---------------------------------------------------------------------


def test_errors_count_as_not_passed_in_the_pass_rate() -> None:
    report = ten_with_two_errors()
    assert report.total == report.total_samples == 10
    assert report.successful == 8
    assert report.passed_count == 5
    assert report.failed_count == 5
    assert report.error_count == 2
    assert report.pass_rate == 0.5
    assert report.error_rate == 0.2
    assert report.pass_rate_excluding_errors == 5 / 8


def test_errors_score_zero_in_the_mean_score() -> None:
    report = ten_with_two_errors()
    assert report.mean_score == pytest.approx((5 * 1.0 + 3 * 0.25) / 10)
    assert report.mean_score_excluding_errors == pytest.approx((5 * 1.0 + 3 * 0.25) / 8)


def test_selections_and_errors_by_kind() -> None:
    report = ten_with_two_errors()
    assert [r.sample_id for r in report.passed_samples()] == [f"p{i}" for i in range(5)]
    assert [r.sample_id for r in report.failed_samples()] == ["f0", "f1", "f2", "e0", "e1"]
    assert [r.sample_id for r in report.errors()] == ["e0", "e1"]
    assert report.errors_by_kind() == {"timeout": 1, "agent": 1}
    unknown = EvalResult(
        sample_id="x", experiment_name="b", score=Score(value=0.0, passed=False),
        latency_ms=1, error="boom",
    )  # fmt: skip
    assert EvalReport(results=(unknown,)).errors_by_kind() == {"unknown": 1}


def test_latency_mean_and_percentiles() -> None:
    report = ten_with_two_errors()  # latencies 10, 20, ..., 100
    assert report.mean_latency_ms == 55.0
    assert report.latency_p50_ms == 55.0
    assert report.latency_p95_ms == pytest.approx(95.5)


def test_token_totals_include_errored_results() -> None:
    report = EvalReport(
        results=(result("a", tokens=(100, 20)), result("b", tokens=(50, 5), error="timeout"))
    )
    assert report.total_input_tokens == 150
    assert report.total_output_tokens == 25
    assert report.total_tokens == 175


def test_empty_report_is_all_zeros() -> None:
    report = EvalReport()
    assert (report.total, report.pass_rate, report.mean_score, report.error_rate) == (
        0,
        0.0,
        0.0,
        0.0,
    )
    assert (report.mean_latency_ms, report.latency_p95_ms, report.total_tokens) == (0.0, 0.0, 0)
    assert report.complete
    assert report.experiment_names == ()
    assert report.pass_rate_ci() == stats.Interval(0.0, 1.0)


def test_completeness_counts_distinct_keys() -> None:
    results = (result("a"), result("b"), result("a"))  # "a" delivered twice
    report = EvalReport(results=results, expected_count=4)
    assert report.distinct_count == 2
    assert report.missing == 2
    assert not report.complete
    assert EvalReport(results=results, expected_count=2).complete
    assert EvalReport(results=results).missing == 0


def test_deduplicated_keeps_the_last_result_per_key() -> None:
    report = EvalReport(results=(result("a", passed=False), result("b"), result("a")))
    deduped = report.deduplicated()
    assert [r.sample_id for r in deduped.results] == ["a", "b"]
    assert deduped.pass_rate == 1.0


# -- experiments --------------------------------------------------------------------------


def two_experiments() -> EvalReport:
    base = [result(f"s{i}", passed=i < 2, experiment="baseline") for i in range(4)]
    treat = [
        result(f"s{i}", passed=i < 3, value=0.5 if i < 3 else 0.0, experiment="v2")
        for i in range(4)
    ]
    return EvalReport(results=(*treat[:1], *base, *treat[1:]))


def test_by_experiment_groups_in_order_of_first_appearance() -> None:
    report = two_experiments()
    assert report.experiment_names == ("v2", "baseline")
    groups = report.by_experiment()
    assert [r.sample_id for r in groups["baseline"]] == ["s0", "s1", "s2", "s3"]
    assert report.pass_rate_by_experiment() == {"v2": 0.75, "baseline": 0.5}
    assert report.mean_score_by_experiment() == {"v2": 0.375, "baseline": 0.5}
    assert report.experiment("v2").total == 4


def test_unknown_experiment_names_are_rejected_with_the_known_ones() -> None:
    report = two_experiments()
    with pytest.raises(
        ConfigurationError, match=r"no results for experiment 'v3'; .*'v2', 'baseline'"
    ):
        report.experiment("v3")
    with pytest.raises(ConfigurationError, match="with itself"):
        report.compare_experiments("v2", "v2")


def test_pass_rate_ci_is_wilson_overall_and_per_experiment() -> None:
    report = ten_with_two_errors()
    wilson = stats.wilson_interval(5, 10)
    assert report.pass_rate_ci() == wilson.interval
    by_exp = two_experiments().pass_rate_ci_by_experiment()
    assert by_exp["v2"] == stats.wilson_interval(3, 4).interval
    assert by_exp["baseline"] == stats.wilson_interval(2, 4).interval


def test_mean_score_ci_is_the_clt_interval_with_errors_as_zero() -> None:
    report = ten_with_two_errors()
    scores = [1.0] * 5 + [0.25] * 3 + [0.0, 0.0]
    assert report.mean_score_ci() == stats.mean_ci(scores).interval


def test_summary_reads_like_a_mapping() -> None:
    report = ten_with_two_errors()
    assert report.summary["n"] == 10
    assert report.summary["mean"] == pytest.approx(0.575)
    assert report.summary["pass_rate"] == 0.5
    assert report.summary["errors"] == 2


def test_pass_rate_ci_with_a_cluster_key_uses_clustered_standard_errors() -> None:
    topics = ["a", "a", "a", "b", "b", "c", "c", "c", "d", "d"]
    passes = [1, 1, 1, 0, 0, 1, 0, 1, 0, 0]
    report = EvalReport(
        results=tuple(
            result(f"s{i}", passed=bool(p), metadata={"topic": t})
            for i, (p, t) in enumerate(zip(passes, topics, strict=True))
        )
    )
    clustered = stats.clustered_mean([float(p) for p in passes], topics)
    interval = report.pass_rate_ci(cluster="topic")
    assert interval.low == pytest.approx(max(clustered.low, 0.0))
    assert interval.high == pytest.approx(min(clustered.high, 1.0))
    assert interval != report.pass_rate_ci()  # differs from Wilson
    assert report.summarize(cluster="topic").n_clusters == 4


def test_repeated_epochs_are_clustered_by_sample_automatically() -> None:
    patterns = {"a": [1, 1, 1], "b": [1, 0, 1], "c": [0, 0, 0], "d": [1, 1, 0]}
    report = EvalReport(
        results=tuple(
            result(sid, passed=bool(p), epoch=e)
            for sid, pattern in patterns.items()
            for e, p in enumerate(pattern)
        )
    )
    flat = [float(p) for pattern in patterns.values() for p in pattern]
    clusters = [sid for sid, pattern in patterns.items() for _ in pattern]
    expected = stats.clustered_mean(flat, clusters)
    summary = report.summarize()
    assert summary.n_clusters == 4
    assert summary.se == pytest.approx(expected.se)
    assert report.pass_rate_ci().low == pytest.approx(max(expected.low, 0.0))


# -- epochs: pass@k, pass^k, flaky ----------------------------------------------------------


def epochs_report() -> EvalReport:
    patterns = {"a": [1, 0, 0], "b": [1, 1, 1], "c": [0, 0, 0]}
    results = [
        result(sid, passed=bool(p), epoch=e, experiment=exp)
        for exp in ("baseline", "v2")
        for sid, pattern in patterns.items()
        for e, p in enumerate(pattern if exp == "baseline" else [1, 1, 1])
    ]
    return EvalReport(results=tuple(results))


def test_pass_at_k_and_pass_hat_k_average_over_samples() -> None:
    report = epochs_report()
    assert report.epochs == 3
    # a: 1 - C(2,2)/C(3,2) = 2/3; b: 1; c: 0
    assert report.pass_at_k(2, experiment="baseline") == pytest.approx(5 / 9)
    assert report.pass_at_k(2, experiment="baseline") == pytest.approx(
        (stats.pass_at_k(3, 1, 2) + stats.pass_at_k(3, 3, 2) + stats.pass_at_k(3, 0, 2)) / 3
    )
    assert report.pass_hat_k(2, experiment="baseline") == pytest.approx(1 / 3)
    assert report.pass_at_k(1, experiment="baseline") == pytest.approx(4 / 9)
    assert report.pass_at_k_by_experiment(3) == {"baseline": pytest.approx(2 / 3), "v2": 1.0}
    assert report.pass_hat_k_by_experiment(3) == {"baseline": pytest.approx(1 / 3), "v2": 1.0}


def test_pass_at_k_names_the_sample_with_too_few_attempts() -> None:
    report = epochs_report()
    short = EvalReport(results=(*report.results, result("d", experiment="v2")))
    with pytest.raises(InvalidStatisticError, match=r"pass@k: sample 'd' of experiment 'v2'"):
        short.pass_at_k(2)


def test_flaky_samples_passed_in_some_epochs_only() -> None:
    flaky = epochs_report().flaky_samples()
    assert [(f.experiment_name, f.sample_id, f.attempts, f.passes) for f in flaky] == [
        ("baseline", "a", 3, 1)
    ]
    assert flaky[0].pass_rate == pytest.approx(1 / 3)
    assert epochs_report().flaky_samples(experiment="v2") == ()


# -- slicing ------------------------------------------------------------------------------


def test_group_by_and_slice_by_metadata() -> None:
    levels = [1, 1, 2, 2, 2, 3]
    report = EvalReport(
        results=tuple(
            result(f"s{i}", passed=i % 2 == 0, metadata={"difficulty": lvl})
            for i, lvl in enumerate(levels)
        )
    )
    groups = report.group_by("difficulty")
    assert list(groups) == [1, 2, 3]
    assert groups[2].total == 3
    assert groups[2].pass_rate == pytest.approx(2 / 3)
    slices = report.slice_by("difficulty")
    assert isinstance(slices[1], Summary)
    assert {k: s["n"] for k, s in slices.items()} == {1: 2, 2: 3, 3: 1}
    assert report.filter(lambda r: r.metadata["difficulty"] == 3).total == 1


# -- save / load --------------------------------------------------------------------------


def rich_report() -> EvalReport:
    full = EvalResult(
        sample_id="s1",
        experiment_name="v2",
        score=Score(
            value=0.75,
            passed=True,
            reason="close",
            metrics=(Metric("correct", 1.0, weight=1.0), Metric("turns", 3.0, metadata={"m": 1})),
        ),
        latency_ms=12,
        epoch=2,
        request_id="req-1",
        run_id="run-1",
        usage=TokenUsage(input_tokens=10, output_tokens=4, cached_tokens=2),
        metadata={"difficulty": 3, "tags": ["x"]},
        output={"answer": [1, 2]},
        bundle_path=Path("/tmp/bundle.zip"),
    )
    errored = EvalResult(
        sample_id="s2", experiment_name="v2", score=Score(value=0.0, passed=False, reason="boom"),
        latency_ms=3, error="boom", error_kind="timeout", delivery_count=2,
    )  # fmt: skip
    return EvalReport(
        results=(full, errored), expected_count=3, run_id="run-1", config={"model": "m", "n": 2}
    )


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    report = rich_report()
    path = report.save(tmp_path / "report.jsonl")
    loaded = EvalReport.load(path)
    assert loaded == report
    assert loaded.results[0].score.metrics[1].metadata == {"m": 1}
    assert loaded.results[0].usage.cached_tokens == 2
    assert loaded.results[1].error_kind == "timeout"
    header = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert header["format"] == REPORT_FORMAT
    assert header["version"] == 1
    assert header["config"] == {"model": "m", "n": 2}


def test_save_to_a_directory_and_a_suffixless_path(tmp_path: Path) -> None:
    report = rich_report()
    assert report.save(tmp_path) == tmp_path / "report.jsonl"
    assert EvalReport.load(tmp_path) == report
    target = tmp_path / "outputs" / "math_500_baseline"
    assert report.save(str(target)) == target
    assert EvalReport.load(str(target)) == report


def write_lines(path: Path, lines: list[str], *, final_newline: bool = True) -> Path:
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""), encoding="utf-8")
    return path


def header(version: int = 1, fmt: str = REPORT_FORMAT) -> str:
    return json.dumps({"format": fmt, "version": version, "run_id": None, "config": {}})


def result_line(sample_id: str) -> str:
    return serde.dumps(result(sample_id)).decode()


def test_load_refuses_an_unknown_version(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", [header(version=99), result_line("a")])
    with pytest.raises(
        InvalidReportError, match=r"r\.jsonl:1: report format version 99 is not supported"
    ):
        EvalReport.load(path)


def test_load_refuses_another_format(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", [header(fmt="something.else")])
    with pytest.raises(InvalidReportError, match="is not an eval report"):
        EvalReport.load(path)


def test_a_corrupt_line_in_the_middle_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    line = result_line("b")
    path = write_lines(
        tmp_path / "r.jsonl", [header(), result_line("a"), line[:20], result_line("c")]
    )
    with pytest.raises(InvalidReportError, match=r"r\.jsonl:3: not a valid result line"):
        EvalReport.load(path)


def test_a_result_with_a_bad_field_names_the_field(tmp_path: Path) -> None:
    bad = json.loads(result_line("a"))
    del bad["score"]["passed"]
    bad["latency_ms"] = "slow"
    path = write_lines(tmp_path / "r.jsonl", [header(), json.dumps(bad)])
    with pytest.raises(InvalidReportError, match=r"r\.jsonl:2: .*latency_ms"):
        EvalReport.load(path)


def test_a_truncated_last_line_is_skipped(tmp_path: Path) -> None:
    line = result_line("c")
    lines = [header(), result_line("a"), result_line("b"), line[: len(line) // 2]]
    path = write_lines(tmp_path / "r.jsonl", lines, final_newline=False)
    assert [r.sample_id for r in EvalReport.load(path).results] == ["a", "b"]


def test_a_corrupt_last_line_that_ends_with_a_newline_is_an_error(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", [header(), result_line("a"), "{not json"])
    with pytest.raises(InvalidReportError, match=r"r\.jsonl:3"):
        EvalReport.load(path)


def test_load_reads_a_bare_results_file(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "results.jsonl", ["", result_line("a"), result_line("b")])
    loaded = EvalReport.load(path)
    assert [r.sample_id for r in loaded.results] == ["a", "b"]
    assert loaded.run_id is None


def test_load_reads_a_run_directory(tmp_path: Path) -> None:
    run = tmp_path / "20260101-000000-abcdef"
    run.mkdir()
    manifest = {
        "format_version": 1,
        "run_id": "r-1",
        "counts": {"expected": 5},
        "status": "running",
    }
    (run / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
    rerun = json.loads(result_line("a"))
    rerun["score"] = {"value": 0.0, "passed": False, "reason": "", "metrics": []}
    cut = result_line("c")
    write_lines(
        run / "results.jsonl", [result_line("a"), result_line("b"), json.dumps(rerun), cut[:30]],
        final_newline=False,
    )  # fmt: skip
    loaded = EvalReport.load(run)
    assert [r.sample_id for r in loaded.results] == ["a", "b"]
    assert not loaded.results[0].score.passed  # the later line for "a" wins
    assert loaded.run_id == "r-1"
    assert loaded.expected_count == 5
    assert loaded.missing == 3
    assert loaded.config["status"] == "running"


def test_a_lone_truncated_line_in_a_run_directory_is_an_empty_report(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl").write_text(result_line("a")[:10], encoding="utf-8")
    assert EvalReport.load(tmp_path).total == 0


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("empty-dir", "a directory without results.jsonl or report.jsonl"),
        ("missing", "no such report file"),
        ("bad-manifest", r"run\.json:1: run manifest is not valid JSON"),
        ("list-manifest", r"run manifest must be a JSON object"),
        ("newer-manifest", r"format_version 2 is not one .* upgrade weakincentives"),
        ("odd-manifest", r"format_version '1' is not one this weakincentives reads"),
    ],
)
def test_load_errors_for_unreadable_paths(tmp_path: Path, setup: str, message: str) -> None:
    target = tmp_path / "run"
    if setup != "missing":
        target.mkdir()
    manifests = {
        "bad-manifest": "{oops",
        "list-manifest": "[]",
        "newer-manifest": '{"format_version": 2}',
        "odd-manifest": '{"format_version": "1"}',
    }
    if setup in manifests:
        (target / "results.jsonl").write_text("", encoding="utf-8")
        (target / "run.json").write_text(manifests[setup], encoding="utf-8")
    with pytest.raises(InvalidReportError, match=message):
        EvalReport.load(target)


# -- JSON form ----------------------------------------------------------------------------


def test_to_json_has_stable_keys_and_no_nan(tmp_path: Path) -> None:
    report = EvalReport(results=(result("a", tokens=(3, 2)),), run_id="r", expected_count=2)
    data = json.loads(report.to_json())
    assert list(data) == [
        "format", "version", "run_id", "total", "expected_count", "missing", "complete",
        "epochs", "overall", "experiments", "baseline", "comparisons",
    ]  # fmt: skip
    assert data["missing"] == 1
    assert data["complete"] is False
    overall = data["overall"]
    assert overall["std"] is None  # one value: the spread is unknown, not 0
    assert overall["mean_score_ci"] == [None, None]
    assert overall["tokens"] == {"input": 3, "output": 2, "total": 5}
    assert overall["pass_at_k"] is None
    assert list(data["experiments"]) == ["baseline"]
    assert data["baseline"] is None
    assert data["comparisons"] == {}


def test_to_dict_compares_against_the_baseline_experiment() -> None:
    data = two_experiments().to_dict()
    assert data["baseline"] == "baseline"
    comparison = data["comparisons"]["v2"]
    assert comparison["baseline_pass_rate"] == 0.5
    assert comparison["treatment_pass_rate"] == 0.75
    assert comparison["mcnemar"] == {
        "b": 0,
        "c": 1,
        "statistic": 0.0,
        "p_value": 1.0,
        "exact": True,
    }
    assert comparison["improvements"] == [{"sample_id": "s2", "epoch": 0}]
    assert comparison["p_value_holm"] == 1.0
    assert math.isclose(comparison["delta"], 0.25)


def test_to_dict_reports_pass_at_k_when_samples_repeat() -> None:
    data = epochs_report().to_dict()
    block = data["experiments"]["baseline"]["pass_at_k"]
    assert block == {"k": 3, "pass_at_k": pytest.approx(2 / 3), "pass_hat_k": pytest.approx(1 / 3)}
    assert data["experiments"]["baseline"]["flaky"] == 1
    assert data["experiments"]["baseline"]["n_clusters"] == 3
