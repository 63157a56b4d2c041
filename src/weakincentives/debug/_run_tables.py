"""The SQL tables `wink query` builds from run directories, and how they are filled.

A run directory (`run.json` + `results.jsonl`, written by `weakincentives.evals.RunStore`)
becomes the tables of `RUN_TABLES` (`_run_schema.py`). Every table has a `run_id` column
(the run directory's name), so a directory of runs loads into the same tables.

`results` holds one row per `(run_id, sample_id, experiment, epoch)`: when a key has
several lines (a retried error, a duplicate delivery) the last line wins, as in
`weakincentives.evals.latest_results`. `metrics`, `tool_calls`, `messages` and `logs`
hold the details of those winning results only.

**Speed and memory.** Lines go through the loader the viewer uses too (`_run_loader.py`):
read in batches into a temporary table, parsed by SQLite, columns pulled out by one
`INSERT ... SELECT` per batch. `wink query` keeps the tables in a database file (see
`_query.py`), so memory grows with neither the tables nor results.jsonl.
On 100,000 results (87 MB, `bench/bench_query.py`) `results` builds in about 0.8 s, and
an aggregate over it takes milliseconds. Tables are filled when a query first reads
them (`RunTables.ensure`): a query on `results` never pays for `messages`, and `logs`
(which opens every debug bundle the results point to) costs nothing unless asked for.
The detail tables read the winning lines of results.jsonl again rather than keeping
every line in memory. So do the `reward` and `metrics` columns of `results`
(`SCORE_METRICS`), which cost a third of `results`: they are filled when a query reads
them, and hold NULL until then (no query sees that: one that reads them fills them).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weakincentives import serde
from weakincentives.debug._bundle import DebugBundle
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
from weakincentives.debug._run_schema import (
    KEY,
    RUN_TABLES,
    TableSpec,
    create_run_schema,
    indexes_built_after,
    provenance_columns,
)
from weakincentives.errors import BundleError, RunStoreError
from weakincentives.evals import MANIFEST_FILE, RESULTS_FILE, RunStore

__all__ = [
    "RUN_TABLES",
    "SCORE_METRICS",
    "SCORE_METRIC_COLUMNS",
    "RunSource",
    "RunTables",
    "TableSpec",
    "create_run_schema",
    "is_run_dir",
]


_MAX_LISTED = 3


_RESULT_FIELDS = (
    "sample_id", "experiment", "epoch", "request_id", "session_id", "passed", "score", "reason",
    "latency_ms", "input_tokens", "output_tokens", "cached_tokens", "cost_usd",
    "judge_cost_usd", "error_kind", "error", "metadata", "output", "input", "expected",
    "bundle_path", "delivery_count",
)  # fmt: skip
_IS_RESULT = "typeof(sample_id) = 'text' AND typeof(experiment) = 'text'"

SCORE_METRICS = "results.metrics"
"""The `reward` and `metrics` columns of `results`, filled apart from the rest.

They cost a third of loading `results` and few queries read them, so `RunTables`
fills them only when asked (`ensure([SCORE_METRICS])`, which `QueryDatabase` does when
a query reads one of `SCORE_METRIC_COLUMNS`); until then they hold NULL.
"""
SCORE_METRIC_COLUMNS = frozenset({"reward", "metrics"})
"""The columns of `results` that `SCORE_METRICS` fills."""


def _fill_results_sql(*, score_metrics: bool) -> str:
    fields = (*_RESULT_FIELDS, "score_metrics") if score_metrics else _RESULT_FIELDS
    reward, metrics = (REWARD, METRICS) if score_metrics else ("NULL", "NULL")
    return f"""
INSERT INTO results
SELECT :run_id, sample_id, experiment, epoch, request_id, session_id,
    error IS NULL AND passed, score, reason, {reward},
    latency_ms, input_tokens, output_tokens, cached_tokens, input_tokens + output_tokens,
    cost_usd, judge_cost_usd, error_kind, error, metadata, output, input, expected, {metrics},
    bundle_path,
    delivery_count, line
FROM ({fields_select(fields)})
WHERE {_IS_RESULT}
"""


_FILL_RESULTS = _fill_results_sql(score_metrics=False)
_FILL_RESULTS_ALL = _fill_results_sql(score_metrics=True)
_BAD_LINES = f"""
SELECT line, {COMPLETE} FROM {STAGE} WHERE line NOT IN (
    SELECT line FROM ({fields_select(("sample_id", "experiment"))}) WHERE {_IS_RESULT})
ORDER BY line
"""
_WINNERS = "temp.wink_winners"
_KEY_SELECT = "res.run_id, res.sample_id, res.experiment, res.epoch"


def _fill_detail(table: str, path: str, columns: str) -> str:
    """SQL: one row of `table` per element of the JSON array at `path` of a winning line.

    The row holds the result's key columns, then `columns`: SQL over the element `v` and
    its position `seq`.
    """
    # LIMIT -1 and the outer WHERE keep SQLite from flattening the subquery, so each
    # element is rendered to `v` once and parsed once, not once per column.
    return f"""
INSERT INTO {table} SELECT run_id, sample_id, experiment, epoch, {columns}
FROM (SELECT {_KEY_SELECT}, e.key AS seq, e.value AS v
      FROM {STAGE} AS s CROSS JOIN {_WINNERS} AS w ON w.line = s.line
          CROSS JOIN results AS res ON res.rowid = w.rid, json_each(s.j, '{path}') AS e
      LIMIT -1)
WHERE seq IS NOT NULL
"""


_FILL_SCORE_METRICS = f"""
UPDATE results SET reward = {REWARD}, metrics = {METRICS}
FROM (SELECT w.rid AS rid, s.j -> '$.score.metrics' AS score_metrics
      FROM {STAGE} AS s CROSS JOIN {_WINNERS} AS w ON w.line = s.line LIMIT -1) AS x
WHERE results.rowid = x.rid
"""
_FILL_DETAILS = {
    "metrics": _fill_detail(
        "metrics", "$.score.metrics",
        "v ->> '$.name', v ->> '$.value', coalesce(v ->> '$.weight', 0.0), v -> '$.metadata'",
    ),
    "tool_calls": _fill_detail(
        "tool_calls", "$.tool_calls",
        "seq, v ->> '$.name', v -> '$.params', v ->> '$.message', v ->> '$.success', "
        "v ->> '$.duration_ms', v ->> '$.error'",
    ),
    "messages": _fill_detail(
        "messages", "$.messages",
        "seq, v ->> '$.role', v ->> '$.content', v -> '$.tool_calls', v ->> '$.tool_call_id', "
        "v ->> '$.name'",
    ),
}  # fmt: skip
_LOG_FIELDS = ("time", "level", "logger", "message", "thread", "exception")


def is_run_dir(path: Path) -> bool:
    """Whether `path` is a run directory (holds run.json or results.jsonl)."""
    return (path / MANIFEST_FILE).is_file() or (path / RESULTS_FILE).is_file()


@dataclass(frozen=True, slots=True)
class RunSource:
    """One run directory as it was when the query opened it."""

    run_id: str
    """The directory's name."""
    path: Path
    """The run directory."""
    results_size: int
    """Bytes of results.jsonl read (later appends are not part of this snapshot)."""
    signature: str
    """Size, mtime and inode of run.json and results.jsonl: the cache key."""

    @classmethod
    def scan(cls, path: Path) -> RunSource:
        """Record the state of the run directory at `path`."""
        parts, size = [], 0
        for name in (MANIFEST_FILE, RESULTS_FILE):
            try:
                st = (path / name).stat()
            except FileNotFoundError:
                parts.append(f"{name}:-")
                continue
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}")
            if name == RESULTS_FILE:
                size = st.st_size
        return cls(path.name, path, size, f"{path.name}[{' '.join(parts)}]")


class RunTables:
    """Fills the run tables of one (writable, private) connection as queries need them.

    Args:
        conn: The connection holding the tables (see `create_run_schema`).
        sources: The runs to load.
        filled: Tables already holding their rows (loaded from a cache).
    """

    def __init__(
        self, conn: sqlite3.Connection, sources: Iterable[RunSource], filled: Iterable[str] = ()
    ) -> None:
        self._conn = conn
        self._sources = tuple(sources)
        self._filled = set(filled)
        self.warnings: list[str] = []
        """Problems met while loading (skipped lines, missing bundles), for the user."""

    @property
    def filled(self) -> frozenset[str]:
        """Tables holding their rows."""
        return frozenset(self._filled)

    def ensure(self, names: Iterable[str]) -> bool:
        """Fill the tables (and `SCORE_METRICS`) among `names` not filled yet; True if any.

        All or nothing: the filling runs in one transaction, and a failure leaves the
        tables (and this object) as they were.

        Raises:
            sqlite3.Error: SQLite failed while filling.
            OSError: a results file could not be read.
        """
        wanted = set(names)
        order = [SCORE_METRICS, *(spec.name for spec in RUN_TABLES)]
        missing = [name for name in order if name in wanted and name not in self._filled]
        if not missing:
            return False
        filled, warned = set(self._filled), len(self.warnings)
        prepare(self._conn)
        self._conn.execute("BEGIN")
        try:
            self._fill(missing)
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            self._filled = filled
            del self.warnings[warned:]
            raise
        return True

    def _fill(self, missing: list[str]) -> None:
        conn = self._conn
        if "results" not in self._filled:
            with indexes_built_after(conn, ["results"]):
                self._fill_results(score_metrics=SCORE_METRICS in missing)
            delete_superseded(conn, "results", KEY)  # with the key's index built
        details = [name for name in missing if name in _FILL_DETAILS]
        statements = [_FILL_DETAILS[name] for name in details]
        if SCORE_METRICS in missing and SCORE_METRICS not in self._filled:
            # `results` was filled without them, by an earlier query or from a cache.
            statements.append(_FILL_SCORE_METRICS)
        if statements:
            with indexes_built_after(conn, details):
                self._reread_winners(statements)
        for name in missing:
            if name == "logs":
                self._fill_logs()
            elif name == "runs":
                self._fill_runs()
            self._filled.add(name)

    # -- results.jsonl -------------------------------------------------------------------

    def _fill_results(self, *, score_metrics: bool) -> None:
        conn = self._conn
        fill = _FILL_RESULTS_ALL if score_metrics else _FILL_RESULTS
        bad: list[tuple[Path, int, bool]] = []
        for source in self._sources:
            path = source.path / RESULTS_FILE
            if not path.exists():
                continue
            params = {"run_id": source.run_id}
            for batch in stage_lines(conn, path, limit=source.results_size):
                if conn.execute(fill, params).rowcount < batch.lines:
                    bad.extend((path, line, bool(done)) for line, done in conn.execute(_BAD_LINES))
        self._warn_bad_lines(bad)
        self._filled.add("results")
        if score_metrics:
            self._filled.add(SCORE_METRICS)

    def _warn_bad_lines(self, bad: list[tuple[Path, int, bool]]) -> None:
        cut = [(path, line) for path, line, complete in bad if not complete]
        corrupt = [(path, line) for path, line, complete in bad if complete]
        for path, line in cut:
            self.warnings.append(
                f"{path}:{line}: skipped a truncated last line (the writer was cut "
                "off mid-line; resuming the run re-runs that sample)"
            )
        if corrupt:
            listed = ", ".join(f"{p}:{n}" for p, n in corrupt[:_MAX_LISTED])
            more = f" and {len(corrupt) - _MAX_LISTED} more" if len(corrupt) > _MAX_LISTED else ""
            self.warnings.append(
                f"skipped {len(corrupt)} line(s) that are not results (invalid JSON or no "
                f"sample_id/experiment_name): {listed}{more}"
            )

    def _reread_winners(self, statements: list[str]) -> None:
        """Read the lines `results` holds again and run `statements` on each batch.

        The statements read the staged lines joined to `results` through `_WINNERS`
        (line number -> results rowid, for the run being read).
        """
        conn = self._conn
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_WINNERS.split('.')[1]} "
                     "(line INTEGER PRIMARY KEY, rid INTEGER NOT NULL)")  # fmt: skip
        for source in self._sources:
            conn.execute(f"DELETE FROM {_WINNERS}")
            conn.execute(
                f"INSERT INTO {_WINNERS} SELECT line, rowid FROM results WHERE run_id = ?",
                (source.run_id,),
            )
            lines = {row[0] for row in conn.execute(f"SELECT line FROM {_WINNERS}")}
            if not lines:
                continue
            path = source.path / RESULTS_FILE
            for _ in stage_lines(conn, path, limit=source.results_size, only=lines):
                for statement in statements:
                    conn.execute(statement)
        conn.execute(f"DELETE FROM {_WINNERS}")

    # -- runs and logs -------------------------------------------------------------------

    def _fill_runs(self) -> None:
        counts = {
            row[0]: row[1:]
            for row in self._conn.execute(
                "SELECT run_id, count(*), total(passed), total(error IS NOT NULL) "
                "FROM results GROUP BY run_id"
            )
        }
        rows = [self._run_row(s, counts.get(s.run_id, (0, 0, 0))) for s in self._sources]
        self._conn.execute("DELETE FROM runs")
        width = len(RUN_TABLES[0].columns)
        self._conn.executemany(f"INSERT INTO runs VALUES ({', '.join('?' * width)})", rows)

    def _run_row(self, source: RunSource, counts: tuple[int, float, float]) -> tuple[Any, ...]:
        results, passed, errors = counts[0], int(counts[1]), int(counts[2])
        tally = (results, passed, results - passed - errors, errors)
        try:
            handle = RunStore(source.path.parent).open(source.path)
            status = handle.status
            manifest = handle.manifest
        except RunStoreError as exc:
            if (source.path / MANIFEST_FILE).exists():
                self.warnings.append(f"runs: {exc}")
            blank = (None,) * (len(RUN_TABLES[0].columns) - 10)
            return (source.run_id, str(source.path), None, None, None, None, *tally, *blank)
        return (
            source.run_id, str(source.path), status, manifest.created_at.isoformat(),
            manifest.updated_at.isoformat(), manifest.counts.expected, *tally,
            json.dumps(serde.dump(manifest.fingerprint), ensure_ascii=False),
            json.dumps(dict(manifest.config), ensure_ascii=False),
            *provenance_columns(manifest.provenance),
        )  # fmt: skip

    def _fill_logs(self) -> None:
        query = f"SELECT {', '.join(KEY)}, bundle_path FROM results WHERE bundle_path IS NOT NULL"
        rows: list[tuple[Any, ...]] = []
        missing: list[str] = []
        paths = {s.run_id: s.path for s in self._sources}
        for *key, bundle_path in self._conn.execute(query).fetchall():
            found = _locate_bundle(bundle_path, paths[key[0]])
            if found is None:
                missing.append(bundle_path)
                continue
            try:
                bundle = DebugBundle.open(found)
                records = bundle.logs
            except BundleError as exc:
                self.warnings.append(f"logs: skipped a bundle: {exc}")
                continue
            try:
                bundle.verify()
            except BundleError as exc:
                self.warnings.append(f"logs: {exc}; its logs are loaded anyway")
            rows.extend(
                (*key, bundle_path, seq, *(_scalar(rec.get(f)) for f in _LOG_FIELDS))
                for seq, rec in enumerate(records)
            )
        if missing:
            self.warnings.append(
                f"logs: {len(missing)} debug bundle(s) named in results were not found "
                f"(first: {missing[0]}); run the query from the directory the eval ran in"
            )
        self._conn.executemany(f"INSERT INTO logs VALUES ({', '.join('?' * 12)})", rows)


def _locate_bundle(bundle_path: str, run_dir: Path) -> Path | None:
    """The bundle file: absolute as is; relative to the cwd, the run or the runs' parents."""
    path = Path(bundle_path)
    bases = (Path.cwd(), run_dir, run_dir.parent, run_dir.parent.parent)
    candidates = [path] if path.is_absolute() else [base / path for base in bases]
    return next((c for c in candidates if c.is_file()), None)


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float):
        return value
    return json.dumps(value, ensure_ascii=False)
