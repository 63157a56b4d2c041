"""The viewer's full-text search: the text of every result, indexed after the columns.

The search box searches a result's sample id, reason, error, output, the strings of its
transcript (message contents, tool names, the arguments of the tool calls the model
asked for) and its tool calls (name, params, message, error), with SQLite FTS5 over
the index's `search` table (rowid = the result's id).

Gathering that text and indexing it is about half of what opening a run costs, so it is
done after the index has its columns (`ResultIndex.finish`), on a background thread:
the viewer serves pages at once, and a search waits (`SearchBuilder.wait`) only when it
comes before the text is in. The builder reads each run's file again, only the lines the
index kept (the last line per key), one batch at a time under the index's lock, so pages
are answered between batches.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from weakincentives.errors import ViewerError

from ._run_loader import STAGE, read_lines, stage

__all__ = ["SEARCH_WAIT", "SearchBuilder"]

SEARCH_WAIT = 300.0
"""Seconds a search waits for the text index before it is refused."""

_log = logging.getLogger(__name__)
_BATCH_LINES = 250

_NL = "char(10)"


def _lines_of(*parts: str) -> str:
    """SQL: the non-NULL `parts`, each followed by a newline."""
    return " || ".join(f"ifnull({part} || {_NL}, '')" for part in parts)


_TOOL_CALL_TEXT = _lines_of(
    "c ->> '$.name'", "(c -> '$.params')", "c ->> '$.message'", "c ->> '$.error'"
)
_SEARCH_TEXT = _lines_of(
    "j ->> '$.sample_id'",
    "j ->> '$.score.reason'",
    "j ->> '$.error'",
    "iif(json_type(j, '$.output') = 'text', j ->> '$.output', nullif(j -> '$.output', 'null'))",
    # Every string of the transcript under these keys: message contents, tool names and
    # the arguments of the tool calls the model asked for.
    "(SELECT group_concat(atom, char(10)) FROM json_tree(j, '$.messages') "
    "WHERE type = 'text' AND key IN ('content', 'name', 'arguments'))",
    # Each tool call rendered once (LIMIT -1), its fields read from that small text.
    f"(SELECT group_concat({_TOOL_CALL_TEXT}, '') FROM (SELECT e.value AS c "
    "FROM json_each(j -> '$.tool_calls') AS e LIMIT -1))",
)
"""SQL over a staged line: the text the search box searches (see the module docstring)."""


_SEARCH_FILL = (
    f"INSERT INTO search (rowid, body) SELECT :id_base + line, {_SEARCH_TEXT} FROM {STAGE} "
    "WHERE json_valid(j)"
)
_KEPT = "SELECT line FROM results WHERE run_id = ?"


class SearchBuilder:
    """Fills the `search` table of an index's database for the runs given.

    Args:
        db: The index's connection (read-only between batches: `PRAGMA query_only`).
        lock: The lock that serializes every use of `db`.
        sources: `(results file, id base, run id)` per run: a line `n` of the file is
            result `id_base + n` of the index.
        then: SQL statements to run once the text is in, one at a time under the lock
            (the index's sort indexes).
        after: Called once all is built, before searches stop waiting (the
            index saves its cache).
    """

    def __init__(
        self,
        db: sqlite3.Connection,
        lock: threading.Lock,
        sources: Sequence[tuple[Path, int, str]],
        *,
        then: Sequence[str] = (),
        after: Callable[[], None] | None = None,
    ) -> None:
        self._db = db
        self._lock = lock
        self._sources = tuple(sources)
        self._then = tuple(then)
        self._after = after
        self._done = threading.Event()
        self._started = threading.Lock()
        self._error: str | None = None

    def start(self) -> None:
        """Build on a daemon thread, unless a build has started already."""
        if self._started.acquire(blocking=False):
            threading.Thread(target=self._build, name="wink-debug-search", daemon=True).start()

    def run(self) -> None:
        """Build now, in this thread, unless a build has started already.

        A failure is kept for `wait` to report.
        """
        if self._started.acquire(blocking=False):
            self._build()

    def _build(self) -> None:
        try:
            for path, id_base, run_id in self._sources:
                self._index(path, id_base, run_id)
            # Last: each holds the lock for a while (a page waits for one at most), and
            # until they exist the grid sorts without them.
            for statement in self._then:
                with self._lock:
                    self._db.execute("PRAGMA query_only = OFF")
                    try:
                        self._db.execute(statement)
                    finally:
                        self._db.execute("PRAGMA query_only = ON")
        except Exception as exc:  # reported to every search waiting on the index
            self._error = f"cannot index the text of the results: {exc}"
            _log.warning("%s", self._error)
        else:
            if self._after is not None:
                try:
                    self._after()
                except Exception:  # the index is complete either way
                    _log.warning("after the text index: %s failed", self._after, exc_info=True)
        finally:
            self._done.set()

    def _index(self, path: Path, id_base: int, run_id: str) -> None:
        with self._lock:
            kept = {line for (line,) in self._db.execute(_KEPT, (run_id,))}
        # Lines are read outside the lock, and a batch is small: a page asked for meanwhile
        # waits for one batch at most (milliseconds).
        for flat in read_lines(path, only=kept, batch_lines=_BATCH_LINES):
            with self._lock:
                self._db.execute("PRAGMA query_only = OFF")
                try:
                    stage(self._db, flat)
                    self._db.execute(_SEARCH_FILL, {"id_base": id_base})
                    self._db.execute(f"DELETE FROM {STAGE}")
                finally:
                    self._db.execute("PRAGMA query_only = ON")

    @property
    def ready(self) -> bool:
        """Whether the text index is complete (or failed)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the text index.

        Raises:
            ViewerError: the text could not be indexed, or `timeout` (default
                `SEARCH_WAIT`) passed first.
        """
        if not self._done.wait(SEARCH_WAIT if timeout is None else timeout):
            raise ViewerError("the search index is still being built; try again shortly")
        if self._error is not None:
            raise ViewerError(f"search is unavailable: {self._error}")
