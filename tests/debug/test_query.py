from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from weakincentives.clock import FakeClock
from weakincentives.debug import (
    BUNDLE_EXAMPLES,
    BUNDLE_TABLE_COLUMNS,
    RUN_EXAMPLES,
    DebugBundleConfig,
    QueryDatabase,
    QueryResult,
    bundle_recorder,
    query,
)
from weakincentives.debug import _run_tables as run_tables
from weakincentives.debug._query_cache import CACHE_FILE
from weakincentives.debug._readonly import readonly_copy, run_statement, tables_read
from weakincentives.debug._run_tables import RUN_TABLES, RunTables
from weakincentives.errors import QueryError
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Fingerprint,
    Metric,
    RunStore,
    Score,
    ToolCallRecord,
    latest_results,
)
from weakincentives.runtime.session import ChatMessage, TokenUsage, ToolCall

START = datetime(2026, 11, 20, 23, 35, 1, tzinfo=UTC)
LOG = logging.getLogger("tests.debug.query")


def make_result(
    sample_id: str,
    experiment: str = "baseline",
    *,
    passed: bool = True,
    error: str | None = None,
    bundle_path: Path | None = None,
    epoch: int = 0,
    topic: str = "math",
    delivery_count: int = 1,
) -> EvalResult:
    correct = 1.0 if passed else 0.0
    return EvalResult(
        sample_id=sample_id,
        experiment_name=experiment,
        epoch=epoch,
        score=Score.from_metrics(
            [
                Metric("correct", correct, weight=3.0),
                Metric("style", 0.5, weight=1.0),
                Metric("turns", 2.0),
            ],
            reason="exact" if passed else "expected 4",
        ),
        latency_ms=100 + len(sample_id),
        error=error,
        error_kind="agent" if error else None,
        request_id=f"req-{sample_id}-{experiment}-{epoch}",
        usage=TokenUsage(input_tokens=20, output_tokens=5, cached_tokens=2),
        metadata={"topic": topic, "level": 2},
        output={"answer": "4" if passed else "5"},
        messages=(
            ChatMessage(role="user", content="2 + 2?"),
            ChatMessage(
                role="assistant",
                tool_calls=(ToolCall(id="c1", name="add", arguments='{"a": 2, "b": 2}'),),
            ),
            ChatMessage(role="tool", content="4", tool_call_id="c1", name="add"),
        ),
        tool_calls=(
            ToolCallRecord("add", {"a": 2}, "bad params", False, 1.5, "b missing"),
            ToolCallRecord("add", {"a": 2, "b": 2}, "4", True, 2.5),
        ),
        bundle_path=bundle_path,
        delivery_count=delivery_count,
    )


def write_run(root: Path, run_id: str, results: list[EvalResult]) -> Path:
    store = RunStore(root, clock=FakeClock(START), sync_interval=None)
    fingerprint = Fingerprint(dataset_sha256="ab" * 32, epochs=1)
    with store.create(fingerprint, run_id=run_id, expected_results=4) as run:
        for result in results:
            run.append(result)
    return root / run_id


STANDARD = [
    make_result("s1"),
    make_result("s2", passed=False, topic="code"),
    make_result("s3", error="agent raised", topic="code"),
    make_result("s1", "v2"),
    # s3 is retried: the error line above is superseded by this one.
    make_result("s3", topic="code", delivery_count=2),
]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "runs", "r1", STANDARD)


def write_bundle(directory: Path, request_id: str = "req-1") -> Path:
    clock = FakeClock(START)
    config = DebugBundleConfig(directory=directory)
    with bundle_recorder(
        config, request_id=request_id, kind="eval", clock=clock, sample_id="s1",
        experiment="baseline",
    ) as rec:  # fmt: skip
        rec.set_request({"sample": {"id": "s1", "input": "2 + 2?"}, "epoch": 0})
        LOG.info("running %s", "s1")
        LOG.warning("tool call failed once")
        rec.set_eval(
            {"sample_id": "s1", "experiment_name": "baseline",
             "score": {"value": 1.0, "passed": True, "reason": "exact"},
             "latency_ms": 250.0, "error": None}
        )  # fmt: skip
    assert rec.path is not None
    return rec.path


def run_sql(target: Path, sql: str, **kwargs: Any) -> list[dict[str, Any]]:
    return query(target, sql, cache=False, **kwargs).to_dicts()


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# -- run tables ---------------------------------------------------------------------------


def test_results_has_one_row_per_key_and_the_last_line_wins(run_dir: Path) -> None:
    rows = run_sql(run_dir, "SELECT * FROM results ORDER BY experiment, sample_id")
    assert [(r["experiment"], r["sample_id"]) for r in rows] == [
        ("baseline", "s1"), ("baseline", "s2"), ("baseline", "s3"), ("v2", "s1"),
    ]  # fmt: skip
    s1, s2, s3, _ = rows
    assert s1 == {
        "run_id": "r1", "sample_id": "s1", "experiment": "baseline", "epoch": 0,
        "request_id": "req-s1-baseline-0", "session_id": None, "passed": 1,
        "score": pytest.approx(0.875),
        "reason": "exact", "reward": pytest.approx(0.875), "latency_ms": 102.0,
        "input_tokens": 20, "output_tokens": 5, "cached_tokens": 2, "total_tokens": 25,
        "cost_usd": None, "judge_cost_usd": None,
        "error_kind": None, "error": None, "metadata": '{"topic":"math","level":2}',
        "output": '{"answer":"4"}', "input": None, "expected": None,
        "metrics": '{"correct":1.0,"style":0.5,"turns":2.0}',
        "bundle_path": None, "delivery_count": 1, "line": 1,
    }  # fmt: skip
    assert (s2["passed"], s2["reward"], s2["reason"]) == (0, pytest.approx(0.125), "expected 4")
    assert (s3["passed"], s3["error"], s3["delivery_count"], s3["line"]) == (1, None, 2, 5)


def test_results_agree_with_the_run_stores_latest_results(run_dir: Path) -> None:
    rows = {
        (r["sample_id"], r["experiment"], r["epoch"]): r
        for r in run_sql(run_dir, "SELECT * FROM results")
    }
    expected = latest_results(run_dir)
    assert len(rows) == len(expected)
    for result in expected:
        row = rows[result.key]
        assert row["passed"] == result.passed
        assert row["score"] == pytest.approx(result.score.value)
        assert row["reward"] == pytest.approx(result.score.reward)
        assert row["total_tokens"] == result.tokens
        assert (row["request_id"], row["session_id"]) == (result.request_id, result.session_id)
        assert row["error"] == result.error and row["delivery_count"] == result.delivery_count
        assert json.loads(row["metadata"]) == result.metadata
        assert json.loads(row["metrics"]) == {m.name: m.value for m in result.score.metrics}


def test_a_failed_load_leaves_the_database_usable(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: RunTables) -> None:
        raise sqlite3.OperationalError("disk on fire")

    with QueryDatabase.open(run_dir, cache=False) as db:
        with monkeypatch.context() as patch:
            patch.setattr(RunTables, "_fill_logs", broken)
            with pytest.raises(QueryError, match=r"cannot load the tables of .*disk on fire"):
                db.execute("SELECT count(*) FROM logs")
            assert all(t.rows is None for t in db.tables())
        assert db.execute("SELECT count(*) FROM logs").rows == ((0,),)
        assert db.execute("SELECT count(*) FROM tool_calls").rows == ((8,),)


def test_errors_never_pass_even_with_a_passing_score(tmp_path: Path) -> None:
    run = write_run(tmp_path, "r", [make_result("s1", passed=True, error="boom")])
    (row,) = run_sql(run, "SELECT passed, error, error_kind FROM results")
    assert row == {"passed": 0, "error": "boom", "error_kind": "agent"}


def test_detail_tables_hold_only_the_winning_lines(run_dir: Path) -> None:
    counts = run_sql(
        run_dir,
        "SELECT (SELECT count(*) FROM metrics) AS m, (SELECT count(*) FROM tool_calls) AS t, "
        "(SELECT count(*) FROM messages) AS g",
    )
    assert counts == [{"m": 4 * 3, "t": 4 * 2, "g": 4 * 3}]
    calls = run_sql(
        run_dir,
        "SELECT seq, name, params, message, success, duration_ms, error FROM tool_calls "
        "WHERE sample_id = 's1' AND experiment = 'baseline' ORDER BY seq",
    )
    assert calls == [
        {"seq": 0, "name": "add", "params": '{"a":2}', "message": "bad params", "success": 0,
         "duration_ms": 1.5, "error": "b missing"},
        {"seq": 1, "name": "add", "params": '{"a":2,"b":2}', "message": "4", "success": 1,
         "duration_ms": 2.5, "error": None},
    ]  # fmt: skip
    messages = run_sql(
        run_dir,
        "SELECT seq, role, content, tool_calls ->> '$[0].name' AS called, tool_call_id, name "
        "FROM messages WHERE sample_id = 's2' ORDER BY seq",
    )
    assert [tuple(m.values()) for m in messages] == [
        (0, "user", "2 + 2?", None, None, None),
        (1, "assistant", None, "add", None, None),
        (2, "tool", "4", None, "c1", "add"),
    ]
    metrics = run_sql(
        run_dir, "SELECT name, value, weight FROM metrics WHERE sample_id = 's2' ORDER BY name"
    )
    assert [tuple(m.values()) for m in metrics] == [
        ("correct", 0.0, 3.0), ("style", 0.5, 1.0), ("turns", 2.0, 0.0),
    ]  # fmt: skip


def test_json_columns_are_queryable(run_dir: Path) -> None:
    rows = run_sql(
        run_dir,
        "SELECT json_extract(metadata, '$.topic') AS topic, count(*) AS n, "
        "sum(total_tokens) AS tokens, max(json_extract(metrics, '$.correct')) AS best, "
        "min(output ->> '$.answer') AS answer FROM results GROUP BY topic ORDER BY topic",
    )
    assert rows == [
        {"topic": "code", "n": 2, "tokens": 50, "best": 1.0, "answer": "4"},
        {"topic": "math", "n": 2, "tokens": 50, "best": 1.0, "answer": "4"},
    ]


def test_runs_table_reads_the_manifest_and_counts_the_latest_results(run_dir: Path) -> None:
    (row,) = run_sql(run_dir, "SELECT * FROM runs")
    assert row["run_id"] == "r1" and row["path"] == str(run_dir)
    assert row["status"] == "complete"
    assert row["created_at"] == START.isoformat()
    assert (row["expected"], row["results"], row["passed"], row["failed"], row["errors"]) == (
        4, 4, 3, 1, 0,
    )  # fmt: skip
    assert json.loads(row["fingerprint"])["dataset_sha256"] == "ab" * 32
    assert json.loads(row["config"]) == {}


def test_a_directory_of_runs_loads_every_run_with_its_run_id(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    write_run(root, "a", STANDARD)
    write_run(root, "b", [make_result("s1", passed=False)])
    (root / "not-a-run").mkdir()
    with QueryDatabase.open(root, cache=False) as db:
        assert db.kind == "runs"
        rows = db.execute(
            "SELECT run_id, count(*) AS n, sum(passed) AS passed FROM results GROUP BY run_id"
        ).to_dicts()
        runs = db.execute("SELECT run_id, results FROM runs ORDER BY run_id").rows
        calls = db.execute("SELECT run_id, count(*) FROM tool_calls GROUP BY run_id").rows
    assert rows == [{"run_id": "a", "n": 4, "passed": 3}, {"run_id": "b", "n": 1, "passed": 0}]
    assert runs == (("a", 4), ("b", 1))
    assert calls == (("a", 8), ("b", 2))


def test_a_results_file_or_manifest_path_opens_its_run(run_dir: Path) -> None:
    for path in (run_dir / "results.jsonl", run_dir / "run.json"):
        with QueryDatabase.open(path, cache=False) as db:
            assert db.kind == "run"
            assert db.execute("SELECT count(*) FROM results").rows == ((4,),)


def test_skipped_lines_are_reported_and_the_rest_loads(run_dir: Path) -> None:
    results = run_dir / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    damaged = [
        lines[0],
        b"{not json\n",
        b'{"no": "sample id"}\n',
        *lines[1:],
        b'{"sample_id": "s9", "exp',
    ]
    results.write_bytes(b"".join(damaged))
    with QueryDatabase.open(run_dir, cache=False) as db:
        assert db.execute("SELECT count(*) FROM results").rows == ((4,),)
        warnings = db.warnings
    assert len(warnings) == 2
    assert f"{results}:2" in warnings[1] and f"{results}:3" in warnings[1]
    assert "skipped 2 line(s)" in warnings[1]
    assert "truncated last line" in warnings[0] and f"{results}:{len(damaged)}" in warnings[0]


def test_a_run_directory_without_a_manifest_still_loads(tmp_path: Path) -> None:
    run = write_run(tmp_path, "r", STANDARD[:2])
    (run / "run.json").unlink()
    with QueryDatabase.open(run, cache=False) as db:
        assert db.execute("SELECT count(*) FROM results").rows == ((2,),)
        assert db.execute("SELECT run_id, status, results FROM runs").rows == (("r", None, 2),)
        assert db.warnings == ()


def test_logs_come_from_the_bundles_the_results_point_to(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "bundles")
    missing = tmp_path / "bundles" / "gone.zip"
    run = write_run(
        tmp_path / "runs", "r",
        [make_result("s1", bundle_path=bundle), make_result("s2", bundle_path=missing)],
    )  # fmt: skip
    with QueryDatabase.open(run, cache=False) as db:
        rows = db.execute("SELECT * FROM logs ORDER BY seq").to_dicts()
        warnings = db.warnings
    assert [(r["sample_id"], r["seq"], r["level"], r["message"]) for r in rows] == [
        ("s1", 0, "INFO", "running s1"),
        ("s1", 1, "WARNING", "tool call failed once"),
    ]
    assert rows[0]["bundle_path"] == str(bundle)
    assert rows[0]["logger"] == LOG.name and datetime.fromisoformat(rows[0]["time"]).tzinfo
    assert len(warnings) == 1 and "1 debug bundle(s)" in warnings[0] and str(missing) in warnings[0]


def test_every_table_spec_matches_the_loaded_columns(run_dir: Path) -> None:
    with QueryDatabase.open(run_dir, cache=False) as db:
        for spec in RUN_TABLES:
            result = db.execute(f"SELECT * FROM {spec.name} LIMIT 0")
            assert result.columns == tuple(c[0] for c in spec.columns), spec.name
            assert all(c[2] for c in spec.columns), f"{spec.name}: undocumented column"
        infos = {t.name: t for t in db.tables()}
    assert list(infos) == [s.name for s in RUN_TABLES]
    assert infos["results"].rows == 4 and infos["messages"].rows == 12
    assert {c.type for c in infos["results"].columns} >= {"TEXT", "INTEGER", "REAL", "JSON"}


def test_tables_load_only_when_a_query_reads_them(run_dir: Path) -> None:
    with QueryDatabase.open(run_dir, cache=False) as db:
        assert {t.name: t.rows for t in db.tables()}["results"] is None
        db.execute("SELECT 1")
        assert all(t.rows is None for t in db.tables())
        db.execute("SELECT count(*) FROM results")
        loaded = {t.name: t.rows for t in db.tables()}
    assert loaded == {
        "runs": None, "results": 4, "metrics": None, "tool_calls": None, "messages": None,
        "logs": None,
    }  # fmt: skip


def test_a_query_reads_the_results_file_as_it_was_when_opened(run_dir: Path) -> None:
    store = RunStore(run_dir.parent, sync_interval=None)
    with QueryDatabase.open(run_dir, cache=False) as db:
        with store.resume("r1", Fingerprint(dataset_sha256="ab" * 32, epochs=1)) as run:
            run.append(make_result("s4"))
        assert db.execute("SELECT count(*) FROM results").rows == ((4,),)
        # Detail tables read the file again later: the snapshot holds for them too.
        assert db.execute("SELECT count(*) FROM tool_calls").rows == ((8,),)
    assert run_sql(run_dir, "SELECT count(*) AS n FROM results") == [{"n": 5}]


def cached_parts(run_dir: Path) -> set[str]:
    with sqlite3.connect(run_dir / CACHE_FILE) as cache:
        (tables,) = cache.execute(
            "SELECT value FROM wink_query_cache WHERE key = 'tables'"
        ).fetchone()
    return set(tables.split(","))


@pytest.mark.parametrize(
    ("sql", "fills"),
    [
        ("SELECT experiment, avg(passed) FROM results GROUP BY experiment", False),
        ("SELECT count(*) FROM results", False),
        ("SELECT * FROM results", True),
        ("SELECT r.sample_id FROM results AS r WHERE r.reward > 0.5", True),
        ("SELECT json_extract(metrics, '$.correct') FROM results", True),
        ("SELECT (SELECT max(reward) FROM results) AS best", True),
        ("EXPLAIN SELECT sample_id FROM results", False),
        ("EXPLAIN QUERY PLAN SELECT sample_id FROM results WHERE reward > 0", True),
    ],
)
def test_reward_and_metrics_are_filled_for_queries_that_read_them(
    run_dir: Path, sql: str, fills: bool
) -> None:
    query(run_dir, sql)
    assert ("results.metrics" in cached_parts(run_dir)) is fills
    with sqlite3.connect(run_dir / CACHE_FILE) as cache:
        filled = cache.execute("SELECT count(reward), count(metrics) FROM results").fetchone()
    assert filled == ((4, 4) if fills else (0, 0))


def test_reward_and_metrics_filled_later_match_a_full_load(run_dir: Path) -> None:
    eager = query(run_dir, "SELECT * FROM results ORDER BY rowid", cache=False).rows
    query(run_dir, "SELECT count(*) FROM results")  # caches results without them
    assert "results.metrics" not in cached_parts(run_dir)
    assert query(run_dir, "SELECT * FROM results ORDER BY rowid").rows == eager
    assert "results.metrics" in cached_parts(run_dir)
    with QueryDatabase.open(run_dir, cache=False) as db:
        db.execute("SELECT count(*) FROM results")
        assert db.execute("SELECT * FROM results ORDER BY rowid").rows == eager
        rewards = db.execute("SELECT sample_id, reward, metrics FROM results").rows
    assert all(reward is not None and metrics for _, reward, metrics in rewards)


@pytest.mark.parametrize(("title", "sql"), RUN_EXAMPLES)
def test_run_examples_run(run_dir: Path, title: str, sql: str) -> None:
    del title
    assert isinstance(query(run_dir, sql, cache=False), QueryResult)


# -- bundles ------------------------------------------------------------------------------


def test_select_star_from_logs_on_a_bundle(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path)
    with QueryDatabase.open(bundle) as db:
        assert db.kind == "bundle"
        result = db.execute("SELECT * FROM logs")
        eval_row = db.execute("SELECT sample_id, passed, score FROM eval").to_dicts()
        names = [t.name for t in db.tables()]
        assert db.warnings == ()
    assert result.columns == BUNDLE_TABLE_COLUMNS["logs"]
    assert [(r["level"], r["message"]) for r in result.to_dicts()] == [
        ("INFO", "running s1"),
        ("WARNING", "tool call failed once"),
    ]
    assert eval_row == [{"sample_id": "s1", "passed": 1, "score": 1.0}]
    assert names == list(BUNDLE_TABLE_COLUMNS)
    assert not (tmp_path / CACHE_FILE).exists()


def test_a_bundle_with_a_bad_checksum_warns_and_is_queried(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "ok")
    with zipfile.ZipFile(bundle) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    members["logs.jsonl"] = members["logs.jsonl"].replace(b"running", b"RUNNING")
    damaged = tmp_path / "damaged.zip"
    with zipfile.ZipFile(damaged, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    with QueryDatabase.open(damaged) as db:
        rows = db.execute("SELECT message FROM logs ORDER BY seq").rows
        warnings = db.warnings
    assert rows == (("RUNNING s1",), ("tool call failed once",))
    assert len(warnings) == 1 and "logs.jsonl fails its checksum" in warnings[0]


@pytest.mark.parametrize(("title", "sql"), BUNDLE_EXAMPLES)
def test_bundle_examples_run(tmp_path: Path, title: str, sql: str) -> None:
    del title
    assert isinstance(query(write_bundle(tmp_path), sql), QueryResult)


# -- targets and errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing", "no such file or directory"),
        (lambda p: p, "holds no run directories"),
        (lambda p: (p / "x.zip").write_text("hello") and p / "x.zip", "not a readable zip"),
    ],
)
def test_bad_targets_raise_query_error(tmp_path: Path, make: Any, message: str) -> None:
    with pytest.raises(QueryError, match=message) as info:
        QueryDatabase.open(make(tmp_path))
    assert "run directory" in str(info.value)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELEC * FROM results", r'near "SELEC"'),
        ("SELECT * FROM nope", "no such table: nope"),
        ("SELECT nope FROM results", "no such column: nope"),
        ("   ", "the SQL is empty"),
        ("-- only a comment", "the SQL is empty"),
    ],
)
def test_bad_sql_raises_query_error_with_a_hint(run_dir: Path, sql: str, message: str) -> None:
    with pytest.raises(QueryError, match=message) as info:
        query(run_dir, sql, cache=False)
    assert "--schema" in str(info.value) or "SELEC" in str(info.value)


def test_limit_truncates_and_says_so(run_dir: Path) -> None:
    with QueryDatabase.open(run_dir, cache=False) as db:
        two = db.execute("SELECT sample_id FROM results ORDER BY rowid", limit=2)
        four = db.execute("SELECT sample_id FROM results", limit=4)
        with pytest.raises(QueryError, match="limit must be >= 0"):
            db.execute("SELECT 1", limit=-1)
    assert two.rows == (("s1",), ("s2",)) and two.truncated
    assert len(four.rows) == 4 and not four.truncated


class TickingClock(FakeClock):
    """A fake clock that moves one second each time it is read."""

    def monotonic(self) -> float:
        self.advance(1.0)
        return super().monotonic()


def test_a_query_past_its_timeout_stops(run_dir: Path) -> None:
    endless = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    )
    with QueryDatabase.open(run_dir, cache=False, clock=TickingClock()) as db:
        with pytest.raises(QueryError, match="ran past its timeout"):
            db.execute(endless, timeout=5.0)
        assert db.execute("SELECT count(*) FROM results", timeout=5.0).rows == ((4,),)


# -- cache ----------------------------------------------------------------------------------


def test_the_cache_is_written_reused_and_invalidated(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = run_dir / CACHE_FILE
    assert query(run_dir, "SELECT count(*) FROM results").rows == ((4,),)
    assert cache.is_file()

    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("results.jsonl was read despite a valid cache")

    with monkeypatch.context() as patch:
        patch.setattr(run_tables, "stage_lines", no_reading)
        assert query(run_dir, "SELECT sum(passed) FROM results").rows == ((3,),)
        assert query(run_dir, "SELECT status, results FROM runs").rows == (("complete", 4),)
        with pytest.raises(AssertionError, match="despite a valid cache"):
            query(run_dir, "SELECT count(*) FROM tool_calls")
    assert query(run_dir, "SELECT count(*) FROM tool_calls").rows == ((8,),)
    store = RunStore(run_dir.parent, sync_interval=None)
    with store.resume("r1", Fingerprint(dataset_sha256="ab" * 32, epochs=1)) as run:
        run.append(make_result("s4"))
    assert query(run_dir, "SELECT count(*) FROM results").rows == ((5,),)
    assert query(run_dir, "SELECT count(*) FROM tool_calls").rows == ((10,),)


def test_no_cache_writes_nothing(run_dir: Path) -> None:
    before = tree_digest(run_dir)
    query(run_dir, "SELECT count(*) FROM results", cache=False)
    assert tree_digest(run_dir) == before


def test_a_planted_cache_with_another_schema_is_ignored(run_dir: Path) -> None:
    planted = sqlite3.connect(run_dir / CACHE_FILE)
    planted.execute("CREATE TABLE results (sample_id TEXT)")
    planted.execute("INSERT INTO results VALUES ('fake')")
    planted.execute("CREATE VIEW evil AS SELECT 1")
    planted.commit()
    planted.close()
    assert query(run_dir, "SELECT count(*) FROM results").rows == ((4,),)
    with pytest.raises(QueryError, match="no such table: evil"):
        query(run_dir, "SELECT * FROM evil")


def test_an_unwritable_cache_location_is_not_an_error(run_dir: Path) -> None:
    (run_dir / CACHE_FILE).mkdir()  # a directory where the file should go
    assert query(run_dir, "SELECT count(*) FROM results").rows == ((4,),)


# -- read-only guarantees -------------------------------------------------------------------

WRITES = [
    "DELETE FROM results",
    "UPDATE results SET passed = 1",
    "INSERT INTO results (sample_id) VALUES ('x')",
    "DROP TABLE results",
    "CREATE TABLE x (a)",
    "CREATE TEMP TABLE x (a)",
    "CREATE TEMP VIEW v AS SELECT 1",
    "ALTER TABLE results ADD COLUMN x",
    "REINDEX",
    "ANALYZE",
    "BEGIN",
    "SAVEPOINT s",
    "DETACH DATABASE main",
    "VACUUM",
    "WITH x AS (SELECT 1) DELETE FROM results",
    "WITH x AS (SELECT 1) INSERT INTO results (sample_id) SELECT 1 FROM x",
    "PRAGMA query_only=OFF",
    "PRAGMA query_only = 0",
    "PRAGMA writable_schema=ON",
    "PRAGMA journal_mode=WAL",
    "SELECT load_extension('libc.so.6')",
    "SELECT fts3_tokenizer('simple')",
    "SELECT 1; DELETE FROM results",
    "SELECT 1; SELECT 2",
    "/* hidden */ DELETE FROM results",
    "EXPLAIN DELETE FROM results",
    "REPLACE INTO results (sample_id) VALUES ('x')",
]


@pytest.mark.parametrize("sql", WRITES)
def test_the_read_only_connection_alone_refuses_writes(sql: str) -> None:
    source = sqlite3.connect(":memory:")
    source.execute("CREATE TABLE results (sample_id TEXT, passed INTEGER)")
    source.execute("INSERT INTO results VALUES ('s1', 0)")
    source.commit()
    conn = readonly_copy(source)
    with pytest.raises(QueryError):
        run_statement(conn, sql)
    assert conn.execute("SELECT * FROM results").fetchall() == [("s1", 0)]
    assert run_statement(conn, "PRAGMA query_only").rows == ((1,),)


def readonly_results() -> sqlite3.Connection:
    source = sqlite3.connect(":memory:")
    source.execute("CREATE TABLE results (sample_id TEXT, passed INTEGER, reward REAL)")
    source.execute("CREATE TABLE runs (run_id TEXT)")
    return readonly_copy(source)


@pytest.mark.parametrize(
    ("sql", "read"),
    [
        ("SELECT 1", {}),
        ("SELECT count(*) FROM results", {"results": set()}),
        ("SELECT * FROM results", {"results": {"sample_id", "passed", "reward"}}),
        ("EXPLAIN SELECT Reward FROM Results", {"results": {"reward"}}),
        ("WITH t AS (SELECT passed FROM results) SELECT run_id FROM runs, t",
         {"results": {"passed"}, "runs": {"run_id"}}),
    ],
)  # fmt: skip
def test_tables_read_names_the_tables_and_columns_a_statement_reads(
    sql: str, read: dict[str, set[str]]
) -> None:
    assert tables_read(readonly_results(), sql) == read


@pytest.mark.parametrize("sql", WRITES)
def test_tables_read_refuses_writes_and_leaves_the_policy_in_place(sql: str) -> None:
    conn = readonly_results()
    with pytest.raises(QueryError):
        tables_read(conn, sql)
    assert tables_read(conn, "SELECT passed FROM results") == {"results": {"passed"}}
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        conn.execute("CREATE TEMP TABLE x (a)")


@pytest.mark.parametrize("sql", WRITES)
def test_statements_that_write_are_refused(tmp_path: Path, sql: str) -> None:
    run = write_run(tmp_path / "runs", "r1", STANDARD)
    query(run, "SELECT count(*) FROM results")  # builds the cache too
    before = tree_digest(tmp_path)
    with QueryDatabase.open(run) as db:
        with pytest.raises(QueryError):
            db.execute(sql)
        assert db.execute("SELECT count(*) FROM results").rows == ((4,),)
        assert db.execute("PRAGMA query_only").rows == ((1,),)
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize(
    "template",
    [
        "ATTACH DATABASE '{path}' AS y",
        "ATTACH '{path}' AS y",
        "ATTACH 'file:{path}?mode=rwc' AS y",
        "VACUUM INTO '{path}'",
        "VACUUM main INTO '{path}'",
        "SELECT writefile('{path}', 'data')",
        "SELECT edit('x', '{path}')",
    ],
)
@pytest.mark.parametrize("kind", ["run", "bundle", "connection"])
def test_nothing_the_query_runs_creates_a_file(tmp_path: Path, template: str, kind: str) -> None:
    run = write_run(tmp_path / "runs", "r1", STANDARD)
    bundle = write_bundle(tmp_path / "bundles")
    target = tmp_path / "out" / "x.db"
    target.parent.mkdir()
    before = tree_digest(tmp_path)
    sql = template.format(path=target)
    with pytest.raises(QueryError):
        if kind == "connection":  # the read-only connection alone, without the compile probe
            run_statement(readonly_copy(sqlite3.connect(":memory:")), sql)
        else:
            query(run if kind == "run" else bundle, sql, cache=False)
    assert not target.exists()
    assert list(target.parent.iterdir()) == []
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize("function", ["writefile", "readfile", "edit"])
def test_file_functions_do_not_exist(function: str) -> None:
    conn = sqlite3.connect(":memory:")
    with pytest.raises(sqlite3.OperationalError, match=f"no such function: {function}"):
        conn.execute(f"SELECT {function}('x')")


def test_a_trailing_semicolon_and_comments_are_fine(run_dir: Path) -> None:
    sql = "-- how many?\n/* all */ SELECT count(*) FROM results; -- done\n"
    assert query(run_dir, sql, cache=False).rows == ((4,),)


@pytest.mark.parametrize(
    "sql",
    ["PRAGMA table_info(results)", "PRAGMA query_only",
     "EXPLAIN QUERY PLAN SELECT * FROM results WHERE experiment = 'v2'",
     "VALUES (1, 2)", "SELECT name FROM sqlite_master WHERE type = 'table'"],
)  # fmt: skip
def test_read_only_introspection_is_allowed(run_dir: Path, sql: str) -> None:
    assert query(run_dir, sql, cache=False).rows


def write_attempts(conn: sqlite3.Connection, path: Path) -> Iterator[str]:
    for sql in ("INSERT INTO t VALUES (2)", f"ATTACH '{path}' AS y", f"VACUUM INTO '{path}'"):
        try:
            conn.execute(sql)
        except sqlite3.Error as exc:
            yield str(exc)


def test_each_layer_holds_without_the_authorizer(tmp_path: Path) -> None:
    source = sqlite3.connect(":memory:")
    source.execute("CREATE TABLE t (a)")
    source.execute("INSERT INTO t VALUES (1)")
    source.commit()
    conn = readonly_copy(source)
    conn.set_authorizer(None)  # what query_only and the attach limit stop on their own
    target = tmp_path / "x.db"
    errors = list(write_attempts(conn, target))
    assert len(errors) == 3
    assert "readonly" in errors[0] and "too many attached databases" in errors[1]
    assert conn.execute("SELECT a FROM t").fetchall() == [(1,)]
    assert not target.exists()


@pytest.mark.parametrize(
    "template",
    ["ATTACH '{path}' AS y", "VACUUM INTO '{path}'", "SELECT load_extension('{path}')"],
)
def test_the_authorizer_alone_stops_file_access(tmp_path: Path, template: str) -> None:
    source = sqlite3.connect(":memory:")
    source.execute("CREATE TABLE t (a)")
    conn = readonly_copy(source)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 10)  # lift the attach limit: authorizer only
    target = tmp_path / "x.db"
    with pytest.raises(sqlite3.DatabaseError, match=r"not authorized|authorization denied"):
        conn.execute(template.format(path=target))  # bypasses the keyword check
    assert not target.exists()


@pytest.mark.parametrize("epochs", [1, 3])
def test_pass_rate_interval_functions_give_the_report_s_interval(
    tmp_path: Path, epochs: int
) -> None:
    results = [
        make_result(f"s{i}", experiment, passed=(i * 7 + epoch + len(experiment)) % 3 != 0,
                    epoch=epoch)
        for experiment in ("baseline", "v2")
        for i in range(8)
        for epoch in range(epochs)
    ]  # fmt: skip
    target = write_run(tmp_path, "run-1", results)
    rows = run_sql(
        target,
        "SELECT experiment, pass_rate_low(passed, sample_id) AS low, "
        "pass_rate_high(passed, sample_id) AS high FROM results GROUP BY experiment",
    )
    report = EvalReport(results=tuple(results))
    for row in rows:
        summary = report.experiment(row["experiment"]).summarize()
        assert (row["low"], row["high"]) == (summary.pass_rate_low, summary.pass_rate_high)
        assert (summary.n_clusters is not None) is (epochs > 1)


def test_pass_rate_interval_of_one_clustered_sample_is_null(tmp_path: Path) -> None:
    results = [make_result("s0", epoch=epoch) for epoch in range(3)]
    target = write_run(tmp_path, "run-1", results)
    rows = run_sql(target, "SELECT pass_rate_low(passed, sample_id) AS low FROM results")
    assert rows == [{"low": None}]
