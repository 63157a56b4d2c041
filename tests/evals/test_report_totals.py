"""A report's tables from counts kept in one streamed pass (`ResultTotals`, issue 20).

The report of stored results streams them once and keeps counts; the report of the same
results in memory counts them the same way. Both must show the same numbers, to the bit,
in every view; and the streamed one must not keep anything per result.
"""

from __future__ import annotations

import json
import math
import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Fingerprint,
    Metric,
    RunStore,
    Score,
    StoredResults,
    stats,
)
from weakincentives.runtime.session import TokenUsage


def results(n: int, *, seed: int = 0, experiments: tuple[str, ...] = ("base",)) -> list[EvalResult]:
    """Results with errors of two kinds, uneven scores, latencies, tokens, costs, checks."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        for name in experiments:
            error = rng.random() < 0.1
            value = rng.choice([0.0, 0.25, 0.5, 1.0, 0.1])
            out.append(
                EvalResult(
                    sample_id=f"s{i}",
                    experiment_name=name,
                    latency_ms=rng.randint(0, 40),
                    error="boom" if error else None,
                    error_kind=rng.choice(["agent", "timeout", None]) if error else None,
                    score=Score(
                        value=value,
                        passed=value >= 0.5,
                        metrics=(
                            Metric(name="exact", value=float(value == 1.0)),
                            Metric(name="rating", value=rng.choice([0.3, 0.7, 2.0])),
                        ),
                    ),
                    usage=TokenUsage(input_tokens=i % 7, output_tokens=i % 3),
                    cost=None if i % 5 == 0 else rng.choice([0.001, 0.0025, 0.1]),
                    judge_cost=rng.choice([None, 0.0005]),
                )
            )
    return out


def stored(tmp_path: Path, items: list[EvalResult], *, streamed: bool = True) -> StoredResults:
    store = RunStore(tmp_path / "runs", sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="r") as run:
        run.extend(items)
        path = run.results_path
    size = path.stat().st_size
    return StoredResults(
        path, start=0, end=size, count=len(items), report_fields=True, unique_keys=True,
        streamed=streamed,
    )  # fmt: skip


def views(report: EvalReport) -> str:
    summary = report.summarize().to_dict()
    return json.dumps(
        {
            "dict": report.to_dict(),
            "summary": {k: v for k, v in summary.items() if k != "metrics"},
            "metrics": summary["metrics"],
            "counts": [report.passed_count, report.error_count, report.distinct_count],
            "means": [report.mean_score, report.mean_score_excluding_errors],
            "latency": [report.mean_latency_ms, report.latency_p50_ms, report.latency_p95_ms],
            "rates": report.pass_rate_by_experiment(),
        },
        sort_keys=True,
        default=str,
    )


def test_a_streamed_report_shows_the_numbers_of_the_same_results_in_memory(
    tmp_path: Path,
) -> None:
    items = results(600)
    streamed = EvalReport(results=stored(tmp_path, items), run_id="r")
    in_memory = EvalReport(results=tuple(items), run_id="r")
    assert views(streamed) == views(in_memory)
    assert streamed.errors_by_kind() == in_memory.errors_by_kind() != {}
    assert streamed.check_rates().keys() == {"exact", "rating"}


def test_the_numbers_do_not_depend_on_the_order_of_the_results() -> None:
    items = results(400, seed=3)
    shuffled = items[:]
    random.Random(9).shuffle(shuffled)
    first, second = EvalReport(results=items), EvalReport(results=shuffled)
    assert views(first) == views(second)


def test_two_experiments_read_their_results_for_the_comparison(tmp_path: Path) -> None:
    items = results(200, experiments=("base", "v2"))
    for streamed in (True, False):  # as the runner marks it (False), or streamed anyway
        report = EvalReport(results=stored(tmp_path / str(streamed), items, streamed=streamed))
        assert views(report) == views(EvalReport(results=tuple(items)))
        assert list(report.to_dict()["comparisons"]) == ["v2"]


def test_the_counts_give_numpy_percentiles_and_the_mean_ci_of_the_values() -> None:
    rng = random.Random(5)
    for _ in range(300):
        values = [
            rng.choice([0.0, 1.0, 2.5, rng.uniform(-5, 5)]) for _ in range(rng.randint(2, 30))
        ]
        counts = stats.count_values(values)
        for q in (0, 10, 50, 95, 100, rng.uniform(0, 100)):
            assert stats.percentile_counts(counts, q) == float(np.percentile(values, q))
        listed, counted = stats.mean_ci(values), stats.mean_ci_counts(counts)
        assert (listed.mean, listed.std, listed.low, listed.high) == (
            counted.mean, counted.std, counted.low, counted.high,
        )  # fmt: skip
        assert counted.mean == math.fsum(values) / len(values)
        assert counted.std == pytest.approx(float(np.std(values, ddof=1)), rel=1e-12, abs=1e-15)


def test_a_streamed_report_keeps_nothing_per_result(tmp_path: Path) -> None:
    def peak(n: int) -> int:
        report = EvalReport(results=stored(tmp_path / str(n), results(n, seed=1)))
        report.to_dict()  # warm: imports, decoders
        report = EvalReport(results=stored(tmp_path / f"{n}b", results(n, seed=1)))
        tracemalloc.start()
        try:
            report.to_dict()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(1_000), peak(10_000)
    # Holding the slim results would take about 400 bytes each (3.6 MB more here).
    assert (large - small) / 9_000 < 20


def test_the_runners_report_of_several_experiments_keeps_a_compact_form(tmp_path: Path) -> None:
    from weakincentives.evals import run_eval
    from weakincentives.evals._records import Sample
    from weakincentives.experiment import Experiment

    def answer(question: str) -> str:
        return question if int(question[1:]) % 3 else "wrong"

    samples = [Sample(id=f"s{i}", input=f"q{i}", expected=f"q{i}") for i in range(60)]
    report = run_eval(
        samples, answer, lambda output, expected: Score(float(output == expected)),
        experiments=[Experiment("baseline"), Experiment("v2")], epochs=2, store=tmp_path,
    )  # fmt: skip
    assert isinstance(report.results, StoredResults) and report.results.compact
    in_memory = EvalReport(results=tuple(report.results), run_id=report.run_id, expected_count=240)
    assert views(report) == views(in_memory)
    assert report.to_json() == in_memory.to_json()
