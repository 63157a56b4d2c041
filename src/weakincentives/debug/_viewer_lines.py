"""The viewer index's fast reading of a run's lines: msgspec, only the fields it keeps.

A result line is mostly transcript (`messages`, `tool_calls`, `output`): the index keeps
none of it but the number of messages and tool calls. Parsing whole lines in SQLite
(`_run_loader.FIELDS`) costs about 10 µs a line; `decode_batches` reads a line with
msgspec into the index's columns and skips the transcript without building it (about
4 µs a line), and `ResultIndex` inserts the rows with `executemany`.

**One set of rules.** A line is decoded here only when its values have the types the
index's SQL checks accept (`_viewer_schema._CHECKS`), in their usual form: strings,
numbers, booleans, 64-bit integers. Anything else (not JSON, a missing field, `"1"` for
1, `null` metadata, an integer `passed`, an epoch of `null`, ...) goes back, as text, to
the SQL path, which keeps it or skips it with its reason exactly as before. The values
kept are the ones the SQL path gives: `passed` is the score's verdict, else
`value >= 0.5`; tokens default to 0; a message or tool-call list that is not a list
goes to SQL, and so does a line with a score metric that is not a name and a number
(SQL skips that metric alone). Metadata is kept as its JSON text and spread into rows
by the same SQL as the other lines (`json_each`), so a value's text is the same either
way. (Where a line repeats a key, msgspec keeps the last value, as the full reader
does; SQLite would read the first.)

Run as a script (`python -I _viewer_lines.py PATH START ID_BASE RUN_ID`), it decodes a
file from a byte offset on and writes the batches to stdout (`write_batches`): the
child process of `_viewer_split.py`. So it imports nothing but msgspec and the
standard library.
"""

from __future__ import annotations

import itertools
import operator
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

__all__ = [
    "FRAME_HEADER",
    "DecodedBatch",
    "decode_batches",
    "insert_rows",
    "lines_before",
    "write_batches",
]

BATCH_LINES = 5000
"""Lines per batch: inserted with one `executemany` each."""


@dataclass(slots=True)
class DecodedBatch:
    """One batch of lines: the rows decoded here, and the lines left to SQL."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    """`results` rows (`_viewer_index._RESULT_COLUMNS`) of the decoded lines."""
    metadata: list[tuple[int, str, None]] = field(default_factory=list)
    """`(result id, metadata JSON, None)` of the decoded lines that have metadata (rows
    of `wink_json`, whose last column is for the metrics of the lines SQL judges)."""
    metrics: list[tuple[int, str, int | float]] = field(default_factory=list)
    """`metrics` rows of the decoded lines: `(result id, name, value)`."""
    failed: list[tuple[Any, ...]] = field(default_factory=list)
    """Of the decoded lines that did not pass: the rows `_viewer_schema.FAILED_SQL`
    gives (id, experiment, sample, epoch, error, error kind, reason, failing checks)."""
    staged: list[int | str] = field(default_factory=list)
    """`line, offset, text` of every other non-blank line, flattened (as `stage_lines`)."""
    lines: int = 0
    """Non-blank lines in the batch."""
    last_line: int = 0
    """Number of the last line read (1-based)."""


_Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_ABSENT = msgspec.Raw(b"")


class _Metric(msgspec.Struct, gc=False):
    name: str
    value: _Int64 | float


class _Score(msgspec.Struct, gc=False):
    value: _Int64 | float
    passed: bool | None = None
    reason: str | None = None
    metrics: list[_Metric] | None = None


class _Usage(msgspec.Struct, gc=False):
    input_tokens: _Int64 | None = None
    output_tokens: _Int64 | None = None


class _Entry(msgspec.Struct, gc=False):
    """A message or tool call: an object, counted, its fields skipped unread."""


class _Line(msgspec.Struct, gc=False):
    """The fields of a result line the index keeps; msgspec skips the others unbuilt."""

    sample_id: str
    experiment_name: str
    score: _Score
    latency_ms: _Int64 | float
    epoch: _Int64 = 0
    usage: _Usage | None = None
    error: str | None = None
    error_kind: str | None = None
    metadata: msgspec.Raw = _ABSENT
    bundle_path: msgspec.Raw = _ABSENT
    # Counted only. An entry that is not an object goes to SQL, which counts it too.
    tool_calls: list[_Entry] | None = None
    messages: list[_Entry] | None = None
    cost: _Int64 | float | None = None
    judge_cost: _Int64 | float | None = None


def _row(line: _Line, result_id: int, run_id: str, lineno: int, offset: int) -> tuple[Any, ...]:
    """The `results` row of a decoded line (as `_viewer_index._FILL` makes it)."""
    score = line.score
    passed = score.passed if score.passed is not None else score.value >= 0.5
    usage = line.usage
    inputs = (usage.input_tokens or 0) if usage is not None else 0
    outputs = (usage.output_tokens or 0) if usage is not None else 0
    status = "error" if line.error is not None else ("passed" if passed else "failed")
    bundle = bytes(line.bundle_path)
    return (
        result_id, run_id, line.sample_id, line.experiment_name, line.epoch, status,
        line.error_kind, score.value, int(passed), line.latency_ms, inputs, outputs,
        inputs + outputs, score.reason or "", line.error, len(line.tool_calls or ()),
        len(line.messages or ()), int(bundle not in (b"", b"null")), lineno, offset,
        line.cost, line.judge_cost,
    )  # fmt: skip


_FAILED = operator.itemgetter(0, 3, 2, 4, 14, 6, 13)
"""id, experiment, sample, epoch, error, error kind, reason: of a `results` row."""


def _failing(metrics: Sequence[_Metric]) -> str | None:
    """The checks a result failed, as `_viewer_schema.FAILED_SQL` lists them.

    Its top-level metrics in [0, 0.5), sorted by name, comma-separated; None if none.
    """
    if len(metrics) == 1:  # the usual case, without building a list
        (m,) = metrics
        return m.name if "." not in m.name and 0 <= m.value < 0.5 else None
    names = sorted(m.name for m in metrics if "." not in m.name and 0 <= m.value < 0.5)
    return ", ".join(names) if names else None


def insert_rows(
    conn: sqlite3.Connection, table: str, rows: Sequence[tuple[Any, ...]], *, per: int = 20
) -> None:
    """Insert `rows` into `table`, `per` rows to a statement.

    One statement per row costs a third more: Python's per-statement overhead.
    """
    if not rows:
        return
    one = f"({', '.join('?' * len(rows[0]))})"
    whole = len(rows) - len(rows) % per
    flat = itertools.chain.from_iterable
    conn.executemany(
        f"INSERT INTO {table} VALUES {', '.join([one] * per)}",
        (tuple(flat(rows[i : i + per])) for i in range(0, whole, per)),
    )
    conn.executemany(f"INSERT INTO {table} VALUES {one}", rows[whole:])


def decode_batches(
    path: Path,
    *,
    id_base: int,
    run_id: str,
    batch_lines: int = BATCH_LINES,
    start: int = 0,
    stop: int | None = None,
    first_line: int = 1,
) -> Iterator[DecodedBatch]:
    """Read `path` a batch at a time: decoded rows, and the lines SQL must judge.

    Line `n` becomes result `id_base + n`. With `start` / `stop` (byte offsets of line
    starts) only the lines from `start` up to `stop` are read; the first is line
    `first_line` (`_viewer_split.py` reads a large file in two halves).

    Raises:
        OSError: the file cannot be opened or read.
    """
    decode = msgspec.json.Decoder(_Line).decode
    batch = DecodedBatch()
    offset, lineno = start, first_line - 1
    with path.open("rb") as handle:
        handle.seek(start)
        for raw in handle:
            if stop is not None and offset >= stop:
                break
            lineno += 1
            start, offset = offset, offset + len(raw)
            if raw.isspace():
                continue
            batch.lines += 1
            batch.last_line = lineno
            try:
                line = decode(raw)
                row = _row(line, id_base + lineno, run_id, lineno, start)
            except (msgspec.DecodeError, UnicodeDecodeError):
                line = None
            metadata = b"" if line is None else bytes(line.metadata)
            if line is None or (metadata and not metadata.startswith(b"{")):
                batch.staged += (lineno, start, raw.decode("utf-8", "replace"))  # SQL says why
                continue
            batch.rows.append(row)
            if metadata:
                batch.metadata.append((row[0], metadata.decode(), None))
            metrics = line.score.metrics or ()
            for metric in metrics:
                batch.metrics.append((row[0], metric.name, metric.value))
            if row[5] != "passed":
                batch.failed.append((*_FAILED(row), _failing(metrics) if metrics else None))
            if batch.lines >= batch_lines:
                yield batch
                batch = DecodedBatch()
    if batch.lines:
        yield batch


FRAME_HEADER = 8
"""Bytes of the length before each batch `write_batches` writes (little-endian)."""
_CHUNK = 8 * 2**20


def lines_before(path: Path, offset: int) -> int:
    """The number of lines that start before byte `offset` (a line start) of `path`."""
    count = 0
    with path.open("rb") as handle:
        while offset > 0:
            chunk = handle.read(min(_CHUNK, offset))
            if not chunk:
                break
            count += chunk.count(b"\n")
            offset -= len(chunk)
    return count


def write_batches(path: str, start: str, id_base: str, run_id: str) -> None:
    """Decode the lines of `path` from byte `start` on and write them to stdout.

    What the child of `_viewer_split.read_batches` runs: each batch as msgpack
    (`rows, metadata, metrics, failed, staged, lines, last_line`) after its length, then
    a length of 0 (an output without it was cut short).
    """
    offset = int(start)
    first_line = lines_before(Path(path), offset) + 1
    out = sys.stdout.buffer
    encode = msgspec.msgpack.Encoder().encode
    for batch in decode_batches(
        Path(path), id_base=int(id_base), run_id=run_id, start=offset, first_line=first_line
    ):
        frame = encode((batch.rows, batch.metadata, batch.metrics, batch.failed,
                        batch.staged, batch.lines, batch.last_line))  # fmt: skip
        out.write(len(frame).to_bytes(FRAME_HEADER, "little"))
        out.write(frame)
    out.write((0).to_bytes(FRAME_HEADER, "little"))
    out.flush()


if __name__ == "__main__":  # pragma: no cover - the child of `_viewer_split` runs this
    write_batches(*sys.argv[1:])
