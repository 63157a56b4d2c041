"""Loading one run's lines into the viewer's index: the rows of each decoded batch.

`ResultIndex.add_run` reads a run's file with `decode_batches` and hands the batches to
`Load.read`: each is taken (counted, its rows gathered: `_viewer_columns.py`) and
inserted, the rows msgspec made as they are; the lines it left to SQL are staged and
judged by `FILL` / `SKIPPED` (`_viewer_schema.py`), as `wink query` judges them. `Load`
keeps the counts an `IndexedRun` reports and the keys seen (a key seen twice means an
earlier line is superseded). A single run's batches may instead be kept, uninserted,
while the run page is answered from them (`_viewer_early.py`), and inserted later.
"""

from __future__ import annotations

import contextlib
import gc
import json
import operator
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ._run_loader import STAGE, delete_superseded, stage
from ._run_schema import KEY
from ._viewer_columns import ColumnGatherer
from ._viewer_lines import DecodedBatch, insert_rows
from ._viewer_schema import DISTRIBUTE, FILL, SKIPPED, SPREAD

__all__ = ["MAX_SKIPPED", "Load"]

MAX_SKIPPED = 20
"""Skipped lines listed at most (all are counted)."""
_KEY = operator.itemgetter(2, 3, 4)
"""`(sample_id, experiment, epoch)` of a `results` row."""


class Load:
    """Loading one run's file: takes and inserts its batches, keeps its counts.

    `take` counts a batch and gathers its rows (no SQL); `insert` puts a taken batch
    into SQLite. `read` does both for a whole file, or keeps the batches to insert later
    (`ResultIndex.add_run(defer=True)`); `complete` then records the run.
    """

    def __init__(self, db: sqlite3.Connection, path: Path, params: dict[str, Any]) -> None:
        self._db = db
        self.path = path
        self.params = params
        self.skipped: list[str] = []
        self.skipped_count = self.lines = self.last_line = self.found = 0
        self.keys: set[tuple[str, str, int]] = set()
        self.columns = ColumnGatherer()
        """The run page's statistics columns, gathered from the rows as they are read."""

    def take(self, batch: DecodedBatch) -> None:
        """Count a batch's lines and keys, and gather its rows (before `insert`)."""
        self.lines += batch.lines
        self.last_line = batch.last_line
        self.keys.update(map(_KEY, batch.rows))
        self.found += len(batch.rows)
        self.columns.add(batch)

    def insert(self, batch: DecodedBatch) -> None:
        """Insert a taken batch's rows; the lines msgspec left to SQL are judged as before."""
        insert_rows(self._db, "results", batch.rows)
        insert_rows(self._db, "metrics", batch.metrics)
        insert_rows(self._db, "temp.wink_json", batch.metadata)
        if batch.staged:
            self._judge(batch.staged)
        for statement in SPREAD:
            self._db.execute(statement)

    def read(self, batches: Iterable[DecodedBatch], *, keep: int = 0) -> list[DecodedBatch] | None:
        """Take and insert every batch, or keep them all uninserted; the kept, or None.

        With `keep`, the batches are kept (`insert` them later) while the rows read are
        exactly the rows the index will hold and no more than `keep`: no line is left
        to SQL to judge and no key is read twice. Once one is, or more rows are read,
        everything is inserted as it is read.
        """
        kept: list[DecodedBatch] | None = [] if keep else None
        with _without_cycle_collection():
            for batch in batches:
                self.take(batch)
                if kept is not None and not batch.staged and self.found <= keep:
                    kept.append(batch)
                    continue
                for earlier in kept or ():
                    self.insert(earlier)
                kept = None
                self.insert(batch)
        if kept is not None and len(self.keys) < self.found:  # a key read twice
            for earlier in kept:
                self.insert(earlier)
            kept = None
        return kept

    def complete(self, run_id: str, id_base: int) -> dict[str, Any]:
        """Drop the rows later lines superseded, record the run (`runs`); its info.

        Once every batch is inserted. The search builder then indexes only the lines
        still in `results`.
        """
        gone: list[int] = []
        if len(self.keys) < self.found:  # a key was written twice: its last line wins
            self.columns.drop()
            gone = delete_superseded(self._db, "results", KEY, where="run_id = ?", params=(run_id,))
        for table in ("meta", "metrics"):
            self._db.executemany(f"DELETE FROM {table} WHERE result_id = ?", ((g,) for g in gone))
        (results,) = self._db.execute(
            "SELECT count(*) FROM results WHERE run_id = ?", (run_id,)
        ).fetchone()
        info = self.info(run_id, results)
        self._db.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?)",
            (run_id, id_base + 1, self.last_line, json.dumps(info)),
        )
        return info

    def info(self, run_id: str, results: int) -> dict[str, Any]:
        """What an `IndexedRun` of the run says (kept as JSON in `runs.info`)."""
        return {
            "run_id": run_id, "results": results, "lines": self.lines,
            "skipped": self.skipped, "skipped_count": self.skipped_count,
        }  # fmt: skip

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


@contextlib.contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused (for the whole process) while a run is read.

    Reading allocates a few container objects a line (rows, batches: about 400,000 for
    100,000 results), none of them in a reference cycle, so the collector finds nothing
    to free; its passes over them cost about a tenth of the read. Objects are freed by
    their reference counts meanwhile, as always.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
