"""The viewer's index: every result of the runs it shows, in an in-memory SQLite database.

`wink debug` reads each run's `results.jsonl` once at startup and keeps, per result, the
columns the results grid filters and sorts on, its metadata (one row per key) and a
full-text index (SQLite FTS5) over its output, transcript, tool calls, reason and error.
Full results are not kept: a row remembers where its line starts in the file, and the
sample page reads that one line again. So memory grows with the index, not with the
transcripts, and one page of 100,000 results is one indexed SQL query.

**Loading.** msgspec reads the fields the index keeps from each line (`_viewer_lines.py`;
the transcript is skipped, not built) and the rows are inserted in batches. A line msgspec
does not take as a plain result goes through the loader `wink query` uses
(`_run_loader.py`): staged, parsed by SQLite, kept or skipped by the checks of
`_viewer_schema.py` (`_CHECKS`), so both paths fill the tables the same way. The sample
page validates the whole line with `EvalResult` when it is opened. `finish()` builds the
indexes the first page needs; the full-text index (`_viewer_search.py`) and the sort indexes
are built after it on a background thread, which the viewer starts once its first page is
made (`start_background`); a search that comes first waits for them. A finished index can
be saved and opened again without reading the run (`cache_to`, `from_cache`; see
`_viewer_cache.py`).

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

from ._query_cache import load_cache, store_cache
from ._run_loader import delete_superseded, prepare
from ._run_schema import KEY
from ._viewer_columns import Gathered
from ._viewer_load import Load
from ._viewer_schema import (
    INDEXES,
    JSON_SCHEMA,
    LATER_INDEXES,
    META_FACETS,
    ROW_COLUMNS,
    ROWS_SCHEMA,
    SCHEMA,
    TALLY,
    json_text,
)
from ._viewer_search import SearchBuilder
from ._viewer_split import read_batches
from ._viewer_types import (
    SORT_KEYS,
    Facets,
    IndexedRun,
    ResultFilter,
    ResultPage,
    ResultRow,
    where_clause,
)

__all__ = ["IndexReader", "ResultIndex"]

_log = logging.getLogger(__name__)
_MAX_FACET_VALUES = 50


def _key_of(raw: bytes) -> tuple[Any, Any, Any] | None:
    """`(sample_id, experiment_name, epoch)` of a JSON line, None when it has none."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return data.get("sample_id"), data.get("experiment_name"), data.get("epoch", 0)


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
        self._db.executescript(SCHEMA)
        self._db.create_function("wink_json_text", 1, json_text, deterministic=True)
        prepare(self._db)
        self._db.execute(ROWS_SCHEMA)
        self._db.execute(JSON_SCHEMA)
        self._lock = threading.Lock()
        self._runs: dict[str, IndexedRun] = {}
        self._next_id = 1
        self._id_bases: dict[str, int] = {}
        self._ids: dict[str, tuple[int, int]] = {}
        self._finished = False
        self._search: SearchBuilder | None = None
        self._cache: tuple[Path, str] | None = None
        self._gathered: dict[str, Gathered] = {}

    @classmethod
    def from_cache(cls, run_dir: Path, path: Path, signature: str) -> ResultIndex | None:
        """The finished index of `run_dir` saved at `path` (`cache_to`), if it is valid.

        Valid means: written by this code (the schema is exactly this one) for
        `signature` (see `_viewer_cache.py`), holding one run. None otherwise.
        """
        index = cls()
        db = index._db
        db.executescript(INDEXES)  # the schema the cache must have, ANALYZE's table included
        for statement in LATER_INDEXES:
            db.execute(statement)
        if not load_cache(db, path, signature):
            return None
        found = db.execute("SELECT run_id, first_id, last_line, info FROM runs").fetchall()
        if len(found) != 1:
            return None
        ((run_id, first_id, last_line, info),) = found
        index._runs[run_id] = _indexed_run(run_dir, json.loads(info))
        index._id_bases[run_id] = first_id - 1
        index._ids[run_id] = (first_id, first_id + last_line - 1)
        index._next_id = first_id + last_line
        db.execute("PRAGMA query_only = ON")
        index._finished = True
        index._search = SearchBuilder(db, index._lock, ())
        index._search.run()  # nothing left to build: searches answer at once
        return index

    def cache_to(self, path: Path, signature: str) -> None:
        """Save the whole index to `path` once the background work is done (best effort).

        `from_cache(run_dir, path, signature)` opens it again without reading the run.
        """
        self._cache = (path, signature)

    def _save_cache(self) -> None:
        if self._cache is None:
            return
        path, signature = self._cache
        with self._lock:
            self._db.execute("PRAGMA query_only = OFF")
            try:
                store_cache(self._db, path, signature, ["index"])
            except sqlite3.Error as exc:  # a cache is an optimization: never a failure
                _log.debug("cannot save the viewer cache %s: %s", path, exc)
            finally:
                self._db.execute("PRAGMA query_only = ON")

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

        The rest (the full-text index, then the indexes of the grid's sorts) is built on
        a background thread (see `SearchBuilder`), or before this returns with
        `search_in_background=False`. With `defer=True` the thread waits for
        `start_background()` (the viewer calls it once the first page is served, so the
        two do not compete for the CPU); a search starts it too.
        """
        with self._lock:
            if self._finished:
                return
            self._db.executescript(INDEXES)
            self._db.execute("PRAGMA query_only = ON")
            self._finished = True
            sources = [
                (run.path / RESULTS_FILE, self._id_bases[run.run_id], run.run_id)
                for run in self._runs.values()
            ]
        self._search = SearchBuilder(
            self._db, self._lock, sources, then=LATER_INDEXES, after=self._save_cache
        )
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
        id_base = self._id_bases[run_id] = self._next_id - 1
        load = Load(self._db, path, {"run_id": run_id, "id_base": id_base})
        self._db.execute("BEGIN")
        try:
            for batch in read_batches(path, id_base=id_base, run_id=run_id):
                load.insert(batch)
            gone: list[int] = []
            if len(load.keys) < load.found:  # a key was written twice: its last line wins
                load.columns.drop()
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
            info: dict[str, Any] = {
                "run_id": run_id, "results": results, "lines": load.lines,
                "skipped": load.skipped, "skipped_count": load.skipped_count,
            }  # fmt: skip
            self._db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?)",
                (run_id, id_base + 1, load.last_line, json.dumps(info)),
            )
            self._db.execute("COMMIT")
        except OSError as exc:
            self._db.execute("ROLLBACK")
            raise ViewerError(f"cannot read {path}: {exc}; is this a run directory?") from exc
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        # A later line for the same key superseded the rows in `gone`: the search builder
        # indexes only the lines still in `results`.
        self._ids[run_id] = (self._next_id, self._next_id + load.last_line - 1)
        gathered = load.columns.result()
        if gathered is not None:
            self._gathered[run_id] = gathered
        self._next_id += load.last_line
        if load.skipped_count:
            _log.warning("%s: skipped %d unreadable lines", path, load.skipped_count)
        return _indexed_run(run_dir, info)

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
            f"SELECT {', '.join(ROW_COLUMNS)} FROM results WHERE {where} "
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
        sql = f"SELECT {', '.join(ROW_COLUMNS)} FROM results WHERE id = ? AND run_id = ?"
        with self._lock:
            found = self._db.execute(sql, (result_id, run_id)).fetchone()
        return None if found is None else _to_row(found)

    def siblings(self, run_id: str, sample_id: str) -> tuple[ResultRow, ...]:
        """Every result of `sample_id` in the run (all experiments and epochs)."""
        sql = (
            f"SELECT {', '.join(ROW_COLUMNS)} FROM results WHERE run_id = ? AND sample_id = ? "
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

    def gathered(self, run_id: str) -> Gathered | None:
        """What was gathered of run `run_id` while it was read (`_viewer_columns.py`).

        None when it could not be gathered, or the index was opened from its cache: the
        statistics and charts read the index then.
        """
        return self._gathered.get(run_id)

    def experiments(self, run_id: str) -> dict[str, int]:
        """Experiment -> results of run `run_id`, in order of first appearance."""
        with self._lock:
            return self._counts("experiment", run_id)

    def experiment_passes(self, run_id: str) -> dict[str, tuple[int, int]]:
        """Experiment -> `(results, passed)` of run `run_id`, in order of first appearance."""
        gathered = self._gathered.get(run_id)
        if gathered is not None:
            passes: dict[str, tuple[int, int]] = {}
            for experiment, status, _, n, _ in sorted(gathered.tally, key=lambda row: row[4]):
                total, passed = passes.get(experiment, (0, 0))
                passes[experiment] = (total + n, passed + (n if status == "passed" else 0))
            return passes
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
        gathered = self._gathered.get(run_id)
        with self._lock:
            # One scan for the three counts (each in order of first appearance), unless
            # they were counted while the run was read.
            tally = gathered.tally if gathered else self._db.execute(TALLY, (run_id,)).fetchall()
            # A run's results are the ids first..last: no join with `results` needed.
            rows = self._db.execute(META_FACETS, (first, last)).fetchall()
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

    def reader(self) -> IndexReader:
        """A copy of the index as it is, on a connection of its own, for `query` only.

        Queries on it run beside the index's own (SQLite works without the GIL): the
        viewer makes a run page's charts on one while it computes the statistics, or,
        taken before `finish()` (the runs' rows, without the first page's indexes),
        while the index builds those. Call it before the background work starts
        (`start_background`), while the tables hold what the copy should.
        """
        copy = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        with self._lock:
            self._db.backup(copy)
        copy.execute("PRAGMA query_only = ON")
        return IndexReader(copy)

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
            f"SELECT {', '.join(ROW_COLUMNS)} FROM results WHERE run_id = ? "
            "AND id IN (SELECT value FROM json_each(?))"
        )
        with self._lock:
            found = self._db.execute(sql, (run_id, json.dumps(list(ids)))).fetchall()
        return {row.id: row for row in map(_to_row, found)}


class IndexReader:
    """Read-only SQL over a copy of an index (`ResultIndex.reader`); `close` frees it."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._lock = threading.Lock()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of `sql` with `params` (as `ResultIndex.query`)."""
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def close(self) -> None:
        """Free the copy."""
        with self._lock:
            self._db.close()


def _indexed_run(run_dir: Path, info: dict[str, Any]) -> IndexedRun:
    """An `IndexedRun` from its `runs.info` (JSON data)."""
    return IndexedRun(
        run_id=info["run_id"], path=run_dir, results=info["results"], lines=info["lines"],
        skipped=tuple(info["skipped"]), skipped_count=info["skipped_count"],
    )  # fmt: skip


def _to_row(values: Sequence[Any]) -> ResultRow:
    data = dict(zip(ROW_COLUMNS, values, strict=True))
    data["passed"] = bool(data["passed"])
    data["has_bundle"] = bool(data["has_bundle"])
    return ResultRow(**data)
