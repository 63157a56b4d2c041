"""A report's statistics as JSON-compatible data (`EvalReport.to_dict` / `to_json`).

The shape is stable (version 1); NaN (an unknown spread or interval) becomes `null`::

    {
      "format": "weakincentives.eval_report_summary", "version": 1,
      "run_id": str | null, "total": int, "expected_count": int | null,
      "missing": int, "complete": bool, "epochs": int,
      "overall": <block>,                       # all results together
      "experiments": {name: <block>},           # in order of first appearance
      "baseline": str | null,                   # what the comparisons are against
      "comparisons": {treatment: <comparison>}
    }

    <block> = {"n", "passed", "errors", "pass_rate", "pass_rate_ci": [low, high],
               "pass_rate_excluding_errors", "error_rate", "mean_score",
               "mean_score_ci": [low, high], "mean_score_excluding_errors", "std",
               "n_clusters", "errors_by_kind": {kind: n},
               "latency_ms": {"mean", "p50", "p95"}, "tokens": {"input", "output", "total"},
               "cost": {"n", "priced", "unpriced", "total_usd", "agent_usd", "judge_usd",
                        "per_sample_usd", "per_sample_ci_usd": [low, high]},
               "metrics": {name: mean}, "checks": {name: <check>}, "flaky": int,
               "pass_at_k": null | {"k", "pass_at_k", "pass_hat_k"}}

    <comparison> = {"baseline", "treatment", "baseline_pass_rate", "treatment_pass_rate",
                    "pass_rate_delta", "relative_improvement", "n_pairs", "delta",
                    "delta_ci", "bootstrap_ci", "p_value", "p_value_holm", "p_value_bh",
                    "test_name", "n_clusters": null | int,
                    "mcnemar": null | {"b", "c", "statistic", "p_value", "exact"},
                    "minimum_detectable_effect", "score_delta", "score_delta_ci",
                    "score_p_value", "regressions": [{"sample_id", "epoch"}],
                    "improvements": [...], "unpaired_baseline": int,
                    "unpaired_treatment": int, "duplicates": int,
                    "cost_delta": null | {"n_pairs", "delta_usd", "delta_ci_usd", "relative"}}

Costs are in dollars; `total_usd` and `agent_usd` are null when no result is priced (an
unpriced result is counted in `unpriced`, never as free).

    <check> = {"n", "passed": int | null, "pass_rate": float | null,
               "pass_rate_ci": [low, high] | null, "mean", "mean_ci": [low, high]}

`checks` are the per-check rates of every named metric (`check_rates`): pass/fail
checks (such as each child of `all_of`) have a pass rate with its Wilson interval.
`pass_at_k` is filled when samples were attempted more than once: `k` is the smallest
number of attempts any sample had. Intervals follow `EvalReport.summarize` (clustered
by sample when epochs repeat), and so are the paired statistics of a comparison: then
`mcnemar` is null and `test_name` says "cluster-robust z-test".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from weakincentives import serde
from weakincentives.experiment import BASELINE, CONTROL

from .. import stats
from ._collector import collector_paused
from ._columns import flip_keys
from ._comparison import ExperimentComparison
from ._family import compare_all
from ._view import ReportView

__all__ = [
    "SUMMARY_FORMAT",
    "comparison_block",
    "default_baseline",
    "experiment_block",
    "pass_at_k_block",
    "report_to_dict",
]

SUMMARY_FORMAT = "weakincentives.eval_report_summary"
"""The `format` field of `report_to_dict`'s output."""


@collector_paused()
def report_to_dict(report: ReportView, *, baseline: str | None = None) -> dict[str, Any]:
    """Return the statistics of `report` as JSON-compatible data (shape in module docs).

    Comparisons are made against `baseline`, or against `default_baseline` of the
    report's experiments when it is None.

    Raises:
        ConfigurationError: `baseline` names no experiment of the report.
    """
    chosen = baseline if baseline is not None else default_baseline(report.experiment_names)
    comparisons = compare_all(report, chosen) if chosen is not None else {}
    data = {
        "format": SUMMARY_FORMAT,
        "version": 1,
        "run_id": report.run_id,
        "total": report.total,
        "expected_count": report.expected_count,
        "missing": report.missing,
        "complete": report.complete,
        "epochs": report.epochs,
        "overall": experiment_block(report),
        "experiments": {
            name: experiment_block(report.experiment(name)) for name in report.experiment_names
        },
        "baseline": chosen,
        "comparisons": {
            name: {**comparison_block(c), "cost_delta": _cost_delta_block(report, c)}
            for name, c in comparisons.items()
        },
    }
    safe: dict[str, Any] = serde.json_safe(data)
    return safe


def default_baseline(names: Sequence[str]) -> str | None:
    """The experiment to compare against: `baseline`, else `control`, else the first seen.

    None when there are fewer than two experiments.
    """
    if len(names) < 2:
        return None
    for preferred in (BASELINE.name, CONTROL.name):
        if preferred in names:
            return preferred
    return names[0]


def experiment_block(report: ReportView) -> dict[str, Any]:
    """The statistics of one report (all of it, or one experiment's sub-report)."""
    summary = report.summarize()
    return {
        "n": summary.n,
        "passed": summary.passed,
        "errors": summary.errors,
        "pass_rate": summary.pass_rate,
        "pass_rate_ci": _pair(summary.pass_rate_ci),
        "pass_rate_excluding_errors": report.pass_rate_excluding_errors,
        "error_rate": report.error_rate,
        "mean_score": summary.mean,
        "mean_score_ci": _pair(summary.mean_ci),
        "mean_score_excluding_errors": report.mean_score_excluding_errors,
        "std": summary.std,
        "n_clusters": summary.n_clusters,
        "interval_note": summary.reason or None,
        "errors_by_kind": report.errors_by_kind(),
        "latency_ms": {
            "mean": report.mean_latency_ms,
            "p50": report.latency_p50_ms,
            "p95": report.latency_p95_ms,
        },
        "tokens": {
            "input": report.total_input_tokens,
            "output": report.total_output_tokens,
            "total": report.total_tokens,
        },
        "cost": report.cost_summary().to_dict(),
        "metrics": dict(summary.metrics),
        "checks": {name: rate.to_dict() for name, rate in report.check_rates().items()},
        "flaky": len(report.flaky_samples()),
        "pass_at_k": pass_at_k_block(report),
    }


def pass_at_k_block(report: ReportView) -> dict[str, Any] | None:
    """pass@k and pass^k at the smallest attempt count, when samples repeat; else None."""
    if not report.has_repeats:
        return None
    k = report.fewest_attempts()
    if k < 2:
        return None
    return {"k": k, "pass_at_k": report.pass_at_k(k), "pass_hat_k": report.pass_hat_k(k)}


def comparison_block(comparison: ExperimentComparison) -> dict[str, Any]:
    """The statistics of one comparison."""
    test = comparison.mcnemar
    scores = comparison.score_paired
    return {
        "baseline": comparison.baseline_name,
        "treatment": comparison.treatment_name,
        "baseline_pass_rate": comparison.baseline_pass_rate,
        "treatment_pass_rate": comparison.treatment_pass_rate,
        "pass_rate_delta": comparison.pass_rate_delta,
        "relative_improvement": comparison.relative_improvement,
        "n_pairs": comparison.n_pairs,
        "delta": comparison.delta,
        "delta_ci": _pair(comparison.delta_ci),
        "bootstrap_ci": _pair(comparison.bootstrap_ci),
        "p_value": comparison.p_value,
        "p_value_holm": comparison.p_value_holm,
        "p_value_bh": comparison.p_value_bh,
        "test_name": comparison.test_name,
        "n_clusters": comparison.n_clusters,
        "interval_method": comparison.paired.interval_method if comparison.paired else None,
        "mcnemar": None if test is None else dataclasses.asdict(test),
        "minimum_detectable_effect": comparison.minimum_detectable_effect,
        "unknown": _reasons(comparison),
        "score_delta": scores.delta if scores else math.nan,
        "score_delta_ci": _pair(scores.interval) if scores else [math.nan, math.nan],
        "score_p_value": scores.p_value if scores else math.nan,
        "score_test_name": scores.test_name if scores else None,
        "regressions": [
            {"sample_id": sample_id, "epoch": epoch}
            for sample_id, epoch in flip_keys(comparison.regressions)
        ],
        "improvements": [
            {"sample_id": sample_id, "epoch": epoch}
            for sample_id, epoch in flip_keys(comparison.improvements)
        ],
        "unpaired_baseline": len(comparison.unpaired_baseline),
        "unpaired_treatment": len(comparison.unpaired_treatment),
        "duplicates": comparison.duplicates,
    }


def _reasons(comparison: ExperimentComparison) -> dict[str, str]:
    """Why each unknown (null) pass/fail number is unknown, by key."""
    keys = {"interval": "delta_ci", "p_value": "p_value", "bootstrap": "bootstrap_ci",
            "minimum_detectable_effect": "minimum_detectable_effect"}  # fmt: skip
    return {key: why for name, key in keys.items() if (why := comparison.why(name))}


def _cost_delta_block(
    report: ReportView, comparison: ExperimentComparison
) -> dict[str, Any] | None:
    delta = report.cost_delta(comparison.baseline_name, comparison.treatment_name)
    return None if delta is None else delta.to_dict()


def _pair(interval: stats.Interval) -> list[float]:
    return [interval.low, interval.high]
