"""The viewer's index: every result of the runs it shows, in an in-memory SQLite database.

`wink debug` reads each run's `results.jsonl` once at startup and keeps, per result, the
columns the results grid filters and sorts on, its metadata (one row per key) and a
full-text index (SQLite FTS5) over its output, transcript, tool calls, reason and error.
Full results are not kept: a row remembers where its line starts in the file, and the
sample page reads that one line again. So memory grows with the index, not with the
transcripts, and one page of 100,000 results is one indexed SQL query.

**Loading.** Lines go through the loader `wink query` uses (`_run_loader.py`): staged in
batches, parsed by SQLite, one `INSERT ... SELECT` per batch pulls every column and the
metadata out of a line at once (in C; no Python per result). A line is a result when it
is JSON with the fields the index needs, of the right types (`_CHECKS`); the sample page
validates the whole line with `EvalResult` when it is opened. The full-text index, about
half of the work (gathering the text, then FTS5), is built after `finish()` on a
background thread (`_viewer_search.py`): the viewer serves as soon as the columns are in,
and a search waits for the text index only if it asks before it is ready.

**Which line counts.** As for every reader of a run, the last line written for a
`(sample_id, experiment_name, epoch)` wins; earlier lines are dropped from the index.
Lines that are not results are skipped and counted (the viewer shows what it could
read); an unterminated last line that is not one was cut mid-write and is dropped
silently.

After `finish()` the database is read-only (`PRAGMA query_only`) except for the search
builder's batches; one lock serializes access, since the web server calls in from
several threads.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weakincentives import serde
from weakincentives.errors import SerdeError, ViewerError
from weakincentives.evals import RESULTS_FILE, EvalResult, Outcomes

from ._run_loader import COMPLETE, STAGE, delete_superseded, fields_select, prepare, stage
from ._run_schema import KEY
from ._viewer_lines import decode_batches, insert_rows
from ._viewer_search import SearchBuilder
from ._viewer_types import (
    SORT_KEYS,
    Facets,
    IndexedRun,
    ResultFilter,
    ResultPage,
    ResultRow,
    where_clause,
)

__all__ = ["ResultIndex"]

_log = logging.getLogger(__name__)
_MAX_FACET_VALUES = 50
_MAX_SKIPPED = 20

_SCHEMA = """
CREATE TABLE results (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, sample_id TEXT NOT NULL,
    experiment TEXT NOT NULL, epoch INTEGER NOT NULL, status TEXT NOT NULL,
    error_kind TEXT, score REAL NOT NULL, passed INTEGER NOT NULL, latency_ms REAL NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, tokens INTEGER NOT NULL,
    reason TEXT NOT NULL, error TEXT, tool_calls INTEGER NOT NULL, messages INTEGER NOT NULL,
    has_bundle INTEGER NOT NULL, line INTEGER NOT NULL, offset INTEGER NOT NULL,
    cost REAL, judge_cost REAL
);
CREATE TABLE meta (result_id INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL);
CREATE INDEX meta_result ON meta (result_id);
CREATE TABLE metrics (result_id INTEGER NOT NULL, name TEXT NOT NULL, value REAL NOT NULL);
CREATE VIRTUAL TABLE search USING fts5(body, content='', tokenize='unicode61');
"""

_INDEXES = """
CREATE INDEX results_run ON results (run_id, experiment, id);
CREATE INDEX meta_key ON meta (key, value, result_id);
CREATE INDEX metrics_result ON metrics (result_id);
PRAGMA analysis_limit = 1000;
ANALYZE;
"""
"""What the first page's queries use: built by `finish()`. A limited `ANALYZE` (sampled
rows) gives the planner its statistics in milliseconds."""
_LATER_INDEXES = (
    "CREATE INDEX results_sample ON results (run_id, sample_id)",
    "CREATE INDEX results_score ON results (run_id, score)",
    "CREATE INDEX results_latency ON results (run_id, latency_ms)",
    "CREATE INDEX results_tokens ON results (run_id, tokens)",
    "ANALYZE",
)
"""For a sample's siblings and the grid's sorts: built in the background with the text."""

_ROW_COLUMNS = (
    "id", "run_id", "sample_id", "experiment", "epoch", "status", "error_kind", "score",
    "passed", "latency_ms", "input_tokens", "output_tokens", "tokens", "reason", "error",
    "tool_calls", "messages", "has_bundle",
)  # fmt: skip


_FIELDS = (
    "sample_id", "experiment", "epoch", "passed", "score", "reason", "latency_ms",
    "input_tokens", "output_tokens", "error_kind", "error", "metadata", "bundle_path",
    "tool_calls", "messages", "score_metrics", "cost_usd", "judge_cost_usd",
)  # fmt: skip
_CHECKS = (
    ("typeof(sample_id) = 'text'", "sample_id is missing or not a string"),
    ("typeof(experiment) = 'text'", "experiment_name is missing or not a string"),
    ("typeof(epoch) = 'integer'", "epoch is not an integer"),
    ("typeof(score) IN ('integer', 'real')", "score.value is missing or not a number"),
    ("passed IN (0, 1)", "score.passed is not a boolean"),
    ("typeof(latency_ms) IN ('integer', 'real')", "latency_ms is missing or not a number"),
    ("typeof(input_tokens) = 'integer' AND typeof(output_tokens) = 'integer'",
     "usage.input_tokens or usage.output_tokens is not an integer"),
    ("typeof(reason) IN ('null', 'text')", "score.reason is not a string"),
    ("typeof(error) IN ('null', 'text')", "error is not a string"),
    ("typeof(error_kind) IN ('null', 'text')", "error_kind is not a string"),
    ("ifnull(metadata_type = 'object', 1)", "metadata is not an object"),
)  # fmt: skip
"""What makes a JSON line a result the index can hold: `(SQL condition, problem)`."""
_ALL_CHECKS = " AND ".join(f"({check})" for check, _ in _CHECKS)
_PROBLEM = " ".join(f"WHEN NOT ({check}) THEN '{problem}'" for check, problem in _CHECKS)
_METADATA_TYPE = "json_type(j, '$.metadata') AS metadata_type"
_FILL = f"""
INSERT INTO temp.wink_rows
SELECT :id_base + line, :run_id, sample_id, experiment, epoch,
    CASE WHEN error IS NOT NULL THEN 'error'
         WHEN passed THEN 'passed' ELSE 'failed' END,
    error_kind, score, passed, latency_ms, input_tokens,
    output_tokens, input_tokens + output_tokens, coalesce(reason, ''), error, tool_calls,
    messages, bundle_path IS NOT NULL, line, offset, cost_usd, judge_cost_usd, metadata,
    score_metrics
FROM ({fields_select(_FIELDS, extra=_METADATA_TYPE)})
WHERE {_ALL_CHECKS}
"""
_SKIPPED = f"""
SELECT line, {COMPLETE}, 'not valid JSON' FROM {STAGE} WHERE NOT json_valid(j)
UNION ALL
SELECT line, complete, CASE {_PROBLEM} END
FROM ({fields_select(_FIELDS, extra=f"{_METADATA_TYPE}, {COMPLETE} AS complete")})
WHERE NOT ({_ALL_CHECKS})
ORDER BY line
"""
"""The staged lines `_FILL` skipped: `(line, complete, problem)`."""
_RESULT_COLUMNS = (*_ROW_COLUMNS, "line", "offset", "cost", "judge_cost")
_ROWS_SCHEMA = (
    f"CREATE TEMP TABLE IF NOT EXISTS wink_rows ({', '.join(_RESULT_COLUMNS)}, metadata, "
    "score_metrics)"
)
_JSON_SCHEMA = "CREATE TEMP TABLE IF NOT EXISTS wink_json (id, metadata, score_metrics)"
_SPREAD = (
    # Metadata values as the filters compare them, the text `json.dumps` gives: strings
    # as they are, objects and arrays with sorted keys (`_json_text`), numbers as written
    # (`->` keeps a number's text; a key it cannot address falls back to SQLite's).
    """INSERT INTO meta SELECT r.id, e.key, CASE e.type WHEN 'text' THEN e.value
        WHEN 'integer' THEN CAST(e.value AS TEXT)
        WHEN 'real' THEN coalesce(r.metadata -> e.fullkey, CAST(e.value AS TEXT))
        WHEN 'object' THEN wink_json_text(e.value) WHEN 'array' THEN wink_json_text(e.value)
        ELSE e.type END
    FROM temp.wink_json AS r, json_each(r.metadata) AS e""",
    # The score's named metrics (what the checks chart and the failure groups read).
    """INSERT INTO metrics SELECT r.id, e.value ->> '$.name', e.value ->> '$.value'
    FROM temp.wink_json AS r, json_each(r.score_metrics) AS e
    WHERE json_type(r.score_metrics) = 'array' AND typeof(e.value ->> '$.name') = 'text'
        AND typeof(e.value ->> '$.value') IN ('integer', 'real')""",
    "DELETE FROM temp.wink_json",
)
"""Per batch: the metadata and metrics of `wink_json` become rows of `meta` and `metrics`."""
_DISTRIBUTE = (
    f"INSERT INTO results SELECT {', '.join(_RESULT_COLUMNS)} FROM temp.wink_rows",
    "INSERT INTO temp.wink_json SELECT id, metadata, score_metrics FROM temp.wink_rows",
    "DELETE FROM temp.wink_rows",
)
"""Per batch: the rows `_FILL` made of staged lines go to `results` and `wink_json`."""


_TALLY = """
SELECT experiment, status, error_kind, count(*), min(id) FROM results WHERE run_id = ?
GROUP BY experiment, status, error_kind
"""
_META_FACETS = """
SELECT key, value, count(*) AS n FROM meta WHERE result_id BETWEEN ? AND ?
GROUP BY key, value ORDER BY key, n DESC, value
"""


def _key_of(raw: bytes) -> tuple[Any, Any, Any] | None:
    """`(sample_id, experiment_name, epoch)` of a JSON line, None when it has none."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return data.get("sample_id"), data.get("experiment_name"), data.get("epoch", 0)


def _json_text(text: str) -> str:
    """JSON text with sorted keys and `json.dumps`' spacing (how metadata was shown)."""
    return json.dumps(json.loads(text), ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True, slots=True)
class _Located:
    path: Path
    offset: int
    line: int
    key: tuple[str, str, int]


class ResultIndex:
    """The index of every result of the runs the viewer shows (see the module docstring).

    Examples:
        >>> index = ResultIndex()
        >>> index.add_run(run_dir)  # doctest: +SKIP
        >>> index.finish()
        >>> index.page("my-run", ResultFilter(status="error")).total  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._db.executescript(_SCHEMA)
        self._db.create_function("wink_json_text", 1, _json_text, deterministic=True)
        prepare(self._db)
        self._db.execute(_ROWS_SCHEMA)
        self._db.execute(_JSON_SCHEMA)
        self._lock = threading.Lock()
        self._runs: dict[str, IndexedRun] = {}
        self._next_id = 1
        self._id_bases: dict[str, int] = {}
        self._ids: dict[str, tuple[int, int]] = {}
        self._finished = False
        self._search: SearchBuilder | None = None

    # -- building ------------------------------------------------------------------------

    def add_run(self, run_dir: Path, *, run_id: str | None = None) -> IndexedRun:
        """Index `run_dir/results.jsonl` under `run_id` (default: the directory name).

        Raises:
            ViewerError: the index is finished, the id is taken, or the file is unreadable.
        """
        run_id = run_id or run_dir.name
        with self._lock:
            if self._finished:
                raise ViewerError("the index is finished; build a new one to add runs")
            if run_id in self._runs:
                raise ViewerError(f"two runs are called {run_id!r}; show them one at a time")
            run = self._add_run(run_dir, run_id)
            self._runs[run_id] = run
            return run

    def finish(self, *, search_in_background: bool = True, defer: bool = False) -> None:
        """Build the first page's indexes, make the database read-only, then the rest.

        The rest (the indexes of the grid's sorts, then the full-text index) is built on
        a background thread (see `SearchBuilder`), or before this returns with
        `search_in_background=False`. With `defer=True` the thread waits for
        `start_background()` (the viewer calls it once the first page is served, so the
        two do not compete for the CPU); a search starts it too.
        """
        with self._lock:
            if self._finished:
                return
            self._db.executescript(_INDEXES)
            self._db.execute("PRAGMA query_only = ON")
            self._finished = True
            sources = [
                (run.path / RESULTS_FILE, self._id_bases[run.run_id], run.run_id)
                for run in self._runs.values()
            ]
        self._search = SearchBuilder(self._db, self._lock, sources, before=_LATER_INDEXES)
        if not search_in_background:
            self._search.run()
        elif not defer:
            self._search.start()

    def start_background(self) -> None:
        """Start building the rest of the index (see `finish`), if it has not started."""
        if self._search is not None:
            self._search.start()

    def wait_for_search(self, timeout: float | None = None) -> None:
        """Wait until the full-text index is built (searches do this themselves).

        Raises:
            ViewerError: the index is not finished, the text could not be indexed, or
                `timeout` passed first.
        """
        if self._search is None:
            raise ViewerError("the index is not finished; call finish() first")
        self._search.start()
        self._search.wait(timeout)

    def _add_run(self, run_dir: Path, run_id: str) -> IndexedRun:
        path = run_dir / RESULTS_FILE
        params = {"run_id": run_id, "id_base": self._next_id - 1}
        self._id_bases[run_id] = self._next_id - 1
        skipped: list[str] = []
        skipped_count = lines = last_line = found = 0
        keys: set[tuple[str, str, int]] = set()
        self._db.execute("BEGIN")
        try:
            for batch in decode_batches(path, id_base=self._next_id - 1, run_id=run_id):
                lines += batch.lines
                last_line = batch.last_line
                insert_rows(self._db, "results", batch.rows)
                insert_rows(self._db, "metrics", batch.metrics)
                insert_rows(self._db, "temp.wink_json", batch.metadata)
                keys.update((row[2], row[3], row[4]) for row in batch.rows)
                found += len(batch.rows)
                if batch.staged:  # the lines msgspec left to SQL: judged as before
                    judged = self._judge(batch.staged, params, path, skipped)
                    skipped_count += judged[0]
                    keys.update(judged[1])
                    found += len(judged[1])
                for statement in _SPREAD:
                    self._db.execute(statement)
            gone: list[int] = []
            if len(keys) < found:  # a key was written twice: its last line wins
                gone = delete_superseded(
                    self._db, "results", KEY, where="run_id = ?", params=(run_id,)
                )
            for table in ("meta", "metrics"):
                self._db.executemany(
                    f"DELETE FROM {table} WHERE result_id = ?", ((g,) for g in gone)
                )
            (results,) = self._db.execute(
                "SELECT count(*) FROM results WHERE run_id = ?", (run_id,)
            ).fetchone()
            self._db.execute("COMMIT")
        except OSError as exc:
            self._db.execute("ROLLBACK")
            raise ViewerError(f"cannot read {path}: {exc}; is this a run directory?") from exc
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        # A later line for the same key superseded the rows in `gone`: the search builder
        # indexes only the lines still in `results`.
        self._ids[run_id] = (self._next_id, self._next_id + last_line - 1)
        self._next_id += last_line
        if skipped_count:
            _log.warning("%s: skipped %d unreadable lines", path, skipped_count)
        return IndexedRun(
            run_id=run_id, path=run_dir, results=results, lines=lines,
            skipped=tuple(skipped), skipped_count=skipped_count,
        )  # fmt: skip

    def _judge(
        self, staged: list[int | str], params: dict[str, Any], path: Path, skipped: list[str]
    ) -> tuple[int, list[tuple[str, str, int]]]:
        """Index the staged lines `_FILL` accepts: how many it skipped, the keys it kept."""
        count = 0
        batch = stage(self._db, staged)
        if self._db.execute(_FILL, params).rowcount < batch.lines:
            for line, complete, problem in self._db.execute(_SKIPPED):
                if complete:  # an unterminated last line was cut mid-write
                    count += 1
                    if len(skipped) < _MAX_SKIPPED:
                        skipped.append(f"{path}:{line}: {problem}")
        self._db.execute(f"DELETE FROM {STAGE}")
        keys = self._db.execute("SELECT sample_id, experiment, epoch FROM temp.wink_rows")
        kept = [tuple(key) for key in keys]
        for statement in _DISTRIBUTE:
            self._db.execute(statement)
        return count, kept

    # -- reading -------------------------------------------------------------------------

    def runs(self) -> tuple[IndexedRun, ...]:
        """The indexed runs, in the order they were added."""
        with self._lock:
            return tuple(self._runs.values())

    def run(self, run_id: str) -> IndexedRun | None:
        """The indexed run called `run_id`, if any."""
        with self._lock:
            return self._runs.get(run_id)

    def page(
        self,
        run_id: str,
        flt: ResultFilter,
        *,
        sort: str = "order",
        descending: bool = False,
        offset: int = 0,
        limit: int = 50,
    ) -> ResultPage:
        """One page of `run_id`'s results that match `flt`, sorted by `sort` (`SORT_KEYS`).

        Raises:
            ViewerError: `sort` is not one of `SORT_KEYS`.
        """
        column = SORT_KEYS.get(sort)
        if column is None:
            raise ViewerError(f"cannot sort by {sort!r}; sort by one of {', '.join(SORT_KEYS)}")
        where, params = where_clause(run_id, flt)
        if flt.search.strip():
            self.wait_for_search()
        direction = "DESC" if descending else "ASC"
        sql = (
            f"SELECT {', '.join(_ROW_COLUMNS)} FROM results WHERE {where} "
            f"ORDER BY {column} {direction}, id {direction} LIMIT ? OFFSET ?"
        )
        with self._lock:
            (total,) = self._db.execute(
                f"SELECT count(*) FROM results WHERE {where}", params
            ).fetchone()
            found = self._db.execute(sql, [*params, limit, offset]).fetchall()
        return ResultPage(total=total, offset=offset, limit=limit, rows=tuple(map(_to_row, found)))

    def get(self, run_id: str, result_id: int) -> ResultRow | None:
        """The row of result `result_id` of run `run_id`, if there is one."""
        sql = f"SELECT {', '.join(_ROW_COLUMNS)} FROM results WHERE id = ? AND run_id = ?"
        with self._lock:
            found = self._db.execute(sql, (result_id, run_id)).fetchone()
        return None if found is None else _to_row(found)

    def siblings(self, run_id: str, sample_id: str) -> tuple[ResultRow, ...]:
        """Every result of `sample_id` in the run (all experiments and epochs)."""
        sql = (
            f"SELECT {', '.join(_ROW_COLUMNS)} FROM results WHERE run_id = ? AND sample_id = ? "
            "ORDER BY experiment, epoch"
        )
        with self._lock:
            return tuple(map(_to_row, self._db.execute(sql, (run_id, sample_id)).fetchall()))

    def read(self, run_id: str, result_id: int) -> EvalResult | None:
        """Read result `result_id` back from its run's file and validate it in full.

        Raises:
            ViewerError: the file changed since it was indexed, or the line has the
                fields the index needs but is not a valid `EvalResult`.
        """
        located = self._locate(run_id, result_id)
        if located is None:
            return None
        where = f"{located.path}:{located.line}"
        try:
            with located.path.open("rb") as handle:
                handle.seek(located.offset)
                raw = handle.readline()
            result = serde.loads(EvalResult, raw)
        except (OSError, SerdeError) as exc:
            if isinstance(exc, SerdeError) and _key_of(raw) == located.key:
                raise ViewerError(f"{where} is not a valid result: {exc}") from exc
            raise ViewerError(
                f"{where} cannot be read again ({exc}); the file changed since the viewer "
                "started: restart `wink debug`"
            ) from exc
        if result.key != located.key:
            raise ViewerError(f"{where} changed since the viewer started: restart `wink debug`")
        return result

    def _locate(self, run_id: str, result_id: int) -> _Located | None:
        sql = (
            "SELECT sample_id, experiment, epoch, line, offset FROM results "
            "WHERE id = ? AND run_id = ?"
        )
        with self._lock:
            found = self._db.execute(sql, (result_id, run_id)).fetchone()
            run = self._runs.get(run_id)
        if found is None or run is None:
            return None
        sample_id, experiment, epoch, line, offset = found
        return _Located(run.path / RESULTS_FILE, offset, line, (sample_id, experiment, epoch))

    def experiments(self, run_id: str) -> dict[str, int]:
        """Experiment -> results of run `run_id`, in order of first appearance."""
        with self._lock:
            return self._counts("experiment", run_id)

    def experiment_passes(self, run_id: str) -> dict[str, tuple[int, int]]:
        """Experiment -> `(results, passed)` of run `run_id`, in order of first appearance."""
        sql = (
            "SELECT experiment, count(*), sum(status = 'passed') FROM results WHERE run_id = ? "
            "GROUP BY experiment ORDER BY min(id)"
        )
        with self._lock:
            rows = self._db.execute(sql, (run_id,)).fetchall()
        return {name: (int(n), int(passed)) for name, n, passed in rows}

    def statuses(self, run_id: str) -> dict[str, int]:
        """`passed` / `failed` / `error` -> results of run `run_id`."""
        with self._lock:
            return self._counts("status", run_id)

    def facets(self, run_id: str) -> Facets:
        """The values each filter of run `run_id` can take."""
        first, last = self._ids.get(run_id, (0, -1))
        with self._lock:
            # One scan for the three counts (each in order of first appearance).
            tally = self._db.execute(_TALLY, (run_id,)).fetchall()
            # A run's results are the ids first..last: no join with `results` needed.
            rows = self._db.execute(_META_FACETS, (first, last)).fetchall()
        experiments: dict[str, int] = {}
        statuses: dict[str, int] = {}
        kinds: dict[str, int] = {}
        for experiment, status, kind, n, _ in sorted(tally, key=lambda row: row[4]):
            experiments[experiment] = experiments.get(experiment, 0) + n
            statuses[status] = statuses.get(status, 0) + n
            if kind is not None:
                kinds[kind] = kinds.get(kind, 0) + n
        metadata: dict[str, list[str]] = {}
        for key, value, _ in rows:
            values = metadata.setdefault(key, [])
            if len(values) < _MAX_FACET_VALUES:
                values.append(value)
        return Facets(
            experiments=experiments,
            statuses=statuses,
            error_kinds=kinds,
            metadata={k: tuple(v) for k, v in metadata.items()},
        )

    def _counts(self, column: str, run_id: str, extra: str = "") -> dict[str, int]:
        sql = (
            f"SELECT {column}, count(*) FROM results WHERE run_id = ? {extra} "
            f"GROUP BY {column} ORDER BY min(id)"
        )
        return dict(self._db.execute(sql, (run_id,)).fetchall())

    def cost_rows(self, run_id: str, experiment: str) -> list[tuple[Any, ...]]:
        """`(sample_id, epoch, cost, judge_cost)` of each result of one experiment."""
        sql = (
            "SELECT sample_id, epoch, cost, judge_cost FROM results "
            "WHERE run_id = ? AND experiment = ? ORDER BY id"
        )
        with self._lock:
            return self._db.execute(sql, (run_id, experiment)).fetchall()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read-only SQL query over the tables `results`, `meta` and `metrics`.

        For the viewer's charts (`_viewer_charts.py`); after `finish()` the database
        refuses writes.
        """
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def outcomes(self, run_id: str, experiment: str) -> tuple[Outcomes, tuple[int, ...]]:
        """One experiment's outcomes as columns (what a comparison reads), and result ids.

        Both are in index order: `ids[i]` is the result of row `i` of the outcomes.
        """
        sql = (
            "SELECT id, sample_id, epoch, status, score FROM results "
            "WHERE run_id = ? AND experiment = ? ORDER BY id"
        )
        with self._lock:
            found = self._db.execute(sql, (run_id, experiment)).fetchall()
        ids, samples, epochs, statuses, scores = zip(*found, strict=True) if found else ((),) * 5
        outcomes = Outcomes(
            sample_ids=samples,
            epochs=epochs,
            passed=[status == "passed" for status in statuses],
            scores=[0.0 if st == "error" else sc for st, sc in zip(statuses, scores, strict=True)],
        )
        return outcomes, ids

    def rows(self, run_id: str, ids: Iterable[int]) -> dict[int, ResultRow]:
        """Result id -> its row, for the ids of run `run_id` that exist."""
        sql = (
            f"SELECT {', '.join(_ROW_COLUMNS)} FROM results WHERE run_id = ? "
            "AND id IN (SELECT value FROM json_each(?))"
        )
        with self._lock:
            found = self._db.execute(sql, (run_id, json.dumps(list(ids)))).fetchall()
        return {row.id: row for row in map(_to_row, found)}


def _to_row(values: Sequence[Any]) -> ResultRow:
    data = dict(zip(_ROW_COLUMNS, values, strict=True))
    data["passed"] = bool(data["passed"])
    data["has_bundle"] = bool(data["has_bundle"])
    return ResultRow(**data)
