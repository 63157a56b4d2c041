"""A cache of the tables `wink query` built for a run, so the next query starts at once.

The cache is a SQLite file, `.query-cache.sqlite`, in the run directory (or in the
directory of runs queried). It holds the tables filled so far plus a small meta table
with the source signature (size, mtime and inode of every `run.json` and
`results.jsonl`) and the names of the filled tables. A cache whose signature differs
from the runs' is ignored and rewritten: appending one result invalidates it.

Measured on 100,000 results (`bench/bench_query.py`): building `results` from
results.jsonl takes about 0.8 s, loading it from a 21 MB cache about 0.03 s; writing the
cache adds little to the first query. The names stored include `results.metrics` once
the `reward` and `metrics` columns are filled (see `_run_tables.SCORE_METRICS`).

The file is written atomically (temporary file + rename) and only by this process's own
code, never by the user's SQL (which runs on a separate read-only copy). Writing is
best-effort: a read-only run directory just means no cache. A cache is only used when
its schema is exactly the one this code creates, so an old or planted file never adds
views, triggers or tables to what the user's query sees.

`wink query` keeps its tables in a database file, its working copy (see `_query.py`),
and moves data between that file and the cache file by copying files (`copy_cache`,
`publish_cache`): nothing is read into memory, so a cache of a million results costs
no more memory than one of a thousand. The viewer keeps its index in memory and uses
`load_cache` / `store_cache`, which read and write the whole database at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
from collections.abc import Iterable
from pathlib import Path

__all__ = ["CACHE_FILE", "copy_cache", "load_cache", "publish_cache", "store_cache"]

CACHE_FILE = ".query-cache.sqlite"
"""Name of the cache file in a queried run directory (or directory of runs)."""

_META = "wink_query_cache"
_VERSION = "1"
_log = logging.getLogger(__name__)


Schema = set[tuple[str, str, str, str | None]]


def _schema(conn: sqlite3.Connection) -> Schema:
    return set(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))


def copy_cache(path: Path, work: Path, signature: str, expected: Schema) -> frozenset[str]:
    """Copy the cache at `path` to the database file `work` when it is valid.

    Valid means as `load_cache`: its schema is exactly `expected` (what the code creates)
    plus the meta table, and its signature is `signature`. The checks run on the copy,
    so what was checked is what is used; the meta table is then dropped from the copy.
    On any other outcome `work` is left empty (0 bytes): a new database.

    Returns:
        The tables the cache holds (empty when there is no valid cache).
    """
    try:
        shutil.copyfile(path, work)
    except OSError:
        work.write_bytes(b"")
        return frozenset()
    conn = sqlite3.connect(work, isolation_level=None)
    tables: frozenset[str] = frozenset()
    try:
        conn.execute("PRAGMA trusted_schema=OFF")
        conn.execute("PRAGMA journal_mode=MEMORY")
        schema = {row for row in _schema(conn) if row[2] != _META}
        meta = dict(conn.execute(f"SELECT key, value FROM {_META}").fetchall())
        if (
            schema == expected
            and meta.get("version") == _VERSION
            and meta.get("signature") == signature
        ):
            conn.execute(f"DROP TABLE {_META}")
            tables = frozenset(name for name in meta.get("tables", "").split(",") if name)
    except sqlite3.Error as exc:
        _log.debug("ignoring unreadable query cache %s: %s", path, exc)
    finally:
        conn.close()
    if not tables:
        work.write_bytes(b"")
    return tables


def publish_cache(work: Path, path: Path, signature: str, tables: Iterable[str]) -> bool:
    """Write the database file `work` to `path` as a cache of `tables` for `signature`.

    `work` must hold no open transaction. It is copied next to `path`, the meta table is
    added to the copy, and the copy is renamed over `path` (atomic: a reader sees the
    old cache or the new one).

    Returns:
        Whether the cache was written (False when the directory is not writable).
    """
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(work, tmp)
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=MEMORY")
            conn.execute("BEGIN")
            conn.execute(f"CREATE TABLE {_META} (key TEXT PRIMARY KEY, value TEXT)")
            conn.executemany(
                f"INSERT INTO {_META} VALUES (?, ?)",
                [("version", _VERSION), ("signature", signature), ("tables", ",".join(tables))],
            )
            conn.execute("COMMIT")
        finally:
            conn.close()
        tmp.replace(path)
    except (OSError, sqlite3.Error) as exc:
        _log.debug("cannot write query cache %s: %s", path, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def load_cache(conn: sqlite3.Connection, path: Path, signature: str) -> frozenset[str]:
    """Replace `conn`'s main database with the cache at `path` when it is valid.

    `conn` must hold the freshly created (empty) schema; the cache is used only when its
    schema is exactly that one plus the meta table and its signature is `signature`.

    Returns:
        The tables the cache holds (empty when there is no valid cache).
    """
    try:
        data = path.read_bytes()
    except OSError:
        return frozenset()
    expected = _schema(conn)
    probe = sqlite3.connect(":memory:")
    try:
        probe.deserialize(data)
        probe.execute("PRAGMA trusted_schema=OFF")
        probe.execute("PRAGMA query_only=ON")
        schema = {row for row in _schema(probe) if row[2] != _META}
        meta = dict(probe.execute(f"SELECT key, value FROM {_META}").fetchall())
    except sqlite3.Error as exc:
        _log.debug("ignoring unreadable query cache %s: %s", path, exc)
        return frozenset()
    finally:
        probe.close()
    if schema != expected or meta.get("version") != _VERSION:
        return frozenset()
    if meta.get("signature") != signature:
        return frozenset()
    conn.deserialize(data)
    conn.execute(f"DROP TABLE {_META}")
    return frozenset(name for name in meta.get("tables", "").split(",") if name)


def store_cache(
    conn: sqlite3.Connection, path: Path, signature: str, tables: Iterable[str]
) -> bool:
    """Write `conn`'s main database to `path` as a cache of `tables` for `signature`.

    Returns:
        Whether the cache was written (False when the directory is not writable).
    """
    conn.execute(f"CREATE TABLE {_META} (key TEXT PRIMARY KEY, value TEXT)")
    try:
        conn.executemany(
            f"INSERT INTO {_META} VALUES (?, ?)",
            [("version", _VERSION), ("signature", signature), ("tables", ",".join(tables))],
        )
        data = conn.serialize()
    finally:
        conn.execute(f"DROP TABLE {_META}")
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as exc:
        _log.debug("cannot write query cache %s: %s", path, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True
