"""Reading what the viewer's index points at: a result's line again, a copy of the index.

The index keeps no transcript: a row remembers where its line starts in the run's file,
and the sample page reads that one line again and validates it in full (`read_result`).
`IndexReader` is a read-only copy of the index for queries run beside the index's own
(`ResultIndex.reader`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weakincentives import serde
from weakincentives.errors import SerdeError, ViewerError
from weakincentives.evals import EvalResult

__all__ = ["IndexReader", "Located", "read_result"]


@dataclass(frozen=True, slots=True)
class Located:
    """Where a result's line is, and the key it had when it was indexed."""

    path: Path
    """The run's results file."""
    offset: int
    """Byte offset of the line's start."""
    line: int
    """Line number (1-based), for messages."""
    key: tuple[str, str, int]
    """`(sample_id, experiment, epoch)` of the line as indexed."""


def read_result(located: Located) -> EvalResult:
    """Read a result's line back from its file and validate it in full.

    Raises:
        ViewerError: the file changed since it was indexed, or the line has the fields
            the index needs but is not a valid `EvalResult`.
    """
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


def _key_of(raw: bytes) -> tuple[Any, Any, Any] | None:
    """`(sample_id, experiment_name, epoch)` of a JSON line, None when it has none."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return data.get("sample_id"), data.get("experiment_name"), data.get("epoch", 0)


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
