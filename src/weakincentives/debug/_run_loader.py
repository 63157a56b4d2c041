"""One loader of a run's `results.jsonl` into SQLite, for `wink query` and `wink debug`.

Both tools turn the lines of a run into rows of their own tables; they share this for it:

- `stage_lines` reads the file in binary, a batch of lines at a time, into the temporary
  table `STAGE`: line number, byte offset (the viewer reads a line again from it) and
  text of each non-blank line. After each batch the caller runs its `INSERT ... SELECT`
  statements on it, then the batch is dropped, so memory holds one batch of lines
  however large the file. A snapshot size limits what is read (`wink query` reads what
  the file held when it was opened), and `only` re-reads chosen lines.
- SQLite parses the JSON, not Python: the `FIELDS` expressions pull values out of a
  line with `->>` / `->`, which share one parse of the line within a statement.
  `fields_select` wraps them in a subquery that evaluates each once per line and skips
  text that is not JSON (the operators would raise on it); `COMPLETE` tells a line cut
  mid-write (no newline) from a corrupt one. `REWARD` and `METRICS` derive a result's
  reward and `{name: value}` metrics from its metric list.
- `delete_superseded` applies the rule every reader of a run follows: *the last line
  written for a `(sample_id, experiment, epoch)` wins*.

**Speed.** Measured on 100,000 results (87 MB, `bench/bench_query.py`): staging takes
about 0.15 s (reading, decoding and binding lines 25 to a statement, the cheapest way
found to hand text to SQLite from Python) and SQLite parses every line in about
0.15 s; each value pulled out of a parsed line costs about 0.01 s more. `json.loads`
alone takes longer than all of that, pydantic validation several times longer. Binding
each line straight into the extracting `INSERT` (no staging) was twice as slow: the
statement then runs once per line instead of once per batch.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "COMPLETE",
    "FIELDS",
    "METRICS",
    "REWARD",
    "STAGE",
    "Batch",
    "delete_superseded",
    "fields_select",
    "prepare",
    "read_lines",
    "stage",
    "stage_lines",
]

STAGE = "temp.wink_lines"
"""The staging table: `line` (number, from 1), `offset` (in bytes) and text `j` of one
batch of non-blank lines; `j` keeps the line's newline (see `COMPLETE`)."""

COMPLETE = "(substr(j, -1) = char(10))"
"""SQL: whether the staged line `j` ended with a newline (a line without one was cut
mid-write, or by the snapshot's size limit)."""

BATCH_LINES = 1000
"""Lines staged at a time: large enough to amortize statements, small enough to stay
in SQLite's page cache (about 1 MB of text for typical results)."""

_ROWS_PER_INSERT = 25
"""Lines per INSERT statement while staging: one statement per line costs twice as much
(Python's per-statement overhead), more gains little."""

FIELDS: Mapping[str, str] = {
    "sample_id": "j ->> '$.sample_id'",
    "experiment": "j ->> '$.experiment_name'",
    "epoch": "coalesce(j ->> '$.epoch', 0)",
    "request_id": "j ->> '$.request_id'",
    "session_id": "j ->> '$.session_id'",
    "passed": "coalesce(j ->> '$.score.passed', (j ->> '$.score.value') >= 0.5, 0)",
    "score": "j ->> '$.score.value'",
    "reason": "j ->> '$.score.reason'",
    "score_metrics": "j -> '$.score.metrics'",
    "latency_ms": "j ->> '$.latency_ms'",
    "input_tokens": "coalesce(j ->> '$.usage.input_tokens', 0)",
    "output_tokens": "coalesce(j ->> '$.usage.output_tokens', 0)",
    "cached_tokens": "coalesce(j ->> '$.usage.cached_tokens', 0)",
    "cost_usd": "j ->> '$.cost'",
    "judge_cost_usd": "j ->> '$.judge_cost'",
    "error_kind": "j ->> '$.error_kind'",
    "error": "j ->> '$.error'",
    "metadata": "j -> '$.metadata'",
    "output": "nullif(j -> '$.output', 'null')",
    "input": "nullif(j -> '$.input', 'null')",
    "expected": "nullif(j -> '$.expected', 'null')",
    "bundle_path": "j ->> '$.bundle_path'",
    "delivery_count": "coalesce(j ->> '$.delivery_count', 1)",
    "tool_calls": "coalesce(json_array_length(j, '$.tool_calls'), 0)",
    "messages": "coalesce(json_array_length(j, '$.messages'), 0)",
}
"""SQL expressions over a staged line `j`, by the name `fields_select` gives them.

Values as written: `score_metrics` the score's metric list as JSON, `metadata` / `output`
JSON text, `tool_calls` / `messages` how many were recorded. `passed` is the score's own
verdict (errors are not folded in); a line without one gets `Score`'s default,
`value >= 0.5` (0 when it has no score at all). `wink query` and the viewer both take it
from here, so they agree.
"""

_STAGE_SQL = (
    f"CREATE TEMP TABLE IF NOT EXISTS {STAGE.split('.')[1]} "
    "(line INTEGER PRIMARY KEY, offset INTEGER NOT NULL, j TEXT NOT NULL)"
)
_INSERT = f"INSERT INTO {STAGE} VALUES "
_INSERT_MANY = _INSERT + ", ".join(["(?, ?, ?)"] * _ROWS_PER_INSERT)
_INSERT_ONE = _INSERT + "(?, ?, ?)"


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch of lines, staged in `STAGE` while the caller reads it."""

    lines: int
    """Lines staged (blank lines are not)."""
    last_line: int
    """Number of the last line staged."""


def prepare(conn: sqlite3.Connection) -> None:
    """Create the staging table (idempotent); for an in-memory database, in memory.

    A batch then never touches a temporary file: SQLite's default puts temporary
    tables in a file once they outgrow a small cache. A database in a file (`wink
    query`'s working copy) keeps that default: `temp_store = MEMORY` would also keep
    in memory the sorted runs SQLite writes while it builds an index, which grow with
    the table (15 MB more at 300,000 results), and a batch fits the temporary cache.
    """
    (file,) = conn.execute("SELECT file FROM pragma_database_list WHERE name = 'main'").fetchone()
    if not file:
        conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(_STAGE_SQL)


def stage_lines(
    conn: sqlite3.Connection,
    path: Path,
    *,
    limit: int | None = None,
    only: Collection[int] | None = None,
    batch_lines: int = BATCH_LINES,
) -> Iterator[Batch]:
    """Stage the non-blank lines of `path` in `STAGE`, one batch per iteration.

    Each batch is in the table while the caller handles the `Batch` it was given; the
    table is emptied before each batch and after the last. Call `prepare(conn)` first;
    run the iteration inside a transaction so that a failure rolls the batch back too.

    Args:
        conn: The connection to stage into.
        path: The results file.
        limit: Read only the first `limit` bytes (a snapshot: later appends are left out;
            a line cut by the limit is staged as incomplete).
        only: Stage only these line numbers (1-based); every line when None.
        batch_lines: Lines per batch.

    Raises:
        OSError: the file cannot be opened or read.
    """
    for flat in read_lines(path, limit=limit, only=only, batch_lines=batch_lines):
        yield stage(conn, flat)
    conn.execute(f"DELETE FROM {STAGE}")


def stage(conn: sqlite3.Connection, flat: Sequence[int | str]) -> Batch:
    """Stage one batch in `STAGE` (replacing what it held): `line, offset, text`, flattened.

    `stage_lines` reads a file into batches of this shape; a caller that read the lines
    itself stages them here (the caller empties `STAGE` afterwards).
    """
    step = 3 * _ROWS_PER_INSERT
    conn.execute(f"DELETE FROM {STAGE}")
    whole = len(flat) - len(flat) % step
    conn.executemany(_INSERT_MANY, (flat[i : i + step] for i in range(0, whole, step)))
    conn.executemany(_INSERT_ONE, (flat[i : i + 3] for i in range(whole, len(flat), 3)))
    return Batch(lines=len(flat) // 3, last_line=int(flat[-3]))


def read_lines(
    path: Path,
    *,
    limit: int | None = None,
    only: Collection[int] | None = None,
    batch_lines: int = BATCH_LINES,
) -> Iterator[list[int | str]]:
    """Batches of `line, offset, text` of the non-blank lines, flattened (what `stage` takes).

    The arguments are `stage_lines`'.

    Raises:
        OSError: the file cannot be opened or read.
    """
    offset = lineno = 0
    end = limit if limit is not None else -1
    stop = False
    with path.open("rb") as handle:
        while not stop and (raws := list(itertools.islice(handle, batch_lines))):
            flat: list[int | str] = []
            for raw in raws:
                lineno += 1
                if 0 <= end < offset + len(raw):  # the snapshot ends in this line
                    raw = raw[: max(end - offset, 0)]
                    stop = True
                if raw and not raw.isspace() and (only is None or lineno in only):
                    flat += (lineno, offset, raw.decode("utf-8", "replace"))
                if stop:
                    break
                offset += len(raw)
            if flat:
                yield flat


def fields_select(names: Collection[str], *, extra: str = "") -> str:
    """SQL: the staged lines that are JSON, as `line, offset` and the `FIELDS` in `names`.

    Wrap it (`SELECT ... FROM (<this>) WHERE ...`) to filter and derive columns: the
    values are extracted once per line. `extra` adds select items over `j`.

    Raises:
        KeyError: a name is not one of `FIELDS`.
    """
    columns = ", ".join(f"{FIELDS[name]} AS {name}" for name in names)
    more = f", {extra}" if extra else ""
    # LIMIT -1 keeps SQLite from flattening the subquery into the outer query, which
    # would evaluate each extraction once per use instead of once per line.
    return f"SELECT line, offset, {columns}{more} FROM {STAGE} WHERE json_valid(j) LIMIT -1"


_FAST_METRICS = 4


def _metric(k: int, field: str, op: str = "->>") -> str:
    return f"(score_metrics {op} '$[{k}].{field}')"


def _reward_sql() -> str:
    """`reward` from `score_metrics`: the weighted mean of the metrics with weight > 0.

    As `Score.reward` computes it; 0.0 when no metric has a weight.

    Up to `_FAST_METRICS` metrics it is spelled out by position (a lookup in the small
    array is cheap); more fall back to `json_each`, three times slower.
    """
    cases = []
    for n in range(1, _FAST_METRICS + 1):
        weights = [f"max({_metric(k, 'weight')}, 0)" for k in range(n)]
        num = " + ".join(f"ifnull({_metric(k, 'value')} * {w}, 0)" for k, w in enumerate(weights))
        den = " + ".join(f"ifnull({w}, 0)" for w in weights)
        cases.append(f"WHEN {n} THEN ({num}) / nullif({den}, 0)")
    slow = """(SELECT sum((m.value ->> '$.value') * (m.value ->> '$.weight'))
                   / sum(m.value ->> '$.weight')
               FROM json_each(score_metrics) AS m WHERE m.value ->> '$.weight' > 0)"""
    return (
        "coalesce(CASE coalesce(json_array_length(score_metrics), 0) WHEN 0 THEN 0.0 "
        f"{' '.join(cases)} ELSE {slow} END, 0.0)"
    )


def _metrics_sql() -> str:
    """`metrics` from `score_metrics`: `{name: value}`, values as written.

    Positional up to `_FAST_METRICS` metrics, like `_reward_sql`. A name that is not
    text (a corrupt line) does not fail the load: `format` makes text of it.
    """
    cases = []
    for n in range(1, _FAST_METRICS + 1):
        pairs = ", ".join(
            f"format('%s', {_metric(k, 'name')}), {_metric(k, 'value', '->')}" for k in range(n)
        )
        cases.append(f"WHEN {n} THEN json_object({pairs})")
    slow = """(SELECT json_group_object(m.value ->> '$.name', m.value -> '$.value')
               FROM json_each(score_metrics) AS m)"""
    return (
        "CASE coalesce(json_array_length(score_metrics), 0) WHEN 0 THEN '{}' "
        f"{' '.join(cases)} ELSE {slow} END"
    )


REWARD = _reward_sql()
"""SQL: a result's `Score.reward`, from its metric list in a column `score_metrics`."""
METRICS = _metrics_sql()
"""SQL: a result's metrics as a JSON object `{name: value}`, from `score_metrics`."""


def delete_superseded(
    conn: sqlite3.Connection,
    table: str,
    key: tuple[str, ...],
    *,
    where: str = "1",
    params: Sequence[object] = (),
) -> list[int]:
    """Delete the rows of `table` a later row with the same `key` supersedes.

    The later row is the one with the larger rowid (rows are inserted in file order).
    `where` (with `?` bound from `params`) narrows the rows considered (say, one run).
    One grouping pass over `key` (ordered by its index when `table` has one) finds the
    repeated keys; usually there are none.

    Returns:
        The rowids deleted, in no particular order.
    """
    cols = ", ".join(key)
    same = " AND ".join(f"t.{c} = d.{c}" for c in key)
    gone = [
        row[0]
        for row in conn.execute(
            f"SELECT t.rowid FROM (SELECT {cols}, max(rowid) AS keep FROM {table} WHERE {where} "
            f"GROUP BY {cols} HAVING count(*) > 1) AS d JOIN {table} AS t ON {same} "
            "WHERE t.rowid < d.keep",
            params,
        )
    ]
    conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", ((r,) for r in gone))
    return gone
