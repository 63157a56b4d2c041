"""The loader `wink query` and `wink debug` share: staging, extraction, last line wins."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from weakincentives import serde
from weakincentives.debug import ResultFilter, ResultIndex, query
from weakincentives.debug._run_loader import (
    COMPLETE,
    METRICS,
    REWARD,
    STAGE,
    delete_superseded,
    fields_select,
    prepare,
    stage_lines,
)
from weakincentives.evals import EvalResult, Metric, Score


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:", isolation_level=None)
    prepare(db)
    yield db
    db.close()


def result_line(sample_id: str, **extra: object) -> bytes:
    data = {"sample_id": sample_id, "experiment_name": "e", **extra}
    return json.dumps(data).encode() + b"\n"


def staged(
    conn: sqlite3.Connection,
    path: Path,
    *,
    limit: int | None = None,
    only: set[int] | None = None,
    batch_lines: int = 1000,
) -> list[list[tuple[int, ...]]]:
    """The rows of each batch: `(line, offset, complete)`."""
    batches = stage_lines(conn, path, limit=limit, only=only, batch_lines=batch_lines)
    sql = f"SELECT line, offset, {COMPLETE} FROM {STAGE} ORDER BY line"
    return [conn.execute(sql).fetchall() for _ in batches]


def test_lines_are_staged_in_batches_with_their_numbers_and_offsets(
    conn: sqlite3.Connection, tmp_path: Path
) -> None:
    lines = [result_line(f"s{i}") for i in range(7)]
    lines.insert(3, b"   \n")  # blank lines are not staged but keep their numbers
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"".join(lines))
    batches = staged(conn, path, batch_lines=3)
    rows = [row for batch in batches for row in batch]
    assert [len(b) for b in batches] == [3, 2, 2]
    assert [line for line, _, _ in rows] == [1, 2, 3, 5, 6, 7, 8]
    data = path.read_bytes()
    for line, offset, complete in rows:
        assert data[offset:].split(b"\n", 1)[0] + b"\n" == lines[line - 1]
        assert complete == 1
    assert conn.execute(f"SELECT count(*) FROM {STAGE}").fetchone() == (0,)


def test_a_size_limit_stages_a_snapshot_and_marks_a_cut_line(
    conn: sqlite3.Connection, tmp_path: Path
) -> None:
    lines = [result_line(f"s{i}") for i in range(3)]
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"".join(lines))
    limit = len(lines[0]) + 10
    (batch,) = staged(conn, path, limit=limit)
    assert batch == [(1, 0, 1), (2, len(lines[0]), 0)]
    assert staged(conn, path, limit=len(lines[0])) == [[(1, 0, 1)]]


def test_only_the_lines_asked_for_are_staged(conn: sqlite3.Connection, tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"".join(result_line(f"s{i}") for i in range(5)))
    (batch,) = staged(conn, path, only={2, 5})
    assert [line for line, _, _ in batch] == [2, 5]


def test_fields_are_pulled_from_json_lines_and_other_text_is_skipped(
    conn: sqlite3.Connection, tmp_path: Path
) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(
        result_line("s1", epoch=2, metadata={"k": [1, 2]}, output=None)
        + b"{not json\n"
        + b'{"sample_id": "bad \xff byte", "experiment_name": "e"}\n'
        + result_line("caf\u00e9", score={"passed": True, "value": 0.5})
    )
    sql = fields_select(("sample_id", "epoch", "passed", "score", "metadata", "output"))
    (rows,) = [conn.execute(sql).fetchall() for _ in stage_lines(conn, path)]
    assert rows == [
        (1, 0, "s1", 2, 0, None, '{"k":[1,2]}', None),  # no score: not passed
        (3, rows[1][1], "bad \ufffd byte", 0, 0, None, None, None),
        (4, rows[2][1], "caf\u00e9", 0, 1, 0.5, None, None),
    ]


METRIC_SETS = [
    [],
    [Metric("only", 0.25, weight=2.0)],
    [Metric("tracked", 3.0)],
    [Metric("a", 1.0, weight=3.0), Metric("b", 0.5, weight=1.0), Metric("turns", 2.0)],
    [Metric(f"m{k}", k / 7, weight=float(k % 3)) for k in range(4)],
    [Metric(f"m{k}", k / 7, weight=float(k % 3)) for k in range(5)],  # past the fast path
    [Metric(f"m{k}", 1.0) for k in range(9)],
]


@pytest.mark.parametrize("metrics", METRIC_SETS, ids=lambda m: f"{len(m)}-metrics")
def test_reward_and_metrics_match_the_score(
    conn: sqlite3.Connection, metrics: list[Metric]
) -> None:
    score = Score(value=0.0, passed=False, metrics=tuple(metrics))
    text = json.dumps(serde.dump(score)["metrics"])
    reward, as_object = conn.execute(
        f"SELECT {REWARD}, {METRICS} FROM (SELECT ? AS score_metrics)", (text,)
    ).fetchone()
    assert reward == pytest.approx(score.reward)
    assert json.loads(as_object) == {m.name: m.value for m in metrics}


def test_missing_metrics_give_no_reward_and_an_empty_object(conn: sqlite3.Connection) -> None:
    row = conn.execute(f"SELECT {REWARD}, {METRICS} FROM (SELECT NULL AS score_metrics)")
    assert row.fetchone() == (0.0, "{}")


def test_the_last_row_of_a_key_wins(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE t (run TEXT, k TEXT, v INTEGER)")
    rows = [("r", "a", 1), ("r", "b", 2), ("r", "a", 3), ("x", "a", 4), ("r", "a", 5)]
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    assert delete_superseded(conn, "t", ("run", "k"), where="run = ?", params=("x",)) == []
    assert sorted(delete_superseded(conn, "t", ("run", "k"))) == [1, 3]
    assert conn.execute("SELECT run, k, v FROM t ORDER BY rowid").fetchall() == [
        ("r", "b", 2), ("x", "a", 4), ("r", "a", 5),
    ]  # fmt: skip


def test_results_written_by_the_run_store_load(conn: sqlite3.Connection, tmp_path: Path) -> None:
    result = EvalResult(
        sample_id="s1", experiment_name="e", latency_ms=12, epoch=1,
        score=Score(value=1.0, passed=True, reason="ok", metrics=(Metric("m", 1.0, weight=1),)),
    )  # fmt: skip
    path = tmp_path / "results.jsonl"
    path.write_bytes(serde.dumps(result) + b"\n")
    names = ("sample_id", "experiment", "epoch", "passed", "score", "reason", "latency_ms")
    for _ in stage_lines(conn, path):
        (row,) = conn.execute(fields_select(names)).fetchall()
    assert row == (1, 0, "s1", "e", 1, 1, 1.0, "ok", 12)


SCORES_WITHOUT_PASSED = {
    "high": {"value": 0.8},
    "edge": {"value": 0.5},
    "low": {"value": 0.2},
    "told-no": {"value": 0.9, "passed": False},
    "told-yes": {"value": 0.1, "passed": True},
}
"""Scores as lines may hold them: `passed` left out defaults to `value >= 0.5`."""


def test_query_and_viewer_agree_with_score_on_a_missing_passed(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    lines = [
        json.dumps({"sample_id": sid, "experiment_name": "e", "score": score, "latency_ms": 1})
        for sid, score in SCORES_WITHOUT_PASSED.items()
    ]
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    expected = {
        sid: serde.loads(EvalResult, line).score.passed
        for sid, line in zip(SCORES_WITHOUT_PASSED, lines, strict=True)
    }
    assert expected == {"high": True, "edge": True, "low": False, "told-no": False,
                        "told-yes": True}  # fmt: skip

    rows = query(run, "SELECT sample_id, passed FROM results", cache=False).rows
    assert {sid: bool(passed) for sid, passed in rows} == expected
    index = ResultIndex()
    index.add_run(run)
    index.finish()
    viewed = index.page("r", ResultFilter()).rows
    assert {row.sample_id: row.passed for row in viewed} == expected
    assert {row.sample_id: row.status == "passed" for row in viewed} == expected
