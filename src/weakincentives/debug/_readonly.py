"""The read-only SQLite connection that runs a user's query, and the errors it reports.

`wink query` runs SQL typed by a person (or pasted from somewhere) over data it built.
Nothing that SQL does may write or delete a file, so four independent layers stand
between it and the disk:

1. the data is private, and the connection cannot write it: either a `serialize`d
   in-memory copy of the database that was built (`readonly_copy`: a write that got
   through would change only memory), or a private database file opened with
   `mode=ro` (`readonly_open`: SQLite opens the file read-only, so a write that got
   through fails with "attempt to write a readonly database", and the file is this
   process's own working copy in the temporary directory, never a run's cache);
2. `PRAGMA query_only=ON`, and `SQLITE_LIMIT_ATTACHED` set to 0;
3. an authorizer (`sqlite3` `set_authorizer`) that denies every action except reading,
   selecting, calling functions (minus a short deny list) and a few introspection
   pragmas. This is the layer that stops `ATTACH` and `VACUUM INTO`: both create their
   file before `query_only` is consulted, and both ask the authorizer first;
4. a lexical check that the statement starts with `SELECT`, `WITH`, `VALUES`, `EXPLAIN`
   or `PRAGMA`, because a few statements (`REINDEX`) never consult the authorizer.

Extension loading stays disabled (the Python default, and asserted here), and the
shell-only `readfile`/`writefile` functions do not exist in the library build of SQLite.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from weakincentives.errors import QueryError

__all__ = [
    "DENIED_FUNCTIONS",
    "SCHEMA_HINT",
    "QueryResult",
    "QueryStream",
    "check_statement",
    "readonly_copy",
    "readonly_open",
    "run_statement",
    "stream_statement",
    "tables_read",
    "translate_error",
]

SCHEMA_HINT = "run `wink query TARGET --schema` to list the tables and their columns"
"""The hint every SQL error ends with."""

DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"})
"""Functions refused by the authorizer even if a build of SQLite provides them."""

_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
_SAFE_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo"}
)
_READABLE_PRAGMAS = frozenset({"query_only"})
"""Pragmas that may be read (not set): `PRAGMA query_only` shows the guard is on."""
_STATEMENT_STARTS = frozenset({"select", "with", "values", "explain", "pragma"})
_WRITE_STARTS = frozenset(
    {"insert", "replace", "update", "delete", "create", "drop", "alter", "attach", "detach",
     "vacuum", "reindex", "analyze", "begin", "commit", "end", "rollback", "savepoint",
     "release", "upsert"}
)  # fmt: skip
_LEADING_NOISE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*", re.DOTALL)
_FIRST_WORD = re.compile(r"[A-Za-z]+")
_PROGRESS_OPS = 10_000
_FETCH_ROWS = 512
"""Rows a `QueryStream` fetches from SQLite at a time."""
"""SQLite virtual-machine steps between two checks for Ctrl-C and the deadline."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryResult:
    """The rows a query returned.

    Examples:
        >>> r = QueryResult(columns=("n",), rows=((1,), (2,)), truncated=False)
        >>> r.to_dicts()
        [{'n': 1}, {'n': 2}]
    """

    columns: tuple[str, ...]
    """Column names, in order (duplicates possible, as SQL allows)."""
    rows: tuple[tuple[Any, ...], ...]
    """Rows of SQLite values: None, int, float, str or bytes."""
    truncated: bool = False
    """True when more rows matched than the `limit` asked for."""

    def to_dicts(self) -> list[dict[str, Any]]:
        """Rows as dicts keyed by column name (a later duplicate name wins)."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _authorize(
    action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None
) -> int:
    del db, src
    if action in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return (
            sqlite3.SQLITE_DENY if (arg2 or "").lower() in DENIED_FUNCTIONS else sqlite3.SQLITE_OK
        )
    if action == sqlite3.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        if name in _SAFE_PRAGMAS or (name in _READABLE_PRAGMAS and arg2 is None):
            return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def readonly_copy(source: sqlite3.Connection) -> sqlite3.Connection:
    """A private in-memory copy of `source`'s main database that refuses every write."""
    try:
        data: bytes | None = source.serialize()
    except sqlite3.OperationalError:
        data = None  # an empty database has no pages to copy
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    try:
        if data is not None:
            conn.deserialize(data)
    except BaseException:
        conn.close()
        raise
    return _locked_down(conn)


def readonly_open(path: Path) -> sqlite3.Connection:
    """A connection to the database file at `path`, opened read-only, refusing every write.

    The file is opened with `mode=ro` (SQLite's own file handle cannot write), then
    locked down as `readonly_copy`'s copy is. Pass a private file (a working copy), so
    that nothing else writes it while a query reads it.

    Raises:
        sqlite3.OperationalError: the file cannot be opened.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    return _locked_down(conn)


def _locked_down(conn: sqlite3.Connection) -> sqlite3.Connection:
    """`conn` with layers 2 and 3 of the module docstring in place (closed on failure)."""
    try:
        conn.execute("PRAGMA trusted_schema=OFF")
        conn.execute("PRAGMA query_only=ON")
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        if hasattr(conn, "enable_load_extension"):  # absent when Python was built without it
            conn.enable_load_extension(False)
        conn.set_authorizer(_authorize)
    except BaseException:
        conn.close()
        raise
    return conn


def check_statement(sql: str) -> str:
    """Return `sql` stripped, or raise `QueryError` when it cannot be a read-only query.

    Raises:
        QueryError: empty SQL, or a statement that does not start with a reading keyword.
    """
    text = sql.strip()
    word = _first_word(text)
    if not word:
        raise QueryError(f"the SQL is empty; write a SELECT statement ({SCHEMA_HINT})")
    if word.lower() in _WRITE_STARTS:
        raise QueryError(
            f"{word.upper()} is not allowed: wink query is read-only and runs one SELECT "
            f"(or WITH ... SELECT, VALUES, EXPLAIN) statement; {SCHEMA_HINT}"
        )
    if word.lower() not in _STATEMENT_STARTS:
        raise QueryError(
            f'SQL error: near "{word[:30]}": syntax error; a query starts with SELECT, WITH, '
            f"VALUES, EXPLAIN or PRAGMA; {SCHEMA_HINT}"
        )
    return text


def _first_word(text: str) -> str:
    """The first keyword after whitespace and comments ("" for none; a symbol if no word)."""
    noise = _LEADING_NOISE.match(text)
    rest = text[noise.end() if noise else 0 :]
    word = _FIRST_WORD.match(rest)
    return word.group() if word else rest[:1]


def tables_read(conn: sqlite3.Connection, sql: str) -> dict[str, set[str]]:
    """The tables `sql` reads and, for each, the columns it reads (all names lower case).

    Found by compiling the statement without running it: `conn` must be a
    `readonly_copy`, the statement is compiled under the same authorizer, with an
    `EXPLAIN` prefix (unless it has one) so that nothing runs. The authorizer is asked
    about every column read as the statement compiles, so one compile tells both; a
    table read without naming a column (`count(*)`) maps to an empty set.

    Raises:
        QueryError: the SQL does not compile or is not allowed.
    """
    seen: dict[str, set[str]] = {}

    def record(
        action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None
    ) -> int:
        if action == sqlite3.SQLITE_READ and arg1:
            columns = seen.setdefault(arg1.lower(), set())
            if arg2:
                columns.add(arg2.lower())
        return _authorize(action, arg1, arg2, db, src)

    text = check_statement(sql)
    probe = text if _first_word(text).lower() == "explain" else f"EXPLAIN {text}"
    conn.set_authorizer(record)
    try:
        conn.execute(probe).close()
    except (sqlite3.Error, sqlite3.Warning) as exc:
        raise translate_error(exc) from exc
    finally:
        conn.set_authorizer(_authorize)
    return seen


def run_statement(
    conn: sqlite3.Connection,
    sql: str,
    *,
    limit: int | None = None,
    expired: Callable[[], bool] | None = None,
) -> QueryResult:
    """Run one read-only statement on a `readonly_copy` and fetch its rows.

    Args:
        conn: The connection from `readonly_copy`.
        sql: One statement.
        limit: Most rows to return; `QueryResult.truncated` tells whether more matched.
        expired: Checked every few thousand steps; the query stops when it returns True.

    Raises:
        QueryError: the SQL is not allowed, does not compile, fails, or was interrupted.
    """
    with stream_statement(conn, sql, limit=limit, expired=expired) as stream:
        rows = tuple(stream)
    return QueryResult(columns=stream.columns, rows=rows, truncated=stream.truncated)


def stream_statement(
    conn: sqlite3.Connection,
    sql: str,
    *,
    limit: int | None = None,
    expired: Callable[[], bool] | None = None,
) -> QueryStream:
    """`run_statement`, but the rows are fetched as the returned stream is read.

    Raises:
        QueryError: the SQL is not allowed or does not compile (errors while rows are
            read are raised by the iteration).
    """
    text = check_statement(sql)
    if limit is not None and limit < 0:
        raise QueryError(f"limit must be >= 0, got {limit}")
    # The handler runs Python code, which is where Ctrl-C gets delivered: returning
    # non-zero (or raising KeyboardInterrupt in it) makes SQLite stop with "interrupted".
    conn.set_progress_handler(
        (lambda: bool(expired())) if expired else (lambda: False), _PROGRESS_OPS
    )
    try:
        cursor = conn.execute(text)
    except (sqlite3.Error, sqlite3.Warning) as exc:
        conn.set_progress_handler(None, 0)
        raise translate_error(exc, timed_out=expired is not None and expired()) from exc
    except BaseException:
        conn.set_progress_handler(None, 0)
        raise
    return QueryStream(conn, cursor, limit=limit, expired=expired)


class QueryStream:
    """The rows of one query, fetched from SQLite a batch at a time as they are read.

    Iterate once; `count` and `truncated` are final when the iteration ends. Closing
    (or leaving the `with` block) frees the cursor; a stream read to its end closes
    itself.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        cursor: sqlite3.Cursor,
        *,
        limit: int | None,
        expired: Callable[[], bool] | None,
    ) -> None:
        self._conn = conn
        self._cursor: sqlite3.Cursor | None = cursor
        self._limit = limit
        self._expired = expired
        self.columns: tuple[str, ...] = tuple(d[0] for d in cursor.description or ())
        """Column names, in order."""
        self.count = 0
        """Rows read so far."""
        self.truncated = False
        """True when more rows matched than the limit (known once the rows are read)."""

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        cursor, limit = self._cursor, self._limit
        if cursor is None:
            return
        try:
            while batch := cursor.fetchmany(_FETCH_ROWS):
                for row in batch:
                    if limit is not None and self.count >= limit:
                        self.truncated = True
                        return
                    self.count += 1
                    yield row
        except (sqlite3.Error, sqlite3.Warning) as exc:
            timed_out = self._expired is not None and self._expired()
            raise translate_error(exc, timed_out=timed_out) from exc
        finally:
            self.close()

    def close(self) -> None:
        """Free the cursor (idempotent)."""
        if self._cursor is not None:
            self._cursor.close()
            self._cursor = None
            self._conn.set_progress_handler(None, 0)

    def __enter__(self) -> QueryStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def translate_error(exc: Exception, *, timed_out: bool = False) -> QueryError:
    """A `QueryError` with SQLite's message and a hint at what to do."""
    message = str(exc)
    if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in message:
        return QueryError(
            "the SQL holds more than one statement; wink query runs exactly one (remove the "
            "statements after the first `;`)"
        )
    if any(word in message for word in ("not authorized", "authorization denied", "prohibited")):
        return QueryError(
            f"SQLite refused the statement ({message}): wink query is read-only; only SELECT "
            "statements that read the loaded tables run (no ATTACH, PRAGMA writes, INSERT, "
            "UPDATE, DELETE, CREATE, DROP, VACUUM or load_extension)"
        )
    if "interrupted" in message:
        why = "it ran past its timeout" if timed_out else "it was interrupted (Ctrl-C)"
        return QueryError(f"the query stopped: {why}; add a LIMIT or a WHERE clause")
    return QueryError(f"SQL error: {message}; {SCHEMA_HINT}")
