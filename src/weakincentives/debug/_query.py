"""Read-only SQL over eval runs and debug bundles: what `wink query TARGET "SQL"` runs.

A target is one of

- a run directory (`runs/<run-id>/` with `run.json` and `results.jsonl`): tables `runs`,
  `results`, `metrics`, `tool_calls`, `messages`, `logs` (see `_run_tables.py`);
- a directory of runs (`runs/`): the same tables over every run in it, told apart by
  their `run_id` column;
- a debug bundle (`<request_id>/<timestamp>.zip`): the tables of `bundle_tables`
  (`manifest`, `logs`, `eval`, `tool_calls`, ...). Checksums are verified first; a
  mismatch is reported in `QueryDatabase.warnings`, and the bundle is queried anyway.

The tables of runs are built in a SQLite database file of this process's own, its
*working copy* (in the temporary directory, removed on `close`), and the query runs
on a second connection that opens that file read-only (see `_readonly.py` for the
layers that keep it from writing anything). Rows are read from the file as the query
produces them (`QueryDatabase.stream`), so neither the tables nor the rows printed are
held in memory: `wink query -f json` over a million results peaks no higher than over
ten thousand. The run's cache (`.query-cache.sqlite`, see `_query_cache.py`) is copied
into the working copy when it is valid, and the working copy copied out to it after a
query fills more tables. A debug bundle is small: its tables are built in memory and
queried on a read-only in-memory copy. JSON columns hold JSON text: reach into them with
`json_extract` or `->>`.

Examples:
    >>> db = QueryDatabase.open("runs/20261120-233501-ab12cd")  # doctest: +SKIP
    >>> db.execute("SELECT experiment, avg(passed) FROM results GROUP BY experiment").rows
    ... # doctest: +SKIP
    (('baseline', 0.82), ('v2', 0.86))
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.debug._bundle import DebugBundle
from weakincentives.debug._query_cache import CACHE_FILE, copy_cache, publish_cache
from weakincentives.debug._query_stats import SQL_FUNCTIONS, register_stat_functions
from weakincentives.debug._readonly import (
    QueryResult,
    QueryStream,
    check_statement,
    readonly_copy,
    readonly_open,
    stream_statement,
    tables_read,
)
from weakincentives.debug._run_tables import (
    RUN_TABLES,
    SCORE_METRIC_COLUMNS,
    SCORE_METRICS,
    RunSource,
    RunTables,
    create_run_schema,
    is_run_dir,
)
from weakincentives.debug._tables import BUNDLE_TABLE_COLUMNS, bundle_tables
from weakincentives.errors import BundleError, QueryError
from weakincentives.evals import MANIFEST_FILE, RESULTS_FILE

__all__ = [
    "BUNDLE_EXAMPLES",
    "RUN_EXAMPLES",
    "ColumnInfo",
    "QueryDatabase",
    "TableInfo",
    "TargetKind",
    "query",
]

TargetKind = Literal["run", "runs", "bundle"]
"""What a query target is: one run directory, a directory of runs, or a debug bundle."""

_TARGET_HINT = (
    "pass a run directory (runs/<run-id>), a directory of runs (runs/) or a debug bundle (.zip)"
)

RUN_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Pass rate by experiment, with the report's 95% interval",
     "SELECT run_id, experiment, count(*) AS n, round(avg(passed), 3) AS pass_rate, "
     "round(pass_rate_low(passed, sample_id), 3) AS low, "
     "round(pass_rate_high(passed, sample_id), 3) AS high "
     "FROM results GROUP BY run_id, experiment ORDER BY pass_rate DESC"),
    ("Slowest samples",
     "SELECT sample_id, experiment, latency_ms FROM results "
     "ORDER BY latency_ms DESC LIMIT 10"),
    ("Failing tool calls",
     "SELECT name, count(*) AS failures, min(error) AS example FROM tool_calls "
     "WHERE NOT success GROUP BY name ORDER BY failures DESC"),
    ("Tokens by a metadata field",
     "SELECT json_extract(metadata, '$.topic') AS topic, count(*) AS n, "
     "sum(total_tokens) AS tokens, "
     "round(avg(total_tokens)) AS per_sample FROM results GROUP BY topic"),
    ("Errors by kind",
     "SELECT error_kind, count(*) AS n, min(error) AS example FROM results "
     "WHERE error IS NOT NULL GROUP BY error_kind"),
    ("Mean of each metric",
     "SELECT experiment, name, round(avg(value), 3) AS mean FROM metrics "
     "GROUP BY experiment, name"),
    ("Runs side by side",
     "SELECT run_id, status, results, passed, errors, created_at FROM runs ORDER BY run_id"),
    ("Warnings and errors logged",
     "SELECT sample_id, level, message FROM logs WHERE level IN ('WARNING', 'ERROR')"),
)  # fmt: skip
"""`(title, SQL)` examples for run targets, shown by `--schema`."""

BUNDLE_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Every log record", "SELECT * FROM logs"),
    ("Warnings and errors",
     "SELECT time, level, logger, message FROM logs WHERE level IN ('WARNING', 'ERROR')"),
    ("Tool calls", "SELECT seq, name, success, duration_ms, error FROM tool_calls"),
    ("Metrics", "SELECT name, value FROM metrics"),
    ("The score", "SELECT sample_id, experiment, score, passed, reason FROM eval"),
    ("Part of the request", "SELECT json_extract(json, '$.sample.id') AS sample FROM request"),
)  # fmt: skip
"""`(title, SQL)` examples for debug bundles, shown by `--schema`."""

_BUNDLE_DESCRIPTIONS: Mapping[str, str] = {
    "manifest": "the bundle: ids, status, error, timings, log counts",
    "files": "one row per file in the bundle, with size and sha256",
    "logs": "one row per log record captured while the sample ran",
    "eval": "the evaluation result (eval bundles only)",
    "metrics": "one row per metric, nested names joined with dots",
    "request": "the request, as JSON in the `json` column",
    "response": "the response, as JSON in the `json` column",
    "session_before": "one row per session slice value before the agent ran",
    "session_after": "one row per session slice value after the agent ran",
    "tool_calls": "one row per tool call in the after-snapshot",
}


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """One column of a queryable table."""

    name: str
    """Column name."""
    type: str
    """INTEGER, REAL, TEXT, JSON (text holding JSON) or ANY (mixed)."""
    description: str = ""
    """What the column holds (empty when undocumented)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TableInfo:
    """One queryable table."""

    name: str
    """Table name."""
    description: str
    """What one row is."""
    columns: tuple[ColumnInfo, ...]
    """The columns, in order."""
    rows: int | None = None
    """Row count, or None for a run table that no query has loaded yet."""


class QueryDatabase:
    """The tables of one target, loaded for read-only SQL.

    Open with `QueryDatabase.open(target)`; run statements with `execute`. Run tables
    are loaded the first time a statement reads them, into a working database file in
    the temporary directory. Close it (or use `with`) to remove that file and free the
    memory. Use it from one thread at a time.
    """

    def __init__(
        self,
        target: Path,
        kind: TargetKind,
        builder: sqlite3.Connection,
        *,
        runs: RunTables | None = None,
        probe: sqlite3.Connection | None = None,
        bundle_tables: tuple[TableInfo, ...] = (),
        cache_file: Path | None = None,
        signature: str = "",
        warnings: Sequence[str] = (),
        clock: Clock = SYSTEM_CLOCK,
        work: Path | None = None,
    ) -> None:
        self._target = target
        self._kind: TargetKind = kind
        self._builder = builder
        self._runs = runs
        self._bundle_tables = bundle_tables
        self._cache_file = cache_file
        self._signature = signature
        self._warnings = list(warnings)
        self._clock = clock
        self._probe = probe
        self._work = work
        self._reader: sqlite3.Connection | None = None

    @classmethod
    def open(
        cls, target: str | Path, *, cache: bool = True, clock: Clock = SYSTEM_CLOCK
    ) -> QueryDatabase:
        """Open a run directory, a directory of runs, or a debug bundle.

        Args:
            target: The path to query.
            cache: For runs, reuse and update `.query-cache.sqlite` next to the run (see
                `_query_cache.py`); False reads results.jsonl every time.
            clock: Clock for `execute(timeout=...)`.

        Raises:
            QueryError: the target does not exist, is not a run, runs or a readable bundle.
        """
        path = Path(target)
        kind, sources = _resolve(path)
        if kind == "bundle":
            builder = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            try:
                infos, warnings = _load_bundle(builder, path)
            except BaseException:
                builder.close()
                raise
            return cls(path, kind, builder, bundle_tables=infos, warnings=warnings, clock=clock)
        signature = " ".join(s.signature for s in sources)
        directory = path if path.is_dir() else path.parent
        cache_file = directory / CACHE_FILE if cache else None
        # The empty schema, to compile queries against (and to check a cache against).
        empty = sqlite3.connect(":memory:")
        try:
            create_run_schema(empty)
            expected = set(empty.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
            probe = register_stat_functions(readonly_copy(empty))
        finally:
            empty.close()
        work = _working_file()
        try:
            filled = frozenset[str]()
            if cache_file is not None:
                filled = copy_cache(cache_file, work, signature, expected)
            builder = _open_working(work, fresh=not filled)
        except BaseException:
            probe.close()
            _remove(work)
            raise
        return cls(
            path, kind, builder, runs=RunTables(builder, sources, filled), probe=probe,
            cache_file=cache_file, signature=signature, clock=clock, work=work,
        )  # fmt: skip

    @property
    def target(self) -> Path:
        """The path that was opened."""
        return self._target

    @property
    def kind(self) -> TargetKind:
        """What the target is."""
        return self._kind

    @property
    def warnings(self) -> tuple[str, ...]:
        """Problems found so far that did not stop the query (bad checksums, bad lines)."""
        extra = self._runs.warnings if self._runs is not None else []
        return (*self._warnings, *extra)

    @property
    def examples(self) -> tuple[tuple[str, str], ...]:
        """`(title, SQL)` example queries for this kind of target."""
        return BUNDLE_EXAMPLES if self._kind == "bundle" else RUN_EXAMPLES

    @property
    def functions(self) -> tuple[tuple[str, str], ...]:
        """`(signature, description)` of the statistics functions queries can call.

        `pass_rate_low` / `pass_rate_high` give the report's own pass-rate interval of a
        group (see `_query_stats.py`); every target has them.
        """
        return SQL_FUNCTIONS

    def tables(self) -> tuple[TableInfo, ...]:
        """The tables a query can read, with their columns."""
        if self._runs is None:
            return self._bundle_tables
        filled = self._runs.filled
        return tuple(
            TableInfo(
                name=spec.name,
                description=spec.description,
                columns=tuple(ColumnInfo(*column) for column in spec.columns),
                rows=self._count(spec.name) if spec.name in filled else None,
            )
            for spec in RUN_TABLES
        )

    def execute(
        self, sql: str, *, limit: int | None = None, timeout: float | None = None
    ) -> QueryResult:
        """Run one read-only statement.

        Args:
            sql: One SELECT (or WITH ... SELECT, VALUES, EXPLAIN, introspection PRAGMA).
            limit: Most rows to return; `QueryResult.truncated` says whether more matched.
            timeout: Seconds (by the clock) after which the query is stopped.

        Raises:
            QueryError: the SQL is not allowed, does not compile or fails; the message
                holds SQLite's and a hint.
        """
        with self.stream(sql, limit=limit, timeout=timeout) as stream:
            rows = tuple(stream)
        return QueryResult(columns=stream.columns, rows=rows, truncated=stream.truncated)

    def stream(
        self, sql: str, *, limit: int | None = None, timeout: float | None = None
    ) -> QueryStream:
        """`execute`, with the rows fetched as the returned stream is read.

        For output that may not fit in memory (`wink query -f json` over a large run):
        only a batch of rows is held at a time. Read the stream before the next query.

        Raises:
            QueryError: as `execute`; errors while reading rows come from the iteration.
        """
        text = check_statement(sql)
        if self._runs is not None and self._probe is not None:
            self._load(self._parts_read(text))
        if self._reader is None:
            if self._work is not None:
                self._reader = register_stat_functions(readonly_open(self._work))
            else:
                self._reader = register_stat_functions(readonly_copy(self._builder))
        expired: Callable[[], bool] | None = None
        if timeout is not None:
            deadline = self._clock.monotonic() + timeout
            expired = lambda: self._clock.monotonic() >= deadline  # noqa: E731
        return stream_statement(self._reader, text, limit=limit, expired=expired)

    def close(self) -> None:
        """Free the database and remove its working copy (idempotent)."""
        for conn in (self._reader, self._probe, self._builder):
            if conn is not None:
                conn.close()
        self._reader = self._probe = None
        if self._work is not None:
            _remove(self._work)
            self._work = None

    def __enter__(self) -> QueryDatabase:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _load(self, names: set[str]) -> None:
        assert self._runs is not None
        before = self._runs.filled
        try:
            changed = self._runs.ensure(names)
        except (sqlite3.Error, OSError) as exc:
            raise QueryError(f"cannot load the tables of {self._target}: {exc}") from exc
        if not changed:
            return
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        persisted = self._runs.filled - {"runs"}
        if self._cache_file is not None and persisted != before - {"runs"}:
            assert self._work is not None
            publish_cache(self._work, self._cache_file, self._signature, sorted(persisted))

    def _parts_read(self, sql: str) -> set[str]:
        """The run tables `sql` reads, plus `SCORE_METRICS` when it reads those columns."""
        assert self._probe is not None
        read = tables_read(self._probe, sql)
        names = set(read)
        if SCORE_METRIC_COLUMNS & read.get("results", set()):
            names.add(SCORE_METRICS)
        return names

    def _count(self, table: str) -> int:
        row = self._builder.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(row[0])


def query(
    target: str | Path, sql: str, *, limit: int | None = None, cache: bool = True
) -> QueryResult:
    """Open `target`, run one read-only statement, close it (see `QueryDatabase`).

    Raises:
        QueryError: a bad target or bad SQL.
    """
    with QueryDatabase.open(target, cache=cache) as db:
        return db.execute(sql, limit=limit)


_WORKING_PREFIX = "wink-query-"


def _working_file() -> Path:
    """A new empty file in the temporary directory, for a working copy.

    Its name holds this process's id (`wink-query-PID-XXXX.sqlite`): a query killed
    before it could remove its copy (SIGKILL, a power cut) leaves it behind, as large as
    the run's tables, and the next query removes the copies whose process is gone
    (`_remove_orphans`).

    Raises:
        QueryError: the temporary directory is missing or not writable.
    """
    try:
        handle, name = tempfile.mkstemp(prefix=f"{_WORKING_PREFIX}{os.getpid()}-", suffix=".sqlite")
    except OSError as exc:
        raise QueryError(
            f"cannot create the query's working database in the temporary directory "
            f"({exc}); set TMPDIR to a writable directory with room for the run's tables"
        ) from exc
    os.close(handle)
    path = Path(name)
    _remove_orphans(path.parent)
    return path


def _remove_orphans(directory: Path) -> None:
    """Remove the working copies in `directory` left by queries whose process is gone.

    A copy whose process id is alive (or cannot be checked) stays: a process that
    reused a dead query's id keeps that copy until it ends, which costs room, never a
    running query's file.
    """
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            name = entry.name
            if not name.startswith(_WORKING_PREFIX) or ".sqlite" not in name:
                continue
            pid = name[len(_WORKING_PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    Path(entry.path).unlink()


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (True when that cannot be told)."""
    if os.name != "posix":  # signal 0 asks on POSIX only (on Windows it would kill)
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # someone else's process, or no way to ask: keep its file
    return True


def _open_working(work: Path, *, fresh: bool) -> sqlite3.Connection:
    """The writable connection that builds the tables in `work` (the schema made if fresh).

    The file is private and removed on close, so nothing is synced to disk; the rollback
    journal is kept in memory (a failed fill still rolls back: `RunTables.ensure`). It
    holds the pages a fill changes that existed before it, a few: fills append.
    """
    conn = sqlite3.connect(work, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=MEMORY")
        conn.execute("PRAGMA synchronous=OFF")
        if fresh:
            create_run_schema(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _remove(work: Path) -> None:
    for name in (work.name, f"{work.name}-journal", f"{work.name}-wal", f"{work.name}-shm"):
        with contextlib.suppress(OSError):
            (work.parent / name).unlink()


def _resolve(path: Path) -> tuple[TargetKind, tuple[RunSource, ...]]:
    if not path.exists():
        raise QueryError(f"{path}: no such file or directory; {_TARGET_HINT}")
    if path.is_file():
        if path.name in (RESULTS_FILE, MANIFEST_FILE):
            return "run", (RunSource.scan(path.parent),)
        return "bundle", ()
    if is_run_dir(path):
        return "run", (RunSource.scan(path),)
    runs = sorted(p for p in path.iterdir() if p.is_dir() and is_run_dir(p))
    if not runs:
        raise QueryError(
            f"{path} is not a run directory (no {MANIFEST_FILE} or {RESULTS_FILE}) and holds "
            f"no run directories; {_TARGET_HINT}"
        )
    return "runs", tuple(RunSource.scan(p) for p in runs)


def _load_bundle(conn: sqlite3.Connection, path: Path) -> tuple[tuple[TableInfo, ...], list[str]]:
    warnings: list[str] = []
    try:
        bundle = DebugBundle.open(path)
        try:
            bundle.verify()
        except BundleError as exc:
            warnings.append(f"{exc}; querying it anyway")
        tables = bundle_tables(bundle)
    except BundleError as exc:
        raise QueryError(f"cannot query {path}: {exc}; {_TARGET_HINT}") from exc
    infos = []
    for name, columns in BUNDLE_TABLE_COLUMNS.items():
        rows = tables.get(name, [])
        types = [_sql_type(row.get(c) for row in rows) for c in columns]
        ddl = ", ".join(
            f'"{c}" {t}' if t != "ANY" else f'"{c}"' for c, t in zip(columns, types, strict=True)
        )
        conn.execute(f'CREATE TABLE "{name}" ({ddl})')
        marks = ", ".join("?" * len(columns))
        conn.executemany(
            f'INSERT INTO "{name}" VALUES ({marks})',
            [tuple(row.get(c) for c in columns) for row in rows],
        )
        infos.append(
            TableInfo(
                name=name,
                description=_BUNDLE_DESCRIPTIONS.get(name, ""),
                columns=tuple(ColumnInfo(c, t) for c, t in zip(columns, types, strict=True)),
                rows=len(rows),
            )
        )
    return tuple(infos), warnings


def _sql_type(values: Iterable[Any]) -> str:
    """The declared type for a column holding `values` (ANY when mixed or all NULL)."""
    kinds = {type(v) for v in values if v is not None}
    if kinds and kinds <= {int, bool}:
        return "INTEGER"
    if kinds and kinds <= {int, bool, float}:
        return "REAL"
    if kinds == {str}:
        return "TEXT"
    return "ANY"
