"""The viewer's index: every result of the runs it shows, in an in-memory SQLite database.

`wink debug` reads each run's `results.jsonl` once at startup and keeps, per result, the
columns the results grid filters and sorts on, its metadata (one row per key) and a
full-text index (SQLite FTS5) over its output, transcript, tool calls, reason and error.
Full results are not kept: a row remembers where its line starts in the file, and the
sample page reads that one line again. So memory grows with the index, not with the
transcripts, and one page of 100,000 results is one indexed SQL query.

**Which line counts.** As for every reader of a run, the last line written for a
`(sample_id, experiment_name, epoch)` wins; earlier lines are dropped from the index.
Lines that do not parse are skipped and counted (the viewer shows what it could read).

After `finish()` the database is read-only (`PRAGMA query_only`); one lock serializes
access, since the web server calls in from several threads.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from weakincentives import serde
from weakincentives.errors import SerdeError, ViewerError
from weakincentives.evals import RESULTS_FILE, EvalResult, Score
from weakincentives.runtime.session import TokenUsage

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
_BATCH = 2000
_MAX_FACET_VALUES = 50

_SCHEMA = """
CREATE TABLE results (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, sample_id TEXT NOT NULL,
    experiment TEXT NOT NULL, epoch INTEGER NOT NULL, status TEXT NOT NULL,
    error_kind TEXT, score REAL NOT NULL, passed INTEGER NOT NULL, latency_ms REAL NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, tokens INTEGER NOT NULL,
    reason TEXT NOT NULL, error TEXT, tool_calls INTEGER NOT NULL, messages INTEGER NOT NULL,
    has_bundle INTEGER NOT NULL, line INTEGER NOT NULL, offset INTEGER NOT NULL,
    length INTEGER NOT NULL
);
CREATE TABLE meta (result_id INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL);
CREATE INDEX meta_result ON meta (result_id);
CREATE VIRTUAL TABLE search USING fts5(body, content='', tokenize='unicode61');
"""

_INDEXES = """
CREATE INDEX results_run ON results (run_id, experiment, id);
CREATE INDEX results_sample ON results (run_id, sample_id);
CREATE INDEX results_score ON results (run_id, score);
CREATE INDEX results_latency ON results (run_id, latency_ms);
CREATE INDEX results_tokens ON results (run_id, tokens);
CREATE INDEX meta_key ON meta (key, value, result_id);
"""

_ROW_COLUMNS = (
    "id", "run_id", "sample_id", "experiment", "epoch", "status", "error_kind", "score",
    "passed", "latency_ms", "input_tokens", "output_tokens", "tokens", "reason", "error",
    "tool_calls", "messages", "has_bundle",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Located:
    path: Path
    offset: int
    length: int
    line: int
    key: tuple[str, str, int]


class ResultIndex:
    """The index of every result of the runs the viewer shows (see the module docstring).

    Example:
        >>> index = ResultIndex()
        >>> index.add_run(run_dir)  # doctest: +SKIP
        >>> index.finish()
        >>> index.page("my-run", ResultFilter(status="error")).total  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        self._runs: dict[str, IndexedRun] = {}
        self._next_id = 1
        self._finished = False

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

    def finish(self) -> None:
        """Build the secondary indexes and make the database read-only."""
        with self._lock:
            if not self._finished:
                self._db.executescript(_INDEXES)
                self._db.execute("ANALYZE")
                self._db.execute("PRAGMA query_only = ON")
                self._finished = True

    def _add_run(self, run_dir: Path, run_id: str) -> IndexedRun:
        path = run_dir / RESULTS_FILE
        seen: dict[tuple[str, str, int], int] = {}
        rows: list[tuple[Any, ...]] = []
        metas: list[tuple[int, str, str]] = []
        texts: list[tuple[int, str]] = []
        skipped: list[str] = []
        skipped_count = lines = 0
        for lineno, offset, raw in _lines(path):
            lines += 1
            try:
                result = serde.loads(EvalResult, raw)
            except SerdeError as exc:
                if raw.endswith(b"\n"):  # an unterminated last line was cut mid-write
                    skipped_count += 1
                    if len(skipped) < 20:
                        skipped.append(f"{path}:{lineno}: {str(exc)[:200]}")
                continue
            rid = self._next_id
            self._next_id += 1
            previous = seen.get(result.key)
            if previous is not None:
                self._drop(previous, rows, metas)
            seen[result.key] = rid
            rows.append(_row(rid, run_id, result, lineno, offset, len(raw)))
            metas.extend((rid, k, _as_text(v)) for k, v in result.metadata.items())
            texts.append((rid, _search_text(result)))
            if len(rows) >= _BATCH:
                self._flush(rows, metas, texts)
        self._flush(rows, metas, texts)
        if skipped_count:
            _log.warning("%s: skipped %d unreadable lines", path, skipped_count)
        return IndexedRun(
            run_id=run_id, path=run_dir, results=len(seen), lines=lines,
            skipped=tuple(skipped), skipped_count=skipped_count,
        )  # fmt: skip

    def _drop(self, rid: int, rows: list[tuple[Any, ...]], metas: list[Any]) -> None:
        # A later line for the same key: forget the earlier one, buffered or flushed. Its
        # full-text entry stays, but searches only return ids still in `results`.
        rows[:] = [r for r in rows if r[0] != rid]
        metas[:] = [m for m in metas if m[0] != rid]
        self._db.execute("DELETE FROM results WHERE id = ?", (rid,))
        self._db.execute("DELETE FROM meta WHERE result_id = ?", (rid,))

    def _flush(self, rows: list[Any], metas: list[Any], texts: list[Any]) -> None:
        marks = ", ".join("?" * (len(_ROW_COLUMNS) + 3))
        self._db.executemany(f"INSERT INTO results VALUES ({marks})", rows)
        self._db.executemany("INSERT INTO meta VALUES (?, ?, ?)", metas)
        self._db.executemany("INSERT INTO search (rowid, body) VALUES (?, ?)", texts)
        rows.clear()
        metas.clear()
        texts.clear()

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
        """Read result `result_id` back from its run's file.

        Raises:
            ViewerError: the file changed since it was indexed.
        """
        located = self._locate(run_id, result_id)
        if located is None:
            return None
        try:
            with located.path.open("rb") as handle:
                handle.seek(located.offset)
                raw = handle.read(located.length)
            result = serde.loads(EvalResult, raw)
        except (OSError, SerdeError) as exc:
            raise ViewerError(
                f"{located.path}:{located.line} cannot be read again ({exc}); the file changed "
                "since the viewer started: restart `wink debug`"
            ) from exc
        if result.key != located.key:
            raise ViewerError(
                f"{located.path}:{located.line} changed since the viewer started: restart "
                "`wink debug`"
            )
        return result

    def _locate(self, run_id: str, result_id: int) -> _Located | None:
        sql = (
            "SELECT sample_id, experiment, epoch, line, offset, length FROM results "
            "WHERE id = ? AND run_id = ?"
        )
        with self._lock:
            found = self._db.execute(sql, (result_id, run_id)).fetchone()
            run = self._runs.get(run_id)
        if found is None or run is None:
            return None
        sample_id, experiment, epoch, line, offset, length = found
        return _Located(
            run.path / RESULTS_FILE, offset, length, line, (sample_id, experiment, epoch)
        )

    def experiments(self, run_id: str) -> dict[str, int]:
        """Experiment -> results of run `run_id`, in order of first appearance."""
        with self._lock:
            return self._counts("experiment", run_id)

    def statuses(self, run_id: str) -> dict[str, int]:
        """`passed` / `failed` / `error` -> results of run `run_id`."""
        with self._lock:
            return self._counts("status", run_id)

    def facets(self, run_id: str) -> Facets:
        """The values each filter of run `run_id` can take."""
        with self._lock:
            experiments = self._counts("experiment", run_id)
            statuses = self._counts("status", run_id)
            kinds = self._counts("error_kind", run_id, "AND error_kind IS NOT NULL")
            rows = self._db.execute(
                "SELECT m.key, m.value, count(*) AS n FROM meta m JOIN results r ON r.id = "
                "m.result_id WHERE r.run_id = ? GROUP BY m.key, m.value ORDER BY m.key, n DESC, "
                "m.value",
                (run_id,),
            ).fetchall()
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

    def stat_rows(self, run_id: str, experiment: str) -> list[tuple[Any, ...]]:
        """The columns behind an experiment's statistics, one row per result, in index order.

        Rows are `(sample_id, status, score, error_kind, latency_ms, input_tokens,
        output_tokens)` (see `StatRow`).
        """
        sql = (
            "SELECT sample_id, status, score, error_kind, latency_ms, input_tokens, "
            "output_tokens FROM results WHERE run_id = ? AND experiment = ? ORDER BY id"
        )
        with self._lock:
            return self._db.execute(sql, (run_id, experiment)).fetchall()

    def outcomes(self, run_id: str, experiment: str) -> tuple[EvalResult, ...]:
        """Light `EvalResult`s of one experiment (enough for rates, scores and pairing).

        They carry ids, epoch, score (value, passed, reason), latency, error and usage;
        not the transcript, output or metadata.
        """
        sql = (
            "SELECT sample_id, epoch, score, passed, reason, latency_ms, error, error_kind, "
            "input_tokens, output_tokens FROM results WHERE run_id = ? AND experiment = ? "
            "ORDER BY id"
        )
        with self._lock:
            found = self._db.execute(sql, (run_id, experiment)).fetchall()
        return tuple(
            EvalResult(
                sample_id=sample_id,
                experiment_name=experiment,
                epoch=epoch,
                score=Score(value=score, passed=bool(passed), reason=reason),
                latency_ms=latency,
                error=error,
                error_kind=cast(Any, kind),
                run_id=run_id,
                usage=TokenUsage(input_tokens=tin, output_tokens=tout),
            )
            for sample_id, epoch, score, passed, reason, latency, error, kind, tin, tout in found
        )

    def ids_by_pair(self, run_id: str, experiment: str) -> dict[tuple[str, int], int]:
        """`(sample_id, epoch)` -> result id, for one experiment of a run."""
        sql = "SELECT sample_id, epoch, id FROM results WHERE run_id = ? AND experiment = ?"
        with self._lock:
            rows = self._db.execute(sql, (run_id, experiment)).fetchall()
        return {(s, e): i for s, e, i in rows}


# -- building helpers -----------------------------------------------------------------------


def _lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """`(line number, byte offset, raw line)` for each non-blank line of `path`."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ViewerError(f"cannot read {path}: {exc}; is this a run directory?") from exc
    with handle:
        offset = 0
        for lineno, raw in enumerate(handle, start=1):
            if raw.strip():
                yield lineno, offset, raw
            offset += len(raw)


def _status(result: EvalResult) -> str:
    if result.error is not None:
        return "error"
    return "passed" if result.score.passed else "failed"


def _row(
    rid: int, run_id: str, result: EvalResult, lineno: int, offset: int, length: int
) -> tuple[Any, ...]:
    usage = result.usage
    return (
        rid, run_id, result.sample_id, result.experiment_name, result.epoch, _status(result),
        result.error_kind, result.score.value, int(result.score.passed), result.latency_ms,
        usage.input_tokens, usage.output_tokens, usage.total_tokens, result.score.reason,
        result.error, len(result.tool_calls), len(result.messages),
        int(result.bundle_path is not None), lineno, offset, length,
    )  # fmt: skip


def _as_text(value: Any) -> str:
    """Metadata values as the text the filters compare: strings as is, the rest as JSON."""
    if isinstance(value, str):
        return value
    try:  # values read from JSON are plain already; serde only for the odd one that is not
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return json.dumps(serde.dump(value), ensure_ascii=False, sort_keys=True)


def _search_text(result: EvalResult) -> str:
    parts: list[str] = [result.sample_id, result.score.reason, result.error or ""]
    output = result.output
    parts.append(output if isinstance(output, str) else _as_text(output))
    for message in result.messages:
        parts.append(message.content or "")
        for call in message.tool_calls:
            parts.extend((call.name, call.arguments))
    for record in result.tool_calls:
        parts.extend((record.name, _as_text(record.params), record.message, record.error or ""))
    return "\n".join(p for p in parts if p)


def _to_row(values: Sequence[Any]) -> ResultRow:
    data = dict(zip(_ROW_COLUMNS, values, strict=True))
    data["passed"] = bool(data["passed"])
    data["has_bundle"] = bool(data["has_bundle"])
    return ResultRow(**data)
