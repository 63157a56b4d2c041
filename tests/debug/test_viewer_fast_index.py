"""The viewer's fast open: msgspec rows equal SQL's, statistics equal the report's, the cache.

The index reads most lines with msgspec (`_viewer_lines.py`) and leaves odd ones to the
SQL path; the SQL path alone (every line refused by msgspec) is the oracle for what the
tables must hold. The run page's statistics come from per-experiment columns; the report
(`summarize`, `cost_summary`) is the oracle for their numbers, compared exactly.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from tests.debug.test_viewer_index import METADATA, result, write
from weakincentives import serde
from weakincentives.clock import FakeClock
from weakincentives.debug import ResultFilter, ResultIndex, ViewerData
from weakincentives.debug import _viewer_lines as viewer_lines
from weakincentives.debug._viewer_cache import CACHE_FILE
from weakincentives.evals import (
    EvalResult,
    Fingerprint,
    Metric,
    RunStore,
    Score,
    cost_summary,
    summarize,
)
from weakincentives.runtime.session import ChatMessage, TokenUsage


def line(**changes: Any) -> bytes:
    """A stored result line with top-level fields replaced (None deletes a field)."""
    data = json.loads(serde.dumps(result(str(changes.pop("sample_id", "s")))))
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return json.dumps(data).encode() + b"\n"


def score(**fields: Any) -> dict[str, Any]:
    return {"value": 1.0, "passed": True, "reason": "r", "metrics": [], **fields}


ODD_LINES = [
    line(sample_id="plain", metadata=METADATA),
    line(sample_id="numbers", metadata={"a": 1.50, "b": 100000.0, "c": -0.0, "d": 10**20}),
    b'{"sample_id": "raw", "experiment_name": "base", "score": {"value": 1}, '
    b'"latency_ms": 3, "metadata": {"r": 1.50, "e": 1E+05, "z": -0, "big": 12345678901234567890,'
    b' "deep": {"b": [1.0, "x"], "a": null}}}\n',
    line(sample_id="no-passed", score={"value": 0.55}),
    line(sample_id="no-passed-low", score={"value": 0.3}),
    line(sample_id="int-passed", score=score(passed=1)),
    line(sample_id="bool-value", score=score(value=True)),
    line(sample_id="null-epoch", epoch=None),
    b'{"sample_id": "epoch-null", "experiment_name": "base", "epoch": null, '
    b'"score": {"value": 1}, "latency_ms": 1}\n',
    line(sample_id="no-usage", usage=None),
    line(sample_id="null-usage", usage={"input_tokens": None, "output_tokens": 4}),
    line(sample_id="float-tokens", usage={"input_tokens": 1.0, "output_tokens": 4}),
    line(sample_id="usage-text", usage="lots"),
    line(sample_id="int-cost", cost=2, judge_cost=1),
    line(sample_id="text-cost", cost="cheap"),
    line(sample_id="tools-object", tool_calls={"a": 1}),
    line(sample_id="messages-text", messages="hi"),
    line(sample_id="null-metadata", metadata=None),
    b'{"sample_id": "metadata-null", "experiment_name": "base", "metadata": null, '
    b'"score": {"value": 1}, "latency_ms": 1}\n',
    line(sample_id="metadata-list", metadata=[1, 2]),
    line(
        sample_id="bad-metric",
        score=score(metrics=[{"name": 3, "value": 1}, {"name": "ok", "value": 0.25, "weight": 1}]),
    ),
    line(sample_id="bool-metric", score=score(metrics=[{"name": "b", "value": True}])),
    line(sample_id="metrics-null", score=score(metrics=None)),
    line(sample_id="big-epoch", epoch=2**70),
    line(sample_id="big-latency", latency_ms=2**70),
    line(sample_id="bundle", bundle_path="b.zip"),
    line(sample_id="errored", error="boom 3", error_kind="agent", score=score(passed=False)),
    line(sample_id="error-no-kind", error="boom", error_kind=None),
    line(sample_id="reason-null", score=score(reason=None)),
    line(
        sample_id="talk",
        messages=[{"role": "user", "content": "hi"}] * 3,
        tool_calls=[{"name": "t", "params": {}, "message": "m", "success": True}],
    ),
    b"\n",
    b"{not json\n",
    b'{"sample_id": "no-score", "experiment_name": "base", "latency_ms": 1}\n',
    b'{"sample_id": "text-value", "experiment_name": "base", "score": {"value": "high"}, '
    b'"latency_ms": 1}\n',
    b"[1, 2]\n",
    b'{"sample_id": "bad-utf8 \xff", "experiment_name": "base", "score": {"value": 1}, '
    b'"latency_ms": 1}\n',
    line(sample_id="plain", metadata={"k": "later"}),  # a later line for the key wins
    line(sample_id="plain", metadata={"k": "last"}, epoch=1),
]
TABLES = {
    "results": "SELECT * FROM results ORDER BY id",
    "meta": "SELECT * FROM meta ORDER BY result_id, key, value",
    "metrics": "SELECT * FROM metrics ORDER BY result_id, name, value",
}


def dump(index: ResultIndex) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the index's tables, with the SQL type of every value."""
    out = {}
    for table, sql in TABLES.items():
        rows = index.query(sql)
        out[table] = [tuple((v, type(v).__name__) for v in row) for row in rows]
    return out


@pytest.fixture
def odd_run(tmp_path: Path) -> Path:
    run = tmp_path / "odd"
    run.mkdir()
    (run / "results.jsonl").write_bytes(b"".join(ODD_LINES) + b'{"sample_id": "cut')
    return run


def build(run: Path) -> tuple[ResultIndex, Any]:
    index = ResultIndex()
    indexed = index.add_run(run)
    index.finish(search_in_background=False)
    return index, indexed


def test_msgspec_rows_equal_the_sql_paths_rows(
    odd_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, fast_run = build(odd_run)

    def refuse(*args: object) -> tuple[Any, ...]:
        raise msgspec.DecodeError("every line to SQL")

    monkeypatch.setattr(viewer_lines, "_row", refuse)
    slow, slow_run = build(odd_run)
    assert fast_run == slow_run
    # Skipped: float tokens, null and list metadata, a huge epoch, not JSON, no score, a
    # text score, an array. The cut last line is dropped silently; a blank line is none.
    assert (fast_run.results, fast_run.lines, fast_run.skipped_count) == (28, 38, 8)
    fast_tables, slow_tables = dump(fast), dump(slow)
    for table in TABLES:
        assert fast_tables[table] == slow_tables[table], table
    assert len(fast_tables["results"]) == 28
    (talk,) = fast.page("odd", ResultFilter(sample="talk")).rows
    assert (talk.messages, talk.tool_calls) == (3, 1)
    assert fast.facets("odd") == slow.facets("odd")
    for words in ("later", "boom", "plain"):
        flt = ResultFilter(search=words)
        assert fast.page("odd", flt).rows == slow.page("odd", flt).rows


def test_most_lines_of_a_run_take_the_msgspec_path(tmp_path: Path) -> None:
    run = write(tmp_path, "r", [result(f"s{i}", metadata={"i": i}) for i in range(30)])
    batches = list(viewer_lines.decode_batches(run / "results.jsonl", id_base=0, run_id="r"))
    assert sum(len(b.rows) for b in batches) == 30
    assert not any(b.staged for b in batches)


# -- the run page's statistics --------------------------------------------------------------


def generated_results(seed: int, *, epochs: int) -> list[EvalResult]:
    """Two experiments of random outcomes, errors, scores, latencies, tokens and costs."""
    rng = random.Random(seed)
    results = []
    for experiment in ("base", "treat"):
        for i in range(60):
            for epoch in range(epochs):
                error = "boom" if rng.random() < 0.1 else None
                value = rng.choice([0.0, 1.0, rng.random()])
                results.append(
                    EvalResult(
                        sample_id=f"s{i}", experiment_name=experiment, epoch=epoch,
                        score=Score(value=value, passed=value >= 0.5, reason="r",
                                    metrics=(Metric("check", float(value >= 0.5)),)),
                        latency_ms=rng.randint(1, 5000), error=error,
                        error_kind=rng.choice(["agent", "timeout", None]) if error else None,
                        usage=TokenUsage(input_tokens=rng.randint(0, 900),
                                         output_tokens=rng.randint(0, 90)),
                        cost=rng.choice([None, rng.random() / 100]),
                        judge_cost=rng.choice([None, rng.random() / 1000]),
                        metadata={"level": rng.choice(["easy", "hard"])},
                        messages=(ChatMessage(role="user", content=f"q{i}"),),
                    )
                )  # fmt: skip
    rng.shuffle(results)
    return results


@pytest.mark.parametrize("epochs", [1, 3])
def test_run_statistics_equal_the_reports_exactly(tmp_path: Path, epochs: int) -> None:
    results = generated_results(7 + epochs, epochs=epochs)
    store = RunStore(tmp_path, clock=FakeClock(), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="gen") as run:
        run.extend(results)
    data = ViewerData.open(tmp_path / "gen", cache=False)
    for block in data.run("gen")["experiments"]:
        mine = [r for r in results if r.experiment_name == block["name"]]
        expected = summarize(mine)
        assert (block["n"], block["passed"], block["errors"], block["pass_rate"]) == (
            expected.n, expected.passed, expected.errors, expected.pass_rate,
        )  # fmt: skip
        assert block["pass_rate_ci"] == [expected.pass_rate_low, expected.pass_rate_high]
        assert block["mean_score"] == expected.mean
        assert block["mean_score_ci"] == [expected.mean_low, expected.mean_high]
        assert block["n_clusters"] == expected.n_clusters == (60 if epochs > 1 else None)
        assert block["cost"] == json.loads(json.dumps(cost_summary(mine).to_dict()))
        latencies = np.asarray([r.latency_ms for r in mine], dtype=float)
        assert block["latency_ms"] == {
            "mean": float(latencies.mean()),
            "p50": float(np.percentile(latencies, 50)),
            "p95": float(np.percentile(latencies, 95)),
        }
        assert block["tokens"] == {
            "input": sum(r.usage.input_tokens for r in mine),
            "output": sum(r.usage.output_tokens for r in mine),
        }
        kinds: dict[str, int] = {}
        for r in mine:
            if r.is_error:
                kinds[r.error_kind or "unknown"] = kinds.get(r.error_kind or "unknown", 0) + 1
        assert block["errors_by_kind"] == kinds


# -- what waits for the first page ------------------------------------------------------------


def index_names(data: ViewerData) -> set[str]:
    return {name for (name,) in data.index.query("SELECT name FROM sqlite_master")}


def test_sort_and_text_indexes_wait_for_the_first_page(tmp_path: Path) -> None:
    run = write(tmp_path, "r", [result("s1", output="wombat"), result("s2")])
    data = ViewerData.open(run, cache=False)
    assert "results_latency" not in index_names(data)
    charts = data.charts("r")  # the run page's last request starts the rest
    assert charts["charts"]
    data.index.wait_for_search()
    assert {"results_latency", "results_score", "results_sample"} <= index_names(data)
    assert data.results("r", [("q", "wombat")])["total"] == 1


def test_a_search_before_any_page_starts_the_text_index(tmp_path: Path) -> None:
    run = write(tmp_path, "r", [result("s1", output="wombat"), result("s2")])
    data = ViewerData.open(run, cache=False)
    assert data.results("r", [("q", "wombat")])["total"] == 1


def test_the_landing_page_of_a_single_run_is_made_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = write(tmp_path, "r", [result("s1"), result("s2", passed=False)])
    data = ViewerData.open(run, cache=False)
    thread = data.warm()
    assert thread is not None
    thread.join(timeout=30)
    calls: list[str] = []
    for name in ("facets", "experiment_passes", "query"):
        original = getattr(data.index, name)

        def counted(*args: Any, _original: Any = original, _name: str = name) -> Any:
            calls.append(_name)
            return _original(*args)

        monkeypatch.setattr(data.index, name, counted)
    assert [e["n"] for e in data.run("r")["experiments"]] == [2]
    assert data.charts("r")["charts"]
    assert calls == []  # both were made before they were asked for
    runs = ViewerData.open(tmp_path, cache=False)  # a directory of one run: still one run
    assert len(runs.index.runs()) == 1
    write(tmp_path, "r2", [result("s1")])
    assert ViewerData.open(tmp_path, cache=False).warm() is None  # the runs list lands


# -- the cache beside the run ---------------------------------------------------------------


@pytest.fixture
def cached_run(tmp_path: Path) -> Iterator[Path]:
    run = write(tmp_path, "r", [
        result("s1", output="wombat", metadata={"topic": "a"}),
        result("s2", passed=False, metadata={"topic": "b"}),
    ], b"{not json\n")  # fmt: skip
    data = ViewerData.open(run)
    data.charts("r")
    data.index.wait_for_search()  # the cache is written once the index is complete
    assert (run / CACHE_FILE).is_file()
    yield run


def test_a_second_open_reads_the_cache_not_the_run(
    cached_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = ViewerData.open(cached_run, cache=False)

    def unread(*args: object, **kwargs: object) -> Iterator[Any]:
        raise AssertionError("the run was read again")

    monkeypatch.setattr("weakincentives.debug._viewer_index.read_batches", unread)
    cached = ViewerData.open(cached_run)
    assert cached.index.runs() == fresh.index.runs()
    assert cached.run("r") == fresh.run("r")
    assert cached.results("r", [("q", "wombat")]) == fresh.results("r", [("q", "wombat")])
    assert cached.results("r", [("meta.topic", "b")])["total"] == 1
    (row,) = cached.results("r", [("sample", "s2")])["rows"]
    assert cached.result("r", row["id"])["result"]["sample_id"] == "s2"


def test_a_changed_results_file_is_indexed_again(cached_run: Path) -> None:
    with (cached_run / "results.jsonl").open("ab") as f:  # a result appended: a new size
        f.write(serde.dumps(result("s3", output="platypus")) + b"\n")
    data = ViewerData.open(cached_run)
    assert data.index.run("r") is not None
    assert [row["sample_id"] for row in data.results("r", [])["rows"]] == ["s1", "s2", "s3"]
    assert data.results("r", [("q", "platypus")])["total"] == 1


@pytest.mark.parametrize(
    "plant",
    [
        lambda path: path.write_bytes(b"not a database"),
        lambda path: sqlite3.connect(path).execute("CREATE TABLE results (x)").connection.commit(),
    ],
)
def test_a_cache_that_is_not_ours_is_ignored(cached_run: Path, plant: Any) -> None:
    (cached_run / CACHE_FILE).unlink()
    plant(cached_run / CACHE_FILE)
    data = ViewerData.open(cached_run)
    assert data.index.run("r") is not None
    assert data.results("r", [])["total"] == 2


def test_without_cache_nothing_is_written(tmp_path: Path) -> None:
    run = write(tmp_path, "r", [result("s1")])
    data = ViewerData.open(run, cache=False)
    data.charts("r")
    data.index.wait_for_search()
    assert not (run / CACHE_FILE).exists()


def test_a_cached_index_keeps_the_skipped_lines(cached_run: Path) -> None:
    indexed = ViewerData.open(cached_run).index.run("r")
    assert indexed is not None
    assert (indexed.results, indexed.lines, indexed.skipped_count) == (2, 3, 1)
    assert indexed.skipped[0].endswith(":3: not valid JSON")
    assert dataclasses.replace(indexed, skipped=()).path == cached_run


def test_a_reader_is_a_copy_that_charts_the_same(tmp_path: Path) -> None:
    from weakincentives.debug._viewer_charts import index_charts

    results = generated_results(3, epochs=2)
    store = RunStore(tmp_path, clock=FakeClock(), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="gen") as run:
        run.extend(results)
    data = ViewerData.open(tmp_path / "gen", cache=False)
    reader = data.index.reader()
    try:
        on_copy = index_charts(reader, "gen", slice_key="level")
    finally:
        reader.close()
    assert on_copy == index_charts(data.index, "gen", slice_key="level")
    assert on_copy.slice is not None and on_copy.epochs and on_copy.failures["not_passed"]
    with pytest.raises(sqlite3.ProgrammingError):
        reader.query("SELECT 1")  # closed
