"""`wink query TARGET "SQL"`: read-only SQL over a run, a directory of runs, or a bundle.

```
wink query runs/20261120-233501-ab12cd "SELECT experiment, avg(passed) FROM results GROUP BY 1"
wink query runs/ "SELECT run_id, status, results FROM runs" --format csv
wink query eval_bundles/<request_id>/<timestamp>.zip "SELECT * FROM logs"
wink query runs/<run-id> --schema
```

Rows go to stdout (a table, JSON or CSV); the row count, warnings and errors go to
stderr. JSON and CSV stream: rows are written as SQLite produces them, so memory does
not grow with the number of rows printed. A bad target or bad SQL exits with status 2. The engine is
`weakincentives.debug.QueryDatabase`.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from weakincentives.errors import QueryError
from weakincentives.redaction import default_redactor

from ._console import error_console

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from weakincentives.debug import QueryDatabase, QueryStream, TableInfo

__all__ = ["QueryFormat", "print_rows", "query", "register"]

TABLE_ROWS = 1000
"""Rows the table format prints when no `--limit` is given (JSON and CSV print all); with
a larger `--limit`, the rows of one table (the next rows come in the next table)."""
MAX_CELL = 60
"""Characters of a cell the table format shows before cutting it with an ellipsis."""
_WIDE = 10_000


class QueryFormat(StrEnum):
    """How `wink query` prints rows."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"


def query(
    target: Annotated[
        Path,
        typer.Argument(
            help="Run directory, directory of runs, or debug bundle (.zip).", show_default=False
        ),
    ],
    sql: Annotated[
        str | None,
        typer.Argument(help="One SELECT statement (see --schema).", show_default=False),
    ] = None,
    schema: Annotated[
        bool, typer.Option("--schema", help="List the tables, columns and example queries.")
    ] = False,
    fmt: Annotated[
        QueryFormat, typer.Option("--format", "-f", help="Output format.")
    ] = QueryFormat.TABLE,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=0,
            show_default=False,
            help=f"Print at most N rows (table format default: {TABLE_ROWS}).",
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(min=0.0, show_default=False, help="Stop the query after SECONDS."),
    ] = None,
    no_cache: Annotated[
        bool,
        typer.Option("--no-cache", help="Do not read or write .query-cache.sqlite in the run."),
    ] = False,
) -> None:
    """Run read-only SQL over an eval run, a directory of runs, or a debug bundle."""
    # rich and the query engine load here, not when `wink` starts.
    from rich.text import Text

    from weakincentives.debug import QueryDatabase

    err = error_console()
    if sql is None and not schema:
        err.print(
            '[red]error:[/] give the SQL to run, e.g. "SELECT * FROM results LIMIT 5", or --schema'
        )
        raise typer.Exit(2)
    try:
        with QueryDatabase.open(target, cache=not no_cache) as db:
            if schema:
                _print_schema(db, fmt)
            if sql is not None:
                shown = limit if limit is not None or fmt is not QueryFormat.TABLE else TABLE_ROWS
                with db.stream(sql, limit=shown, timeout=timeout) as stream:
                    print_rows(stream, fmt, sys.stdout)
                _print_count(err, stream, shown, explicit=limit is not None)
            for warning in db.warnings:
                err.print(Text.assemble(("warning: ", "yellow"), warning))
    except QueryError as exc:
        err.print(Text.assemble(("error: ", "red"), str(exc)))
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    """Add `wink query` to `app`."""
    app.command("query")(query)


# -- rows -------------------------------------------------------------------------------


def print_rows(stream: QueryStream, fmt: QueryFormat, out: IO[str]) -> None:
    """Write the rows of `stream` to `out` in `fmt`; JSON and CSV as they are read."""
    # Redacted again on the way out: a run written before redaction (or a bundle made by
    # other code) may hold a secret.
    clean = default_redactor().text
    if fmt is QueryFormat.JSON:
        _write_json(stream, out, clean)
    elif fmt is QueryFormat.CSV:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(stream.columns)
        writer.writerows([_csv_cell(v, clean) for v in row] for row in stream)
    else:
        # A table needs its rows for its widths: they are printed in blocks of
        # TABLE_ROWS, each a table of its own, so a large --limit holds one block.
        console = _console(out)
        block: list[Sequence[Any]] = []
        printed = False
        for row in stream:
            block.append(row)
            if len(block) == TABLE_ROWS:
                _print_table(console, stream.columns, block, clean)
                block, printed = [], True
        if block or not printed:
            _print_table(console, stream.columns, block, clean)


def _print_table(
    console: Console,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    clean: Callable[[str], str],
) -> None:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, highlight=False)
    for name in columns:
        table.add_column(name, no_wrap=True, overflow="ellipsis")
    for row in rows:
        table.add_row(*(_table_cell(v, clean) for v in row))
    console.print(table)


def _write_json(stream: QueryStream, out: IO[str], clean: Callable[[str], str]) -> None:
    """A JSON array of row objects, row by row: `json.dumps(rows, indent=2)`'s text."""
    columns = stream.columns
    first = True
    for row in stream:
        item = json.dumps(
            {k: _jsonable(v, clean) for k, v in zip(columns, row, strict=True)},
            indent=2,
            ensure_ascii=False,
        )
        out.write(("[\n  " if first else ",\n  ") + item.replace("\n", "\n  "))
        first = False
    out.write("[]\n" if first else "\n]\n")


def _console(file: IO[str] | None = None) -> Console:
    from rich.console import Console

    out = Console(highlight=False, file=file)
    if not out.is_terminal:
        # Piped or captured: print at natural width instead of squeezing every column
        # into 80 characters (a terminal gets ellipses instead).
        out = Console(highlight=False, width=_WIDE, file=file)
    return out


def _print_count(err: Console, stream: QueryStream, shown: int | None, *, explicit: bool) -> None:
    from rich.text import Text

    n = stream.count
    line = f"{n} row{'' if n == 1 else 's'}"
    if stream.truncated:
        hint = "" if explicit else "; pass --limit N for more, or --format csv for all"
        line += f" (more matched: stopped at {shown}{hint})"
    err.print(Text(line, style="dim"))


def _table_cell(value: Any, clean: Callable[[str], str]) -> Text:
    from rich.text import Text

    if value is None:
        return Text("NULL", style="dim")
    if isinstance(value, bytes):
        return Text(f"<{len(value)} bytes>", style="dim")
    text = clean(str(value)).replace("\r", "").replace("\n", "⏎")
    if len(text) > MAX_CELL:
        text = text[: MAX_CELL - 1] + "…"
    return Text(text)


def _jsonable(value: Any, clean: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return clean(value)
    return value.hex() if isinstance(value, bytes) else value


def _csv_cell(value: Any, clean: Callable[[str], str]) -> Any:
    if value is None:
        return ""
    if isinstance(value, str):
        return clean(value)
    return value.hex() if isinstance(value, bytes) else value


# -- schema -----------------------------------------------------------------------------


def _print_schema(db: QueryDatabase, fmt: QueryFormat) -> None:
    from rich.table import Table
    from rich.text import Text

    tables = db.tables()
    if fmt is not QueryFormat.TABLE:
        data = {
            "kind": db.kind,
            "tables": [_table_dict(t) for t in tables],
            "examples": [{"title": title, "sql": sql} for title, sql in db.examples],
            "functions": [{"signature": sig, "description": d} for sig, d in db.functions],
        }
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return
    out = _console()
    for info in tables:
        rows = "" if info.rows is None else f" ({info.rows} rows)"
        out.print(Text.assemble((info.name, "bold"), rows, " - ", info.description))
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 2))
        for _ in range(3):
            table.add_column(overflow="fold")
        for column in info.columns:
            table.add_row(Text(column.name, style="cyan"), column.type, Text(column.description))
        out.print(table)
        out.print()
    out.print(Text("Functions", style="bold"))
    for signature, description in db.functions:
        out.print(Text.assemble("  ", (signature, "cyan"), " - ", description))
    out.print()
    out.print(Text("Examples", style="bold"))
    target = str(db.target)
    for title, sql in db.examples:
        out.print(Text(f"  # {title}", style="dim"))
        out.print(Text(f'  wink query {target} "{sql}"'), soft_wrap=True)


def _table_dict(info: TableInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "description": info.description,
        "rows": info.rows,
        "columns": [
            {"name": c.name, "type": c.type, "description": c.description} for c in info.columns
        ],
    }
