"""The viewer's A/B comparison (computed from index columns) against `compare_results`.

The oracle is `compare_results` on the full `EvalResult`s, rendered the way the viewer
rendered it before it read columns: every field must be equal, floats bit for bit.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest

from weakincentives import serde
from weakincentives.clock import FakeClock
from weakincentives.debug import ResultFilter, ViewerData
from weakincentives.debug import _viewer_views as viewer_views
from weakincentives.debug._viewer_data import SideSpec
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    ExperimentComparison,
    Fingerprint,
    FlippedSample,
    Metric,
    RunStore,
    Score,
    compare_results,
    cost_delta,
)
from weakincentives.evals.report import CostDelta

SAMPLES = 30


def _result(experiment: str, i: int, epoch: int) -> EvalResult:
    shift = 1 if experiment == "treatment" else 0
    value = ((i * 7 + epoch * 3 + shift * 5) % 11) / 10
    error = "timed out" if (i + epoch + shift) % 9 == 0 else None
    return EvalResult(
        sample_id=f"s{i:02d}",
        experiment_name=experiment,
        epoch=epoch,
        score=Score(
            value=value,
            passed=value >= 0.5,
            reason=f"value {value}",
            metrics=(Metric("correct", value, weight=1.0), Metric("turns", float(i % 4))),
        ),
        latency_ms=10 + i,
        error=error,
        error_kind="timeout" if error else None,
        # Every seventh result unpriced; the treatment costs more; some judged.
        cost=None if i % 7 == 3 else 0.001 * (i + 1) * (1 + shift),
        judge_cost=0.0005 if i % 2 else None,
    )


def _write_run(root: Path, run_id: str, epochs: int) -> list[EvalResult]:
    """Errors, metrics, `epochs` epochs, unpaired samples and one retried key."""
    store = RunStore(root, clock=FakeClock(), sync_interval=None)
    final = []
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id=run_id) as run:
        for experiment, samples in (("baseline", SAMPLES), ("treatment", SAMPLES + 3)):
            for i, epoch in itertools.product(
                range(2 if experiment == "treatment" else 0, samples), range(epochs)
            ):
                result = _result(experiment, i, epoch)
                if (experiment, i, epoch) == ("baseline", 4, 0):
                    # A retried key: the viewer must use the last line.
                    run.append(dataclasses.replace(result, error="flaky", error_kind="agent"))
                run.append(result)
                final.append(result)
    return final


def _flip_side(result: EvalResult, ids: dict[tuple[str, int], int]) -> dict[str, Any]:
    return {
        "id": ids.get((result.sample_id, result.epoch)),
        "status": "error" if result.is_error else ("passed" if result.passed else "failed"),
        "score": result.score.value,
        "reason": result.score.reason,
        "error_kind": result.error_kind,
        "error": result.error,
    }


def _expected(
    c: ExperimentComparison,
    sides: tuple[dict[str, Any], ...],
    ids: tuple[dict[Any, int], ...],
    cost: CostDelta | None = None,
) -> dict[str, Any]:
    """How the viewer rendered `compare_results` before it read the index's columns."""
    test, scores = c.mcnemar, c.score_paired

    def side(info: dict[str, Any], rate: Any) -> dict[str, Any]:
        return {**info, "n": rate.n, "passed": rate.successes, "pass_rate": rate.rate,
                "pass_rate_ci": [rate.low, rate.high], "pass_rate_method": rate.method,
                "n_clusters": rate.n_clusters}  # fmt: skip

    def flips(items: tuple[FlippedSample, ...]) -> list[dict[str, Any]]:
        return [
            {"sample_id": f.sample_id, "epoch": f.epoch, "baseline": _flip_side(f.baseline, ids[0]),
             "treatment": _flip_side(f.treatment, ids[1])}
            for f in items[: viewer_views.MAX_FLIPS]
        ]  # fmt: skip

    data = {
        "baseline": side(sides[0], c.baseline), "treatment": side(sides[1], c.treatment),
        "n_pairs": c.n_pairs, "pass_rate_delta": c.pass_rate_delta, "delta": c.delta,
        "delta_ci": [c.delta_ci.low, c.delta_ci.high],
        "bootstrap_ci": [c.bootstrap_ci.low, c.bootstrap_ci.high],
        "p_value": c.p_value, "test_name": c.test_name, "n_clusters": c.n_clusters,
        "interval_method": c.paired.interval_method if c.paired else None,
        "mcnemar": None if test is None else {
            "b": test.b, "c": test.c, "statistic": test.statistic, "p_value": test.p_value,
            "exact": test.exact,
        },
        "minimum_detectable_effect": c.minimum_detectable_effect,
        "unknown": {
            name: c.why(name)
            for name in ("interval", "p_value", "bootstrap", "minimum_detectable_effect")
            if c.why(name)
        },
        "score_delta": scores.delta if scores else None,
        "score_delta_ci": [scores.low, scores.high] if scores else [None, None],
        "score_p_value": scores.p_value if scores else None,
        "score_test_name": scores.test_name if scores else None,
        "regressions": flips(c.regressions), "improvements": flips(c.improvements),
        "regressions_count": len(c.regressions), "improvements_count": len(c.improvements),
        "unpaired_baseline": len(c.unpaired_baseline),
        "unpaired_treatment": len(c.unpaired_treatment), "duplicates": c.duplicates,
        "cost_delta": None if cost is None else cost.to_dict(),
    }  # fmt: skip
    return {k: serde.json_safe(v) for k, v in data.items()}


@pytest.mark.parametrize(("epochs", "max_flips"), [(1, 1000), (3, 1000), (3, 4)])
def test_compare_equals_compare_results_on_full_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, epochs: int, max_flips: int
) -> None:
    monkeypatch.setattr(viewer_views, "MAX_FLIPS", max_flips)
    results = _write_run(tmp_path, "run", epochs)
    data = ViewerData.open(tmp_path / "run")
    got = data.compare(SideSpec("run", "baseline"), SideSpec("run", "treatment"))

    of = {e: [r for r in results if r.experiment_name == e] for e in ("baseline", "treatment")}
    comparison = compare_results(
        of["baseline"], of["treatment"], baseline_name="baseline", treatment_name="treatment"
    )
    ids = tuple(
        {
            (row.sample_id, row.epoch): row.id
            for row in data.index.page("run", ResultFilter(experiments=(e,)), limit=500).rows
        }
        for e in ("baseline", "treatment")
    )
    sides = tuple({"run_id": "run", "experiment": e} for e in ("baseline", "treatment"))
    cost = cost_delta(of["baseline"], of["treatment"])
    assert cost is not None and cost.n_pairs > 0
    assert got == _expected(comparison, sides, ids, cost)
    # The run exercises what it should: errors, flips both ways, unpaired, epochs.
    assert len(got["regressions"]) == min(got["regressions_count"], max_flips) > 0
    assert got["improvements_count"] > 0
    assert got["unpaired_treatment"] == 3 * epochs
    assert got["unpaired_baseline"] == 2 * epochs
    flipped = [f[side]["status"] for f in got["regressions"] for side in ("baseline", "treatment")]
    assert "error" in flipped or max_flips < 1000
    assert (got["n_clusters"] is None) == (epochs == 1)


def test_compare_page_rates_cluster_by_sample_like_the_cli(tmp_path: Path) -> None:
    # Issue 16: with epochs the compare page showed a Wilson interval over all results
    # ([74.1, 77.4]) where the CLI and the run page cluster by sample ([73.7, 77.9]).
    results = _write_run(tmp_path, "run", 3)
    data = ViewerData.open(tmp_path / "run")
    got = data.compare(SideSpec("run", "baseline"), SideSpec("run", "treatment"))
    report = EvalReport(results=tuple(results))
    for side in ("baseline", "treatment"):
        summary = report.experiment(side).summarize()
        assert got[side]["pass_rate_ci"] == pytest.approx(
            [summary.pass_rate_low, summary.pass_rate_high], abs=1e-12
        )
        assert got[side]["n_clusters"] == summary.n_clusters is not None
    run_page = {e["name"]: e for e in data.run("run")["experiments"]}
    assert got["baseline"]["pass_rate_ci"] == run_page["baseline"]["pass_rate_ci"]
