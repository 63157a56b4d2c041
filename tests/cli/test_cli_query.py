from __future__ import annotations

import csv
import io
import json
import logging
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from weakincentives.cli import _query as query_cli
from weakincentives.cli import app
from weakincentives.cli._query import MAX_CELL, TABLE_ROWS, QueryFormat, print_rows
from weakincentives.clock import FakeClock
from weakincentives.debug import (
    RUN_EXAMPLES,
    DebugBundleConfig,
    QueryDatabase,
    bundle_recorder,
)
from weakincentives.evals import EvalResult, Fingerprint, RunStore, Score
from weakincentives.runtime.session import TokenUsage

START = datetime(2026, 11, 20, 23, 35, 1, tzinfo=UTC)
LOG = logging.getLogger("tests.cli.query")


def result(sample_id: str, experiment: str, *, passed: bool, reason: str = "") -> EvalResult:
    return EvalResult(
        sample_id=sample_id,
        experiment_name=experiment,
        score=Score(value=1.0 if passed else 0.0, passed=passed, reason=reason),
        latency_ms=10,
        usage=TokenUsage(input_tokens=10, output_tokens=2),
        metadata={"topic": "math"},
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    store = RunStore(tmp_path / "runs", clock=FakeClock(START), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="r1") as run:
        run.append(result("s1", "baseline", passed=True))
        run.append(result("s2", "baseline", passed=False, reason="x" * 200))
        run.append(result("s1", "v2", passed=True))
        run.append(result("s2", "v2", passed=True))
    return tmp_path / "runs" / "r1"


def wink(*args: str | Path) -> Result:
    return CliRunner().invoke(app, ["query", *map(str, args)])


PASS_RATE = "SELECT experiment, avg(passed) AS rate FROM results GROUP BY experiment ORDER BY 1"


def test_table_output(run_dir: Path) -> None:
    out = wink(run_dir, PASS_RATE, "--no-cache")
    assert out.exit_code == 0, out.output
    lines = [line.split() for line in out.stdout.splitlines() if line.strip()]
    assert ["experiment", "rate"] in lines
    assert ["baseline", "0.5"] in lines and ["v2", "1.0"] in lines
    assert "2 rows" in out.stderr


def test_json_output_is_a_list_of_objects(run_dir: Path) -> None:
    out = wink(run_dir, PASS_RATE, "--format", "json", "--no-cache")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == [
        {"experiment": "baseline", "rate": 0.5},
        {"experiment": "v2", "rate": 1.0},
    ]


def test_csv_output(run_dir: Path) -> None:
    sql = "SELECT sample_id, experiment, error FROM results ORDER BY experiment, sample_id"
    out = wink(run_dir, sql, "-f", "csv", "--no-cache")
    assert out.exit_code == 0, out.output
    assert list(csv.reader(io.StringIO(out.stdout))) == [
        ["sample_id", "experiment", "error"],
        ["s1", "baseline", ""], ["s2", "baseline", ""], ["s1", "v2", ""], ["s2", "v2", ""],
    ]  # fmt: skip


def test_limit_stops_early_and_says_so(run_dir: Path) -> None:
    out = wink(run_dir, "SELECT sample_id FROM results", "--limit", "1", "-f", "json")
    assert out.exit_code == 0, out.output
    assert len(json.loads(out.stdout)) == 1
    assert "1 row (more matched: stopped at 1)" in out.stderr


def test_the_table_format_caps_rows_by_default(run_dir: Path) -> None:
    sql = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        f"SELECT x FROM c LIMIT {TABLE_ROWS + 5}"
    )
    out = wink(run_dir, sql)
    assert out.exit_code == 0, out.output
    assert f"stopped at {TABLE_ROWS}" in out.stderr and "--limit" in out.stderr
    assert len(json.loads(wink(run_dir, sql, "-f", "json").stdout)) == TABLE_ROWS + 5


def test_long_cells_are_cut_in_the_table(run_dir: Path) -> None:
    out = wink(run_dir, "SELECT reason FROM results WHERE sample_id = 's2' AND NOT passed")
    assert out.exit_code == 0, out.output
    assert "x" * (MAX_CELL - 1) + "…" in out.stdout
    assert "x" * MAX_CELL not in out.stdout


def test_select_star_from_logs_on_a_bundle(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="req-1", clock=FakeClock(START)) as rec:
        LOG.warning("disk [bold]full[/bold]")
    assert rec.path is not None
    out = wink(rec.path, "SELECT * FROM logs", "-f", "json")
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.stdout)
    assert (row["level"], row["message"]) == ("WARNING", "disk [bold]full[/bold]")
    table = wink(rec.path, "SELECT * FROM logs")
    assert "disk [bold]full[/bold]" in table.stdout  # printed as text, not as rich markup


def test_schema_lists_tables_columns_and_examples(run_dir: Path) -> None:
    out = wink(run_dir, "--schema", "--no-cache")
    assert out.exit_code == 0, out.output
    for word in ("runs", "results", "metrics", "tool_calls", "messages", "logs", "json_extract"):
        assert word in out.stdout
    assert "Pass rate by experiment" in out.stdout and "Failing tool calls" in out.stdout
    data = json.loads(wink(run_dir, "--schema", "-f", "json", "--no-cache").stdout)
    results = next(t for t in data["tables"] if t["name"] == "results")
    types = {column["name"]: column["type"] for column in results["columns"]}
    assert (types["metadata"], types["session_id"]) == ("JSON", "TEXT")
    assert [e["sql"] for e in data["examples"]] == [sql for _, sql in RUN_EXAMPLES]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["SELECT * FROM nope"], "no such table: nope"),
        (["DELETE FROM results"], "DELETE is not allowed"),
        (["SELECT 1; SELECT 2"], "more than one statement"),
        ([], "give the SQL to run"),
    ],
)
def test_bad_sql_exits_2(run_dir: Path, args: list[str], message: str) -> None:
    out = wink(run_dir, *args, "--no-cache")
    assert out.exit_code == 2
    assert message in out.stderr and out.stdout == ""


def test_a_bad_target_exits_2(tmp_path: Path) -> None:
    out = wink(tmp_path / "missing", "SELECT 1")
    assert out.exit_code == 2
    assert "no such file or directory" in out.stderr and "run directory" in out.stderr


def test_warnings_go_to_stderr(run_dir: Path) -> None:
    with (run_dir / "results.jsonl").open("ab") as f:
        f.write(b"{broken\n")
    out = wink(run_dir, "SELECT count(*) AS n FROM results", "-f", "json", "--no-cache")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == [{"n": 4}]
    assert "warning: skipped 1 line(s)" in out.stderr


def test_no_cache_leaves_no_cache_file(run_dir: Path) -> None:
    assert wink(run_dir, PASS_RATE).exit_code == 0
    assert (run_dir / ".query-cache.sqlite").is_file()
    (run_dir / ".query-cache.sqlite").unlink()
    assert wink(run_dir, PASS_RATE, "--no-cache").exit_code == 0
    assert not (run_dir / ".query-cache.sqlite").exists()


MANY = (
    "WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c WHERE x < {n}) "
    "SELECT x, printf('%0200d', x) AS pad, NULL AS empty, x / 2.0 AS half FROM c"
)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_streamed_json_is_the_text_json_dumps_gives(run_dir: Path, n: int) -> None:
    out = wink(run_dir, MANY.format(n=n) + f" WHERE x <= {n}", "-f", "json", "--no-cache")

    assert out.exit_code == 0, out.output
    rows = [{"x": x, "pad": f"{x:0200d}", "empty": None, "half": x / 2} for x in range(1, n + 1)]
    assert out.stdout == json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    assert f"{n} row" in out.stderr


@pytest.mark.parametrize("fmt", [QueryFormat.JSON, QueryFormat.CSV])
def test_json_and_csv_stream_rows_in_bounded_memory(run_dir: Path, fmt: QueryFormat) -> None:
    n = 20_000  # 4-6 MB of output
    written = 0

    class Sink(io.StringIO):  # counts, keeps nothing
        def write(self, text: str) -> int:
            nonlocal written
            written += len(text)
            return len(text)

    with QueryDatabase.open(run_dir, cache=False) as db:
        tracemalloc.start()
        try:
            with db.stream(MANY.format(n=n)) as stream:
                print_rows(stream, fmt, Sink())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

    assert stream.count == n and not stream.truncated
    assert written > 4_000_000
    # A batch of rows (and the JSON encoder's garbage) at a time, not the whole output.
    assert peak < 2_000_000  # holding the rows would take more than the output


def test_a_table_holds_one_block_of_rows_however_many_are_printed(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Sink(io.StringIO):  # keeps nothing
        def write(self, text: str) -> int:
            return len(text)

    def peak(n: int, block: int) -> int:
        monkeypatch.setattr(query_cli, "TABLE_ROWS", block)
        with QueryDatabase.open(run_dir, cache=False) as db, db.stream(MANY.format(n=n)) as rows:
            tracemalloc.start()
            try:
                print_rows(rows, QueryFormat.TABLE, Sink())
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

    peak(10, 10)  # rich loads and warms its caches
    # 800 rows in blocks of 50 hold a block at a time; in one table, all of them (and
    # rich's rendering of them): several times more.
    assert peak(800, 50) < peak(800, 800) / 3


def test_a_long_table_is_printed_in_blocks_of_its_row_limit(run_dir: Path) -> None:
    out = io.StringIO()
    with QueryDatabase.open(run_dir, cache=False) as db, db.stream(MANY.format(n=2500)) as rows:
        print_rows(rows, QueryFormat.TABLE, out)
    text = out.getvalue()
    assert text.count(" half ") == 3  # a header per block: 1000, 1000 and 500 rows
    printed = [int(line.split()[0]) for line in text.splitlines() if line.strip()[:1].isdigit()]
    assert printed == list(range(1, 2501))


def test_a_stream_stops_at_its_limit_and_frees_the_cursor(run_dir: Path) -> None:
    with QueryDatabase.open(run_dir, cache=False) as db:
        with db.stream(MANY.format(n=10), limit=4) as stream:
            assert [row[0] for row in stream] == [1, 2, 3, 4]
        assert (stream.count, stream.truncated) == (4, True)
        assert list(stream) == []  # read once
        again = db.execute(MANY.format(n=10), limit=20)
        assert (len(again.rows), again.truncated) == (10, False)
