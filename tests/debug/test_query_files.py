"""`wink query` keeps a run's tables in a private database file, opened read-only.

The tables are built in a working copy in the temporary directory (not in memory) and
the user's SQL runs on a `mode=ro` connection to it. These tests check that this first
layer of `_readonly.py` holds on its own, that the other three still hold on a file, and
that the working copy is private: removed on close, never the run's cache.
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from pathlib import Path

import pytest

from tests.debug.test_query import STANDARD, WRITES, tree_digest, write_run
from weakincentives.debug import QueryDatabase, query
from weakincentives.debug._query_cache import CACHE_FILE
from weakincentives.debug._readonly import readonly_open, run_statement
from weakincentives.errors import QueryError


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary directory working copies go to, empty (and watched by the test)."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def database_file(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE results (sample_id TEXT, passed INTEGER)")
    conn.execute("INSERT INTO results VALUES ('s1', 0)")
    conn.commit()
    conn.close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("sql", WRITES)
def test_the_read_only_file_connection_alone_refuses_writes(tmp_path: Path, sql: str) -> None:
    path = database_file(tmp_path / "db.sqlite")
    before = digest(path)
    conn = readonly_open(path)
    with pytest.raises(QueryError):
        run_statement(conn, sql)
    assert conn.execute("SELECT * FROM results").fetchall() == [("s1", 0)]
    assert run_statement(conn, "PRAGMA query_only").rows == ((1,),)
    conn.close()
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.sqlite"]


def test_the_file_is_opened_read_only_whatever_the_other_layers_allow(tmp_path: Path) -> None:
    path = database_file(tmp_path / "db.sqlite")
    before = digest(path)
    conn = readonly_open(path)
    # Lift layers 2 and 3 (only Python code can): SQLite's file handle still cannot write.
    conn.set_authorizer(None)
    conn.execute("PRAGMA query_only=OFF")
    for sql in ("INSERT INTO results VALUES ('x', 1)", "DELETE FROM results",
                "CREATE TABLE t (a)", "DROP TABLE results"):  # fmt: skip
        with pytest.raises(sqlite3.OperationalError, match="readonly database"):
            conn.execute(sql)
    assert conn.execute("SELECT * FROM results").fetchall() == [("s1", 0)]
    conn.close()
    assert digest(path) == before


@pytest.mark.parametrize(
    "template",
    ["ATTACH DATABASE '{path}' AS y", "ATTACH 'file:{path}?mode=rwc' AS y", "VACUUM INTO '{path}'",
     "VACUUM main INTO '{path}'"],
)  # fmt: skip
def test_nothing_run_on_a_read_only_file_creates_a_file(tmp_path: Path, template: str) -> None:
    path = database_file(tmp_path / "db.sqlite")
    target = tmp_path / "out.db"
    conn = readonly_open(path)
    with pytest.raises(QueryError, match="read-only"):
        run_statement(conn, template.format(path=target))
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 10)  # the authorizer alone
    with pytest.raises(sqlite3.DatabaseError, match=r"not authorized|authorization denied"):
        conn.execute(template.format(path=target))
    assert not target.exists()


@pytest.mark.parametrize("cache", [True, False])
def test_the_working_copy_is_private_and_removed_on_close(
    tmp_path: Path, temp_dir: Path, cache: bool
) -> None:
    run = write_run(tmp_path / "runs", "r1", STANDARD)
    query(run, "SELECT count(*) FROM results")  # a cache to start from, when used
    before = tree_digest(run)
    with QueryDatabase.open(run, cache=cache) as db:
        assert db.execute("SELECT count(*) FROM results").rows == ((4,),)
        (work,) = temp_dir.iterdir()  # the tables live here, not in memory
        assert work.stat().st_size > 0
        for sql in WRITES:
            with pytest.raises(QueryError):
                db.execute(sql)
        assert db.execute("SELECT count(*), sum(passed) FROM results").rows == ((4, 3),)
    assert list(temp_dir.iterdir()) == []
    assert tree_digest(run) == before


def test_a_query_that_fills_more_tables_updates_the_cache_not_the_session(
    tmp_path: Path, temp_dir: Path
) -> None:
    run = write_run(tmp_path / "runs", "r1", STANDARD)
    with QueryDatabase.open(run) as db:
        assert db.execute("SELECT count(*) FROM results").rows == ((4,),)
        first = digest(run / CACHE_FILE)
        assert db.execute("SELECT count(*) FROM tool_calls").rows == ((8,),)
        assert digest(run / CACHE_FILE) != first  # tool_calls added to the cache
        with pytest.raises(QueryError, match="read-only"):
            db.execute("DELETE FROM tool_calls")
    assert [p.name for p in temp_dir.iterdir()] == []
    cache = sqlite3.connect(run / CACHE_FILE)
    assert cache.execute("SELECT count(*) FROM tool_calls").fetchone() == (8,)
    cache.close()
    with QueryDatabase.open(run) as db:  # from the cache: the same rows
        assert db.execute("SELECT count(*) FROM tool_calls").rows == ((8,),)


def test_a_working_copy_that_cannot_be_made_is_a_query_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = write_run(tmp_path / "runs", "r1", STANDARD)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(QueryError, match="temporary directory"):
        QueryDatabase.open(run)


def _dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_querys_working_copy_is_removed_by_the_next_query(
    tmp_path: Path, temp_dir: Path
) -> None:
    """A `wink query` killed with SIGKILL cannot remove its working copy (a copy of the
    run's tables, as large as they are); the next query removes the copies whose process
    is gone, and leaves a live process's and any other file alone."""
    run = write_run(tmp_path / "runs", "r1", STANDARD)
    dead = _dead_pid()
    stale = [
        temp_dir / f"wink-query-{dead}-abc123.sqlite",
        temp_dir / f"wink-query-{dead}-x.sqlite",
    ]
    for path in stale:
        path.write_bytes(b"tables of a killed query")
    (temp_dir / f"wink-query-{dead}-abc123.sqlite-journal").write_bytes(b"journal")
    import os

    live = temp_dir / f"wink-query-{os.getppid()}-def456.sqlite"  # a process still running
    live.write_bytes(b"tables of a running query")
    others = [temp_dir / "wink-query-notapid.sqlite", temp_dir / "unrelated.sqlite"]
    for path in others:
        path.write_bytes(b"someone else's")
    with QueryDatabase.open(run, cache=False) as db:
        assert db.execute("SELECT count(*) FROM results").rows == ((4,),)
        (mine,) = (p for p in temp_dir.iterdir() if p.name.startswith(f"wink-query-{os.getpid()}-"))
        assert mine.suffix == ".sqlite"
    assert sorted(p.name for p in temp_dir.iterdir()) == sorted(p.name for p in [live, *others])
