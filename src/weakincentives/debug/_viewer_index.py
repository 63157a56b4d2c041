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
made (`start_background`); a search that comes first waits for them. A single run may be
kept in memory as read (`add_run(defer=True)`): its page is answered from there
(`_viewer_early.py`) and SQLite loads it with the rest; what needs SQL waits (`_sql`). A
finished index can be saved and opened again without reading the run (`cache_to`,
`from_cache`; see `_viewer_cache.py`).

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

from weakincentives.errors import ViewerError
from weakincentives.evals import RESULTS_FILE, EvalResult, Outcomes

from ._query_cache import load_cache, store_cache
from ._run_loader import prepare
from ._viewer_columns import Gathered
from ._viewer_early import MAX_EARLY_ROWS, EarlyRun
from ._viewer_lines import DecodedBatch
from ._viewer_load import Load
from ._viewer_reading import IndexReader, Located, read_result
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
    result_row,
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
    facets_of,
    where_clause,
)

__all__ = ["ResultIndex"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Pending:
    """A run read with `add_run(defer=True)`, its batches not yet in SQLite."""

    load: Load
    batches: list[DecodedBatch]
    run_id: str
    id_base: int


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
        # A run read but not yet in SQLite (`add_run(defer=True)`), answered early
        # meanwhile; `_loaded` is set while SQLite holds every run read.
        self._pending: _Pending | None = None
        self._early: EarlyRun | None = None
        self._loaded = threading.Event()
        self._loaded.set()
        self._loading = threading.Lock()
        self._load_error: ViewerError | None = None
        self._background = False
        self._flags = threading.Lock()
        self._loader_started = False

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

    def add_run(
        self, run_dir: Path, *, run_id: str | None = None, defer: bool = False
    ) -> IndexedRun:
        """Index `run_dir/results.jsonl` under `run_id` (default: the directory name).

        With `defer`, the first run added may be kept in memory, answered from there
        (`_viewer_early.py`), and put into SQLite by `finish()` on a background thread.

        Raises:
            ViewerError: the index is finished, the id is taken, or the file is unreadable.
        """
        run_id = run_id or run_dir.name
        self._load()  # a run read before this one goes into SQLite first
        with self._lock:
            if self._finished:
                raise ViewerError("the index is finished; build a new one to add runs")
            if run_id in self._runs:
                raise ViewerError(f"two runs are called {run_id!r}; show them one at a time")
            run = self._add_run(run_dir, run_id, defer=defer and not self._runs)
            self._runs[run_id] = run
            return run

    def finish(self, *, search_in_background: bool = True, defer: bool = False) -> None:
        """Build the first page's indexes, make the database read-only, then the rest.

        The rest (the full-text index, then the indexes of the grid's sorts) is built on
        a background thread (see `SearchBuilder`), or before this returns with
        `search_in_background=False`. With `defer=True` the thread waits for
        `start_background()` (the viewer calls it once the first page is served, so the
        two do not compete for the CPU); a search starts it too. A run kept in memory
        (`add_run(defer=True)`) is put into SQLite first, on a background thread of its
        own unless `search_in_background=False`; what needs SQL waits for it.
        """
        with self._lock:
            if self._finished:
                return
            self._finished = True
        if not defer:
            self._background = True
        if self._pending is not None and search_in_background:
            if self._background:
                self._start_loader()
            return  # the run goes into SQLite with the rest, or when SQL is needed (`_sql`)
        self._load()
        if self._background and self._search is not None:
            self._search.start()
        if not search_in_background:
            self._sql()
            assert self._search is not None  # made by `_load` once finished
            self._search.run()

    def _load(self) -> None:
        """Put the run kept in memory into SQLite; once finished, the first indexes.

        Runs once for each (later calls find it done); a failure is kept for every
        request that needs SQL (`_sql`).
        """
        with self._loading:
            pending, self._pending = self._pending, None
            try:
                with self._lock:
                    if pending is not None:
                        self._insert(pending)
                    if self._finished and self._search is None:
                        self._finish_sql()
            except Exception as exc:  # reported to every request that needs SQL
                where = pending.load.path if pending is not None else "the runs"
                self._load_error = ViewerError(f"cannot index {where}: {exc!r}")
                _log.warning("%s", self._load_error)
            finally:
                self._early = None  # SQLite answers everything now
                self._loaded.set()
        if self._background and self._search is not None:
            self._search.start()

    def _insert(self, pending: _Pending) -> None:
        """Insert a run read with `add_run(defer=True)` (its rows are the index's)."""
        self._db.execute("BEGIN")
        try:
            for batch in pending.batches:
                pending.load.insert(batch)
            pending.load.complete(pending.run_id, pending.id_base)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _finish_sql(self) -> None:
        """The first page's indexes, read-only, and the builder of the rest (locked)."""
        self._db.executescript(INDEXES)
        self._db.execute("PRAGMA query_only = ON")
        sources = [
            (run.path / RESULTS_FILE, self._id_bases[run.run_id], run.run_id)
            for run in self._runs.values()
        ]
        self._search = SearchBuilder(
            self._db, self._lock, sources, then=LATER_INDEXES, after=self._save_cache
        )

    def _sql(self) -> None:
        """Wait until SQLite holds every run read (see `finish`).

        Raises:
            ViewerError: a run could not be put into SQLite.
        """
        if not self._loaded.is_set():
            self._load()  # before `finish()`, or beside its thread: whoever comes first
            self._loaded.wait()
        if self._load_error is not None:
            raise ViewerError(str(self._load_error)) from self._load_error

    def start_background(self) -> None:
        """Start building the rest of the index (see `finish`), if it has not started.

        A run kept in memory goes into SQLite first (on a thread of its own).
        """
        self._background = True  # for `finish` and `_load`, when there is no builder yet
        if self._search is not None:
            self._search.start()
        elif self._finished and self._pending is not None:
            self._start_loader()

    def _start_loader(self) -> None:
        """Start `_load` on a thread of its own, unless it was started."""
        with self._flags:
            started, self._loader_started = self._loader_started, True
        if not started:
            threading.Thread(target=self._load, name="wink-debug-load", daemon=True).start()

    def wait_for_search(self, timeout: float | None = None) -> None:
        """Wait until the full-text index is built (searches do this themselves).

        Raises:
            ViewerError: the index is not finished, the text could not be indexed, or
                `timeout` passed first.
        """
        if not self._finished:
            raise ViewerError("the index is not finished; call finish() first")
        self._sql()
        assert self._search is not None  # made by `_load` once finished
        self._search.start()
        self._search.wait(timeout)

    def _add_run(self, run_dir: Path, run_id: str, *, defer: bool) -> IndexedRun:
        path = run_dir / RESULTS_FILE
        id_base = self._id_bases[run_id] = self._next_id - 1
        load = Load(self._db, path, {"run_id": run_id, "id_base": id_base})
        self._db.execute("BEGIN")
        try:
            batches = read_batches(path, id_base=id_base, run_id=run_id)
            kept = load.read(batches, keep=MAX_EARLY_ROWS if defer else 0)
            info = load.complete(run_id, id_base) if kept is None else load.info(run_id, load.found)
            self._db.execute("COMMIT")
        except OSError as exc:
            self._db.execute("ROLLBACK")
            raise ViewerError(f"cannot read {path}: {exc}; is this a run directory?") from exc
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        first, last = self._ids[run_id] = (self._next_id, self._next_id + load.last_line - 1)
        gathered = load.columns.result()
        if gathered is not None:
            self._gathered[run_id] = gathered
        if kept is not None:  # every row read is the index's: nothing was dropped
            assert gathered is not None
            self._pending = _Pending(load, kept, run_id, id_base)
            self._early = EarlyRun(run_id, (first, last), kept, gathered)
            self._loaded.clear()
        self._next_id += load.last_line
        if load.skipped_count:
            _log.warning("%s: skipped %d unreadable lines", path, load.skipped_count)
        return _indexed_run(run_dir, info)

    # -- reading -------------------------------------------------------------------------

    def runs(self) -> tuple[IndexedRun, ...]:
        """The indexed runs, in the order they were added."""
        # Without the lock, which a run being put into SQLite holds for a while: runs
        # are added before the index is finished, and a copy of a dict is atomic.
        return tuple(self._runs.values())

    def run(self, run_id: str) -> IndexedRun | None:
        """The indexed run called `run_id`, if any."""
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
        early = self._early_run(run_id)
        if early is not None:
            found = early.page(flt, sort=sort, descending=descending, offset=offset, limit=limit)
            if found is not None:
                return found
        where, params = where_clause(run_id, flt)
        if flt.search.strip():
            self.wait_for_search()
        direction = "DESC" if descending else "ASC"
        sql = (
            f"SELECT {', '.join(ROW_COLUMNS)} FROM results WHERE {where} "
            f"ORDER BY {column} {direction}, id {direction} LIMIT ? OFFSET ?"
        )
        self._sql()
        with self._lock:
            (total,) = self._db.execute(
                f"SELECT count(*) FROM results WHERE {where}", params
            ).fetchone()
            rows = self._db.execute(sql, [*params, limit, offset]).fetchall()
        return ResultPage(
            total=total, offset=offset, limit=limit, rows=tuple(map(result_row, rows))
        )

    def get(self, run_id: str, result_id: int) -> ResultRow | None:
        """The row of result `result_id` of run `run_id`, if there is one."""
        early = self._early_run(run_id)
        if early is not None:
            return early.get(result_id)
        sql = f"SELECT {', '.join(ROW_COLUMNS)} FROM results WHERE id = ? AND run_id = ?"
        found = self._fetch(sql, (result_id, run_id))
        return result_row(found[0]) if found else None

    def siblings(self, run_id: str, sample_id: str) -> tuple[ResultRow, ...]:
        """Every result of `sample_id` in the run (all experiments and epochs)."""
        early = self._early_run(run_id)
        if early is not None:
            return early.siblings(sample_id)
        sql = (
            f"SELECT {', '.join(ROW_COLUMNS)} FROM results WHERE run_id = ? AND sample_id = ? "
            "ORDER BY experiment, epoch"
        )
        return tuple(map(result_row, self._fetch(sql, (run_id, sample_id))))

    def in_memory(self, run_id: str) -> bool:
        """Whether run `run_id` is answered from memory while SQLite loads it (`finish`)."""
        return self._early_run(run_id) is not None

    def _early_run(self, run_id: str) -> EarlyRun | None:
        """The run kept in memory while SQLite loads it, if it is `run_id`."""
        early = self._early
        return early if early is not None and early.run_id == run_id else None

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of `sql`: from the run kept in memory when it answers it, else SQLite."""
        early = self._early
        if early is not None:
            found = early.answer(sql, params)
            if found is not None:
                return found
        self._sql()
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def read(self, run_id: str, result_id: int) -> EvalResult | None:
        """Read result `result_id` back from its run's file and validate it in full.

        Raises:
            ViewerError: the file changed since it was indexed, or the line has the
                fields the index needs but is not a valid `EvalResult` (`read_result`).
        """
        located = self._locate(run_id, result_id)
        return None if located is None else read_result(located)

    def _locate(self, run_id: str, result_id: int) -> Located | None:
        run = self._runs.get(run_id)
        early = self._early_run(run_id)
        if early is not None:
            found = early.locate(result_id)
        else:
            sql = (
                "SELECT sample_id, experiment, epoch, line, offset FROM results "
                "WHERE id = ? AND run_id = ?"
            )
            found = self._fetch(sql, (result_id, run_id))
        if not found or run is None:
            return None
        ((sample_id, experiment, epoch, line, offset),) = found
        return Located(run.path / RESULTS_FILE, offset, line, (sample_id, experiment, epoch))

    def gathered(self, run_id: str) -> Gathered | None:
        """What was gathered of run `run_id` while it was read (`_viewer_columns.py`).

        None when it could not be gathered, or the index was opened from its cache: the
        statistics and charts read the index then.
        """
        return self._gathered.get(run_id)

    def experiments(self, run_id: str) -> dict[str, int]:
        """Experiment -> results of run `run_id`, in order of first appearance."""
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
        return {name: (int(n), int(passed)) for name, n, passed in self._fetch(sql, (run_id,))}

    def statuses(self, run_id: str) -> dict[str, int]:
        """`passed` / `failed` / `error` -> results of run `run_id`."""
        return self._counts("status", run_id)

    def facets(self, run_id: str) -> Facets:
        """The values each filter of run `run_id` can take."""
        first, last = self._ids.get(run_id, (0, -1))
        gathered = self._gathered.get(run_id)
        # One scan for the three counts (each in order of first appearance), unless
        # they were counted while the run was read.
        tally = gathered.tally if gathered else self._fetch(TALLY, (run_id,))
        # A run's results are the ids first..last: no join with `results` needed.
        return facets_of(tally, self._fetch(META_FACETS, (first, last)))

    def _counts(self, column: str, run_id: str) -> dict[str, int]:
        sql = (
            f"SELECT {column}, count(*) FROM results WHERE run_id = ? "
            f"GROUP BY {column} ORDER BY min(id)"
        )
        return dict(self._fetch(sql, (run_id,)))

    def cost_rows(self, run_id: str, experiment: str) -> list[tuple[Any, ...]]:
        """`(sample_id, epoch, cost, judge_cost)` of each result of one experiment."""
        sql = (
            "SELECT sample_id, epoch, cost, judge_cost FROM results "
            "WHERE run_id = ? AND experiment = ? ORDER BY id"
        )
        return self._fetch(sql, (run_id, experiment))

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read-only SQL query over the tables `results`, `meta` and `metrics`.

        For the viewer's charts (`_viewer_charts.py`); after `finish()` the database
        refuses writes. While SQLite loads a run kept in memory, the queries of its
        page are answered from there (`EarlyRun.answer`); the others wait for SQLite.
        """
        return self._fetch(sql, params)

    def reader(self) -> IndexReader:
        """A copy of the index as it is, on a connection of its own, for `query` only.

        Queries on it run beside the index's own (SQLite works without the GIL): the
        viewer makes a run page's charts on one while it computes the statistics, or,
        taken before `finish()` (the runs' rows, without the first page's indexes),
        while the index builds those. Call it before the background work starts
        (`start_background`), while the tables hold what the copy should.
        """
        copy = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._sql()
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
        found = self._fetch(sql, (run_id, experiment))
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
        found = self._fetch(sql, (run_id, json.dumps(list(ids))))
        return {row.id: row for row in map(result_row, found)}


def _indexed_run(run_dir: Path, info: dict[str, Any]) -> IndexedRun:
    """An `IndexedRun` from its `runs.info` (JSON data)."""
    return IndexedRun(
        run_id=info["run_id"], path=run_dir, results=info["results"], lines=info["lines"],
        skipped=tuple(info["skipped"]), skipped_count=info["skipped_count"],
    )  # fmt: skip
