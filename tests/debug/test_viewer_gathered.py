"""What the viewer gathers while it reads a run equals what SQL reads from the index.

`wink debug` counts the run page's statistics columns, the status tally and the failed
results while it reads a run's lines (`_viewer_columns.py`), instead of asking SQL for
them afterwards. SQL over the same index is the oracle: the gathered values, and the
whole run page made from them, must equal what the SQL path gives, value for value.
When the index's rows are not the ones read (a line judged by SQL, a key written twice)
or the index comes from its cache, nothing is gathered and SQL answers.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.debug.test_viewer_index import result, write
from weakincentives.clock import FakeClock
from weakincentives.debug import ViewerData
from weakincentives.debug._viewer_schema import FAILED_SQL, TALLY
from weakincentives.debug._viewer_stats import experiment_columns
from weakincentives.evals import EvalResult, Fingerprint, Metric, RunStore, Score, summarize
from weakincentives.runtime.session import TokenUsage


def varied_results(seed: int, *, epochs: int) -> list[EvalResult]:
    """Three experiments: errors with and without kinds, checks, costs, odd values."""
    rng = random.Random(seed)
    results = []
    for i in range(40):
        for experiment in ("base", "treat", "third"):
            for epoch in range(epochs):
                error = rng.choice([None] * 8 + ["boom", "timed out"])
                value = rng.choice([0.0, 1.0, 0.25, rng.random()])
                checks = rng.sample(
                    ["exact", "format", "tools.called", "length"], rng.randint(0, 3)
                )
                metrics = tuple(
                    Metric(name, rng.choice([0.0, 1.0, 0.4, 0.5, -1.0, 2.0, 1])) for name in checks
                )
                results.append(
                    EvalResult(
                        sample_id=f"s{i}", experiment_name=experiment, epoch=epoch,
                        score=Score(value=value, passed=value >= 0.5,
                                    reason=rng.choice([f"reason {i % 3}", ""]), metrics=metrics),
                        latency_ms=rng.randint(1, 900),
                        error=error,
                        error_kind=rng.choice(["agent", "timeout", None]) if error else None,
                        usage=TokenUsage(input_tokens=rng.randint(0, 900),
                                         output_tokens=rng.randint(0, 90)),
                        cost=rng.choice([None, 0, rng.random() / 100]),
                        judge_cost=rng.choice([None, 0.0005]),
                        metadata={"level": rng.choice(["easy", "hard"]), "n": i % 4},
                    )
                )  # fmt: skip
    return results


def write_run(root: Path, results: list[EvalResult], run_id: str = "gen") -> Path:
    store = RunStore(root, clock=FakeClock(), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id=run_id) as run:
        run.extend(results)
    return root / run_id


def pages(data: ViewerData, run_id: str) -> dict[str, Any]:
    """The run's page, charts (default slice, and each key) and runs list, as JSON text."""
    out = {
        "run": data.run(run_id),
        "charts": data.charts(run_id),
        "runs": data.runs(),
        **{f"charts {key}": data.charts(run_id, key) for key in ("level", "n", "")},
    }
    text: dict[str, Any] = json.loads(json.dumps(out))
    return text


def sql_only(data: ViewerData) -> None:
    """Forget what was gathered: every statistic is read from the index by SQL."""
    data.index._gathered.clear()  # the oracle: the SQL path


@pytest.mark.parametrize("epochs", [1, 3])
def test_gathered_values_equal_what_sql_reads(tmp_path: Path, epochs: int) -> None:
    run = write_run(tmp_path, varied_results(epochs, epochs=epochs))
    data = ViewerData.open(run, cache=False)
    gathered = data.index.gathered("gen")
    assert gathered is not None
    assert list(gathered.columns) == ["base", "treat", "third"]
    for name, columns in gathered.columns.items():
        oracle = experiment_columns(data.index, "gen", name)
        for field in dataclasses.fields(columns):
            mine, sql = getattr(columns, field.name), getattr(oracle, field.name)
            if isinstance(mine, list):
                mine, sql = list(mine), list(sql)
                assert [type(v) for v in mine] == [type(v) for v in sql], field.name
            assert mine == sql, field.name
    assert sorted(gathered.tally, key=repr) == sorted(data.index.query(TALLY, ("gen",)), key=repr)
    assert gathered.failed == data.index.query(FAILED_SQL, ("gen",))
    assert any(row[-1] and ", " in row[-1] for row in gathered.failed)  # several failed checks


@pytest.mark.parametrize("epochs", [1, 3])
def test_the_run_page_from_gathered_values_equals_the_sql_pages(
    tmp_path: Path, epochs: int
) -> None:
    run = write_run(tmp_path, varied_results(10 + epochs, epochs=epochs))
    gathered = ViewerData.open(run, cache=False)
    warm = gathered.warm()
    assert warm is not None
    warm.join(timeout=60)
    oracle = ViewerData.open(run, cache=False)
    sql_only(oracle)
    assert pages(gathered, "gen") == pages(oracle, "gen")


def test_a_cached_index_gathers_nothing_and_shows_the_same_page(tmp_path: Path) -> None:
    run = write_run(tmp_path, varied_results(3, epochs=1))
    first = ViewerData.open(run)
    expected = pages(first, "gen")
    first.index.wait_for_search()  # the cache is written once the index is complete
    cached = ViewerData.open(run)
    assert cached.index.gathered("gen") is None
    assert pages(cached, "gen") == expected


@pytest.mark.parametrize(
    "tail",
    [
        # A line SQL keeps that msgspec leaves to it (an integer `passed`).
        b'{"sample_id": "odd", "experiment_name": "base", "score": {"value": 1, "passed": 1}, '
        b'"latency_ms": 3}\n',
        # A later line for a key already read: the earlier one leaves the index.
        json.dumps(
            {"sample_id": "s1", "experiment_name": "base", "score": {"value": 0.0},
             "latency_ms": 9, "error": "late"}
        ).encode() + b"\n",
    ],
    ids=["judged-by-sql", "superseded"],
)  # fmt: skip
def test_nothing_is_gathered_when_the_index_holds_other_rows(tmp_path: Path, tail: bytes) -> None:
    run = write(tmp_path, "r", [result("s1"), result("s2", passed=False)], tail)
    data = ViewerData.open(run, cache=False)
    assert data.index.gathered("r") is None
    (block,) = data.run("r")["experiments"]
    kept = summarize(
        [result("s2", passed=False)]
        + [
            result("s1", passed=False, error="late", latency_ms=9.0)
            if b'"late"' in tail
            else result("s1")
        ]
        + ([result("odd", latency_ms=3.0)] if b'"odd"' in tail else [])
    )
    assert (block["n"], block["passed"], block["errors"]) == (kept.n, kept.passed, kept.errors)
    assert block["mean_score_ci"] == [kept.mean_low, kept.mean_high]
