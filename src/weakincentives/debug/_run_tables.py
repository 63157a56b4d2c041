"""The SQL tables `wink query` builds from run directories, and how they are filled.

A run directory (`run.json` + `results.jsonl`, written by `weakincentives.evals.RunStore`)
becomes the tables of `RUN_TABLES`. Every table has a `run_id` column (the run directory's
name), so a directory of runs loads into the same tables.

`results` holds one row per `(run_id, sample_id, experiment, epoch)`: when a key has
several lines (a retried error, a duplicate delivery) the last line wins, as in
`weakincentives.evals.latest_results`. `metrics`, `tool_calls`, `messages` and `logs`
hold the details of those winning results only.

**Speed and memory.** SQLite parses the JSON, not Python: each line goes into a
temporary `raw` table as text and `INSERT ... SELECT` statements pull the columns out
with `->>` (SQLite reuses the parse of a line within a statement). On 100,000 results
(87 MB) `results` builds in about 1.5 s, a little faster than `json.loads` per line plus
`executemany` (`bench/bench_query.py`); about a third of it is the `reward` and `metrics`
columns. `raw` lives in SQLite's temp database, which spills to an anonymous temporary
file past a small page cache, so memory grows with the tables, not with results.jsonl.
Tables are filled when a query first reads them (`RunTables.ensure`): a query on
`results` never pays for `messages`, and `logs` (which opens every debug bundle the
results point to) costs nothing unless asked for.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weakincentives import serde
from weakincentives.debug._bundle import DebugBundle
from weakincentives.errors import BundleError, RunStoreError
from weakincentives.evals import MANIFEST_FILE, RESULTS_FILE, RunStore

__all__ = [
    "RUN_TABLES",
    "RunSource",
    "RunTables",
    "TableSpec",
    "create_run_schema",
    "is_run_dir",
]


_MAX_LISTED = 3


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One table: its columns (name, type as shown, description) and indexes."""

    name: str
    """Table name."""
    description: str
    """What one row is."""
    columns: tuple[tuple[str, str, str], ...]
    """`(name, type, description)`; type `JSON` is stored as TEXT holding JSON."""
    indexes: tuple[tuple[str, ...], ...] = ()
    """Column lists to index."""

    def create_sql(self) -> list[str]:
        """CREATE TABLE and CREATE INDEX statements for this table."""
        cols = ", ".join(f"{n} {'TEXT' if t == 'JSON' else t}" for n, t, _ in self.columns)
        statements = [f"CREATE TABLE {self.name} ({cols})"]
        for i, index in enumerate(self.indexes):
            statements.append(f"CREATE INDEX {self.name}_{i} ON {self.name} ({', '.join(index)})")
        return statements


_KEY_COLUMNS = (
    ("run_id", "TEXT", "Run directory name (the id `RunStore` gave the run)."),
    ("sample_id", "TEXT", "Sample id."),
    ("experiment", "TEXT", "Experiment name."),
    ("epoch", "INTEGER", "Repetition index (pass@k), 0 for the first."),
)
_KEY = ("run_id", "sample_id", "experiment", "epoch")

RUN_TABLES: tuple[TableSpec, ...] = (
    TableSpec("runs", "one row per run", (
        _KEY_COLUMNS[0],
        ("path", "TEXT", "The run directory."),
        ("status", "TEXT", "running, complete or interrupted (a dead writer reads interrupted)."),
        ("created_at", "TEXT", "When the run was created (ISO 8601)."),
        ("updated_at", "TEXT", "When run.json was last written."),
        ("expected", "INTEGER", "Results planned (samples x experiments x epochs), if known."),
        ("results", "INTEGER", "Distinct (sample, experiment, epoch) results recorded."),
        ("passed", "INTEGER", "Results that passed."),
        ("failed", "INTEGER", "Results scored but not passed."),
        ("errors", "INTEGER", "Results that ended in an error (cancelled included)."),
        ("fingerprint", "JSON", "What must match to resume: dataset hash, experiments, ..."),
        ("config", "JSON", "Run settings: concurrency, timeouts, ..."),
    )),
    TableSpec("results", "one row per sample x experiment x epoch (the last line wins)", (
        *_KEY_COLUMNS,
        ("request_id", "TEXT", "Id of the EvalRequest."),
        ("passed", "INTEGER", "1 when scored and passed; errors never pass."),
        ("score", "REAL", "Score value (0 for errors)."),
        ("reason", "TEXT", "Why the score: what was found and expected."),
        ("reward", "REAL", "Weighted mean of the metrics with weight > 0 (0 when none)."),
        ("latency_ms", "REAL", "Time to run the agent on the sample."),
        ("input_tokens", "INTEGER", "Prompt tokens."),
        ("output_tokens", "INTEGER", "Completion tokens."),
        ("cached_tokens", "INTEGER", "Prompt tokens served from the provider's cache."),
        ("total_tokens", "INTEGER", "input_tokens + output_tokens."),
        ("error_kind", "TEXT", "agent, timeout, evaluator, judge, ... (NULL when scored)."),
        ("error", "TEXT", "Error message (NULL when scored)."),
        ("metadata", "JSON", "The sample's metadata: json_extract(metadata, '$.topic')."),
        ("output", "JSON", "The agent's output (NULL when none)."),
        ("metrics", "JSON", "Metric name -> value: json_extract(metrics, '$.correct')."),
        ("bundle_path", "TEXT", "Debug bundle of the sample, if one was written."),
        ("delivery_count", "INTEGER", "Deliveries of the request before this result (1 = first)."),
        ("line", "INTEGER", "Line of results.jsonl this row comes from."),
    ), (_KEY, ("experiment", "passed"), ("sample_id",))),
    TableSpec("metrics", "one row per metric of a result's score", (
        *_KEY_COLUMNS,
        ("name", "TEXT", "Metric name."),
        ("value", "REAL", "Measured value."),
        ("weight", "REAL", "Weight in the reward (0 = tracked only)."),
        ("metadata", "JSON", "The metric's metadata."),
    ), (_KEY, ("name",))),
    TableSpec("tool_calls", "one row per tool call a result recorded", (
        *_KEY_COLUMNS,
        ("seq", "INTEGER", "Position of the call in the sample, from 0."),
        ("name", "TEXT", "Tool name."),
        ("params", "JSON", "Arguments as decoded."),
        ("message", "TEXT", "What the tool returned to the model."),
        ("success", "INTEGER", "1 when the call succeeded."),
        ("duration_ms", "REAL", "Time in the handler."),
        ("error", "TEXT", "Exception or validation error, if any."),
    ), (_KEY, ("name",))),
    TableSpec("messages", "one row per transcript message a result recorded", (
        *_KEY_COLUMNS,
        ("seq", "INTEGER", "Position in the transcript, from 0."),
        ("role", "TEXT", "system, user, assistant or tool."),
        ("content", "TEXT", "Message text (NULL for a turn with only tool calls)."),
        ("tool_calls", "JSON", "Tool calls requested: [{id, name, arguments}]."),
        ("tool_call_id", "TEXT", "For a tool message: the call it answers."),
        ("name", "TEXT", "For a tool message: the tool's name."),
    ), (_KEY,)),
    TableSpec("logs", "one row per log record in the debug bundles the results point to", (
        *_KEY_COLUMNS,
        ("bundle_path", "TEXT", "The bundle, as written in results.bundle_path."),
        ("seq", "INTEGER", "Position of the record in the bundle, from 0."),
        ("time", "TEXT", "When the record was emitted (ISO 8601)."),
        ("level", "TEXT", "DEBUG, INFO, WARNING, ERROR or CRITICAL."),
        ("logger", "TEXT", "Logger name."),
        ("message", "TEXT", "Formatted message."),
        ("thread", "TEXT", "Thread name."),
        ("exception", "TEXT", "Formatted traceback, if any."),
    ), (_KEY, ("level",))),
)  # fmt: skip
"""Every table of a run target, in the order `--schema` shows them."""

# `->>` reuses the parse json_valid made; json_type would parse the line again.
_VALID_LINE = (
    "json_valid(j) AND typeof(j ->> '$.sample_id') = 'text' "
    "AND typeof(j ->> '$.experiment_name') = 'text'"
)
_FILL_RESULTS = f"""
INSERT INTO results
SELECT run_id, sample_id, experiment, epoch, request_id, passed, score, reason,
    coalesce((SELECT sum((m.value ->> '$.value') * (m.value ->> '$.weight'))
                     / sum(m.value ->> '$.weight')
              FROM json_each(ms) AS m WHERE m.value ->> '$.weight' > 0), 0.0),
    latency_ms, input_tokens, output_tokens, cached_tokens, input_tokens + output_tokens,
    error_kind, error, metadata, output,
    (SELECT json_group_object(m.value ->> '$.name', m.value -> '$.value')
     FROM json_each(ms) AS m),
    bundle_path, delivery_count, line
FROM (
    -- LIMIT -1 keeps SQLite from inlining this subquery, so each line's metrics
    -- are extracted once and the outer json_each calls parse only that small array.
    SELECT r.run_id AS run_id, j ->> '$.sample_id' AS sample_id,
        j ->> '$.experiment_name' AS experiment, coalesce(j ->> '$.epoch', 0) AS epoch,
        j ->> '$.request_id' AS request_id,
        (j ->> '$.error' IS NULL AND coalesce(j ->> '$.score.passed', 0)) AS passed,
        j ->> '$.score.value' AS score, j ->> '$.score.reason' AS reason,
        j ->> '$.latency_ms' AS latency_ms,
        coalesce(j ->> '$.usage.input_tokens', 0) AS input_tokens,
        coalesce(j ->> '$.usage.output_tokens', 0) AS output_tokens,
        coalesce(j ->> '$.usage.cached_tokens', 0) AS cached_tokens,
        j ->> '$.error_kind' AS error_kind, j ->> '$.error' AS error,
        j -> '$.metadata' AS metadata, nullif(j -> '$.output', 'null') AS output,
        j -> '$.score.metrics' AS ms, j ->> '$.bundle_path' AS bundle_path,
        coalesce(j ->> '$.delivery_count', 1) AS delivery_count, r.line AS line
    FROM temp.raw AS r
    WHERE {_VALID_LINE}
    LIMIT -1
)
"""
_DEDUPE_RESULTS = """
DELETE FROM results WHERE rowid NOT IN (
    SELECT max(rowid) FROM results GROUP BY run_id, sample_id, experiment, epoch)
"""
_FROM_WINNERS = """
FROM results AS res JOIN temp.raw AS r ON r.run_id = res.run_id AND r.line = res.line,
    json_each(r.j, '{path}') AS e
"""
_KEY_SELECT = "res.run_id, res.sample_id, res.experiment, res.epoch"
_FILL_DETAILS = {
    "metrics": f"""INSERT INTO metrics SELECT {_KEY_SELECT}, e.value ->> '$.name',
        e.value ->> '$.value', coalesce(e.value ->> '$.weight', 0.0), e.value -> '$.metadata'
        {_FROM_WINNERS.format(path="$.score.metrics")}""",
    "tool_calls": f"""INSERT INTO tool_calls SELECT {_KEY_SELECT}, e.key, e.value ->> '$.name',
        e.value -> '$.params', e.value ->> '$.message', e.value ->> '$.success',
        e.value ->> '$.duration_ms', e.value ->> '$.error'
        {_FROM_WINNERS.format(path="$.tool_calls")}""",
    "messages": f"""INSERT INTO messages SELECT {_KEY_SELECT}, e.key, e.value ->> '$.role',
        e.value ->> '$.content', e.value -> '$.tool_calls', e.value ->> '$.tool_call_id',
        e.value ->> '$.name'
        {_FROM_WINNERS.format(path="$.messages")}""",
}
_LOG_FIELDS = ("time", "level", "logger", "message", "thread", "exception")


def create_run_schema(conn: sqlite3.Connection) -> None:
    """Create every table of `RUN_TABLES` (empty) in `conn`'s main database."""
    for spec in RUN_TABLES:
        for statement in spec.create_sql():
            conn.execute(statement)


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
        self._raw_loaded = False
        self.warnings: list[str] = []
        """Problems met while loading (skipped lines, missing bundles), for the user."""

    @property
    def filled(self) -> frozenset[str]:
        """Tables holding their rows."""
        return frozenset(self._filled)

    def ensure(self, names: Iterable[str]) -> bool:
        """Fill the tables among `names` that are not filled yet; True when any was.

        All or nothing: the filling runs in one transaction, and a failure leaves the
        tables (and this object) as they were.

        Raises:
            sqlite3.Error: SQLite failed while filling.
        """
        wanted = [spec.name for spec in RUN_TABLES if spec.name in set(names)]
        missing = [name for name in wanted if name not in self._filled]
        if not missing:
            return False
        filled, raw_loaded, warned = set(self._filled), self._raw_loaded, len(self.warnings)
        self._conn.execute("BEGIN")
        try:
            self._fill(missing)
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")  # also drops a raw table created in it
            self._filled, self._raw_loaded = filled, raw_loaded
            del self.warnings[warned:]
            raise
        return True

    def _fill(self, missing: list[str]) -> None:
        if "results" not in self._filled:
            self._fill_results()
        for name in missing:
            if name in _FILL_DETAILS:
                self._load_raw()
                self._conn.execute(_FILL_DETAILS[name])
            elif name == "logs":
                self._fill_logs()
            elif name == "runs":
                self._fill_runs()
            self._filled.add(name)

    # -- results.jsonl -------------------------------------------------------------------

    def _load_raw(self) -> None:
        if self._raw_loaded:
            return
        conn = self._conn
        conn.execute("CREATE TEMP TABLE raw (run_id TEXT, line INTEGER, complete INTEGER, j TEXT)")
        for source in self._sources:
            conn.executemany("INSERT INTO temp.raw VALUES (?, ?, ?, ?)", _read_lines(source))
        conn.execute("CREATE INDEX temp.raw_line ON raw (run_id, line)")
        self._raw_loaded = True

    def _fill_results(self) -> None:
        self._load_raw()
        conn = self._conn
        loaded = conn.execute(_FILL_RESULTS).rowcount
        total = conn.execute("SELECT count(*) FROM temp.raw").fetchone()[0]
        if loaded < total:
            self._warn_bad_lines()
        conn.execute(_DEDUPE_RESULTS)
        self._filled.add("results")

    def _warn_bad_lines(self) -> None:
        bad = self._conn.execute(
            f"SELECT run_id, line, complete FROM temp.raw WHERE NOT ({_VALID_LINE}) ORDER BY rowid"
        ).fetchall()
        paths = {s.run_id: s.path / RESULTS_FILE for s in self._sources}
        cut = [(run_id, line) for run_id, line, complete in bad if not complete]
        corrupt = [(run_id, line) for run_id, line, complete in bad if complete]
        for run_id, line in cut:
            self.warnings.append(
                f"{paths[run_id]}:{line}: skipped a truncated last line (the writer was cut "
                "off mid-line; resuming the run re-runs that sample)"
            )
        if corrupt:
            listed = ", ".join(f"{paths[r]}:{n}" for r, n in corrupt[:_MAX_LISTED])
            more = f" and {len(corrupt) - _MAX_LISTED} more" if len(corrupt) > _MAX_LISTED else ""
            self.warnings.append(
                f"skipped {len(corrupt)} line(s) that are not results (invalid JSON or no "
                f"sample_id/experiment_name): {listed}{more}"
            )

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
        self._conn.executemany(f"INSERT INTO runs VALUES ({', '.join('?' * 12)})", rows)

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
            return (source.run_id, str(source.path), None, None, None, None, *tally, None, None)
        return (
            source.run_id, str(source.path), status, manifest.created_at.isoformat(),
            manifest.updated_at.isoformat(), manifest.counts.expected, *tally,
            json.dumps(serde.dump(manifest.fingerprint), ensure_ascii=False),
            json.dumps(dict(manifest.config), ensure_ascii=False),
        )  # fmt: skip

    def _fill_logs(self) -> None:
        query = f"SELECT {', '.join(_KEY)}, bundle_path FROM results WHERE bundle_path IS NOT NULL"
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


def _read_lines(source: RunSource) -> Iterator[tuple[str, int, bool, str]]:
    """`(run_id, line number, complete, text)` of the first `results_size` bytes."""
    remaining = source.results_size
    try:
        handle = (source.path / RESULTS_FILE).open("rb")
    except FileNotFoundError:
        return
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if remaining <= 0:
                return
            chunk = raw[:remaining]
            remaining -= len(chunk)
            complete = chunk.endswith(b"\n")
            text = chunk.strip()
            if text:
                yield source.run_id, lineno, complete, text.decode("utf-8", "replace")


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
