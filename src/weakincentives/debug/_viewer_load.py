"""Loading one run's lines into the viewer's index: the rows of each decoded batch.

`ResultIndex.add_run` reads a run's file with `decode_batches` and hands each batch to
`Load.insert`: the rows msgspec made go in as they are; the lines it left to SQL are
staged and judged by `FILL` / `SKIPPED` (`_viewer_schema.py`), as `wink query` judges
them. `Load` keeps the counts an `IndexedRun` reports and the keys seen (a key seen
twice means an earlier line is superseded).
"""

from __future__ import annotations

import operator
import sqlite3
from pathlib import Path
from typing import Any

from ._run_loader import STAGE, stage
from ._viewer_columns import ColumnGatherer
from ._viewer_lines import DecodedBatch, insert_rows
from ._viewer_schema import DISTRIBUTE, FILL, SKIPPED, SPREAD

__all__ = ["MAX_SKIPPED", "Load"]

MAX_SKIPPED = 20
"""Skipped lines listed at most (all are counted)."""
_KEY = operator.itemgetter(2, 3, 4)
"""`(sample_id, experiment, epoch)` of a `results` row."""


class Load:
    """Loading one run's file: inserts its batches, keeps its counts (see `_add_run`)."""

    def __init__(self, db: sqlite3.Connection, path: Path, params: dict[str, Any]) -> None:
        self._db = db
        self.path = path
        self.params = params
        self.skipped: list[str] = []
        self.skipped_count = self.lines = self.last_line = self.found = 0
        self.keys: set[tuple[str, str, int]] = set()
        self.columns = ColumnGatherer()
        """The run page's statistics columns, gathered from the rows as they go in."""

    def insert(self, batch: DecodedBatch) -> None:
        """Insert a batch's rows; the lines msgspec left to SQL are judged as before."""
        self.lines += batch.lines
        self.last_line = batch.last_line
        insert_rows(self._db, "results", batch.rows)
        insert_rows(self._db, "metrics", batch.metrics)
        insert_rows(self._db, "temp.wink_json", batch.metadata)
        self.keys.update(map(_KEY, batch.rows))
        self.found += len(batch.rows)
        self.columns.add(batch)
        if batch.staged:
            self._judge(batch.staged)
        for statement in SPREAD:
            self._db.execute(statement)

    def _judge(self, staged: list[int | str]) -> None:
        """Index the staged lines `FILL` accepts; count and list those it skips."""
        batch = stage(self._db, staged)
        if self._db.execute(FILL, self.params).rowcount < batch.lines:
            for line, complete, problem in self._db.execute(SKIPPED):
                if complete:  # an unterminated last line was cut mid-write
                    self.skipped_count += 1
                    if len(self.skipped) < MAX_SKIPPED:
                        self.skipped.append(f"{self.path}:{line}: {problem}")
        self._db.execute(f"DELETE FROM {STAGE}")
        kept = self._db.execute("SELECT sample_id, experiment, epoch FROM temp.wink_rows")
        for sample_id, experiment, epoch in kept:
            self.keys.add((sample_id, experiment, epoch))
            self.found += 1
            self.columns.drop()  # a row SQL made: the gathered columns miss it
        for statement in DISTRIBUTE:
            self._db.execute(statement)
