from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from weakincentives.errors import ConfigurationError, InvalidStatisticError
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Metric,
    Score,
    Summary,
    flaky_samples,
    group_by,
    stats,
    summarize,
)


def result(
    sample_id: str,
    value: float,
    *,
    passed: bool | None = None,
    error: bool = False,
    metadata: Mapping[str, Any] | None = None,
    metrics: tuple[Metric, ...] = (),
    epoch: int = 0,
) -> EvalResult:
    return EvalResult(
        sample_id=sample_id,
        experiment_name="x",
        score=Score(
            value=value, passed=value >= 0.5 if passed is None else passed, metrics=metrics
        ),
        latency_ms=1,
        error="boom" if error else None,
        metadata=metadata or {},
        epoch=epoch,
    )


def test_group_by_metadata_key_keeps_order_and_a_none_group() -> None:
    rs = [
        result("a", 1.0, metadata={"level": 2}),
        result("b", 0.0, metadata={"level": 1}),
        result("c", 1.0),
        result("d", 0.0, metadata={"level": 2}),
    ]
    groups = group_by(rs, "level")
    assert list(groups) == [2, 1, None]
    assert [r.sample_id for r in groups[2]] == ["a", "d"]
    assert [r.sample_id for r in groups[None]] == ["c"]


def test_group_by_callable() -> None:
    rs = [result(str(i), i / 10) for i in range(10)]
    groups = group_by(rs, lambda r: r.score.passed)
    assert {k: len(v) for k, v in groups.items()} == {False: 5, True: 5}


def test_group_by_rejects_unhashable_values_with_a_hint() -> None:
    rs = [result("a", 1.0, metadata={"tags": ["x", "y"]})]
    with pytest.raises(
        ConfigurationError, match=r"cannot group by 'tags': result 'a' gives an unhashable list"
    ):
        group_by(rs, "tags")


def test_summarize_matches_the_stats_functions() -> None:
    values = [1.0, 0.75, 0.5, 0.25, 0.0, 1.0, 0.9]
    rs = [result(f"s{i}", v) for i, v in enumerate(values)]
    rs.append(result("err", 0.8, passed=True, error=True))  # counts 0 and not passed
    s = summarize(rs)
    scores = [*values, 0.0]
    passed = sum(1 for v in values if v >= 0.5)
    assert (s.n, s.passed, s.errors) == (8, passed, 1)
    assert s.pass_rate == passed / 8
    assert s.pass_rate_ci == stats.wilson_interval(passed, 8).interval
    mean = stats.mean_ci(scores)
    assert s.mean == pytest.approx(mean.mean)
    assert s.mean_ci == mean.interval
    assert s.se == mean.se
    assert s.std == pytest.approx(float(np.std(scores, ddof=1)))
    assert (s.min, s.max) == (0.0, 1.0)
    assert s.n_clusters is None
    assert s.confidence == 0.95


def test_summarize_reads_like_a_mapping_and_converts_to_a_dict() -> None:
    s = summarize([result("a", 1.0), result("b", 0.0)])
    assert s["n"] == 2
    assert s["mean"] == 0.5
    assert "pass_rate_low" in s
    assert "median" not in s
    assert dict(s)["pass_rate"] == 0.5
    assert s.to_dict()["n"] == 2
    with pytest.raises(KeyError, match="'median' is not a summary field"):
        s["median"]


def test_summarize_empty_and_single() -> None:
    empty = summarize([])
    assert (empty.n, empty.mean, empty.pass_rate) == (0, 0.0, 0.0)
    assert empty.pass_rate_ci == stats.Interval(0.0, 1.0)
    assert math.isnan(empty.std) and math.isnan(empty.min)
    single = summarize([result("a", 0.7)])
    assert single.mean == 0.7
    assert math.isnan(single.std)
    assert math.isnan(single.mean_low)


def test_summarize_averages_named_metrics_over_results_that_report_them() -> None:
    rs = [
        result("a", 1.0, metrics=(Metric("correct", 1.0, weight=1.0), Metric("turns", 4.0))),
        result("b", 0.0, metrics=(Metric("correct", 0.0, weight=1.0), Metric("turns", 2.0))),
        result("c", 0.0, metrics=(Metric("correct", 0.0, weight=1.0),)),
    ]
    assert summarize(rs).metrics == {"correct": pytest.approx(1 / 3), "turns": 3.0}


def test_summarize_with_a_cluster_key_or_function() -> None:
    topics = ["a", "a", "b", "b", "b", "c"]
    values = [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    rs = [
        result(f"s{i}", v, metadata={"topic": t})
        for i, (v, t) in enumerate(zip(values, topics, strict=True))
    ]
    expected = stats.clustered_mean(values, topics, bounds=(0.0, 1.0))
    by_key = summarize(rs, cluster="topic")
    by_function = summarize(rs, cluster=lambda r: r.metadata["topic"])
    assert by_key == by_function
    assert by_key.n_clusters == 3
    assert by_key.se == pytest.approx(expected.se)
    assert by_key.mean_low == pytest.approx(expected.low)
    assert by_key.pass_rate_low == pytest.approx(max(expected.low, 0.0))


def test_cluster_key_missing_from_a_result_is_an_error() -> None:
    rs = [result("a", 1.0, metadata={"topic": "t"}), result("b", 0.0)]
    with pytest.raises(
        ConfigurationError, match=r"cannot cluster by metadata key 'topic': result 'b'"
    ):
        summarize(rs, cluster="topic")


def test_flaky_samples_and_pass_at_k_need_results() -> None:
    rs = [
        result("a", 1.0, epoch=0),
        result("a", 0.0, epoch=1),
        result("b", 1.0),
        result("b", 1.0, epoch=1),
    ]
    assert [(f.sample_id, f.attempts, f.passes) for f in flaky_samples(rs)] == [("a", 2, 1)]
    with pytest.raises(InvalidStatisticError, match="pass@k needs at least one result"):
        EvalReport().pass_at_k(1)


def test_summary_is_a_frozen_value() -> None:
    s = summarize([result("a", 1.0)])
    assert isinstance(s, Summary)
    with pytest.raises(AttributeError):
        s.n = 3  # type: ignore[misc]  # frozen: the assignment must fail
