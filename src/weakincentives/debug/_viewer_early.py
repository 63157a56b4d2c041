"""A run's first answers while SQLite loads it: the run page, from the rows read.

`wink debug RUN` reads a run's lines (`_viewer_lines.py`) in about half the time it
then takes to insert them into SQLite and index them. So `ResultIndex` keeps a single
run's decoded rows in memory (`EarlyRun`) and loads SQLite on a background thread
(`ResultIndex.finish`); meanwhile the run page's own requests are answered from the
rows: the queries of its facets and charts (`answer`: the SQL of `_viewer_schema.py`,
row for row what SQLite gives for them), the pages of the unfiltered grid, a result's
row and its siblings. Anything else (a filter, a sort, a search, a comparison) waits
for SQLite. Once SQLite holds the run, the rows are dropped and SQL answers everything.

Only a run whose rows are exactly the index's rows is answered early: every line read
by msgspec (none left to SQL to judge), no key written twice (the last line would
drop an earlier one), and at most `MAX_EARLY_ROWS` results (the rows take memory until
SQLite holds them). For any other run nothing is answered before SQLite is loaded.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import operator
import sqlite3
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

from ._viewer_columns import Gathered
from ._viewer_lines import DecodedBatch
from ._viewer_memo import Memo
from ._viewer_schema import (
    ATTEMPTS_SQL,
    EPOCHS_SQL,
    META_FACETS,
    META_VALUE,
    METRIC_ROWS_SQL,
    METRIC_SQL,
    ROW_COLUMNS,
    SLICE_ROWS_SQL,
    SLICE_SQL,
    json_text,
    result_row,
)
from ._viewer_types import SORT_KEYS, ResultFilter, ResultPage, ResultRow

__all__ = ["MAX_EARLY_ROWS", "EarlyRun"]

MAX_EARLY_ROWS = 250_000
"""Most results a run may have to be answered from memory while SQLite loads it."""

Row = tuple[Any, ...]
"""A `results` row (`_viewer_schema.RESULT_COLUMNS`)."""
T = TypeVar("T")

# Positions in a `results` row.
_ID, _SAMPLE, _EXPERIMENT, _EPOCH, _STATUS, _SCORE, _LATENCY = 0, 2, 3, 4, 5, 7, 9
_SHOWN = len(ROW_COLUMNS)
_LOCATION = (_SAMPLE, _EXPERIMENT, _EPOCH, 18, 19)
"""Positions of sample id, experiment, epoch, line and offset in a `results` row."""
_ENTRIES = f"""
SELECT r.metadata, e.key, {META_VALUE} FROM texts AS r, json_each(r.metadata) AS e
"""
"""Each metadata text's `(key, value)` entries, valued as `SPREAD` values `meta` rows."""


class EarlyRun:
    """One run's rows as read, and the answers the run page asks of them.

    Args:
        run_id: The run.
        ids: The first and last result id the run may have (`META_FACETS`' range).
        batches: The run's decoded batches, in order (none with staged lines).
        gathered: What was gathered of them (`ColumnGatherer`).
    """

    def __init__(
        self,
        run_id: str,
        ids: tuple[int, int],
        batches: Sequence[DecodedBatch],
        gathered: Gathered,
    ) -> None:
        self.run_id = run_id
        self.gathered = gathered
        self._range = ids
        self._rows: list[Row] = list(itertools.chain.from_iterable(b.rows for b in batches))
        self._batches = batches
        self._made = Memo()
        self._answers: dict[str, Callable[..., list[Row]]] = {
            META_FACETS: self._facet_rows,
            SLICE_SQL: self._slice_rows,
            SLICE_ROWS_SQL: self._slice_values,
            METRIC_SQL: self._metric_rows,
            METRIC_ROWS_SQL: self._metric_values,
            EPOCHS_SQL: self._epoch_rows,
            ATTEMPTS_SQL: self._attempt_rows,
        }

    # -- rows of the grid -------------------------------------------------------------

    def page(
        self, flt: ResultFilter, *, sort: str, descending: bool, offset: int, limit: int
    ) -> ResultPage | None:
        """`ResultIndex.page` of the unfiltered grid in the run's order; None otherwise."""
        if flt != ResultFilter() or SORT_KEYS.get(sort) != "id":
            return None
        total = len(self._rows)
        if descending:  # rows total-1-offset down to total-offset-limit
            stop = max(total - offset, 0)
            found = self._rows[max(stop - limit, 0) : stop][::-1]
        else:
            found = self._rows[offset : offset + limit]
        return ResultPage(total=total, offset=offset, limit=limit, rows=tuple(map(_shown, found)))

    def row(self, result_id: int) -> Row | None:
        """The `results` row of result `result_id`, if the run has it."""
        ids = self._columns().ids  # ascending, not one after the other (blank lines)
        at = bisect.bisect_left(ids, result_id)
        return self._rows[at] if at < len(ids) and ids[at] == result_id else None

    def locate(self, result_id: int) -> list[Row] | None:
        """`(sample, experiment, epoch, line, offset)` of result `result_id`, as one row."""
        row = self.row(result_id)
        return None if row is None else [tuple(row[i] for i in _LOCATION)]

    def get(self, result_id: int) -> ResultRow | None:
        """`ResultIndex.get` of this run."""
        row = self.row(result_id)
        return None if row is None else _shown(row)

    def siblings(self, sample_id: str) -> tuple[ResultRow, ...]:
        """`ResultIndex.siblings`: the sample's results, by experiment and epoch."""
        found = [row for row in self._rows if row[_SAMPLE] == sample_id]
        found.sort(key=operator.itemgetter(_EXPERIMENT, _EPOCH))
        return tuple(map(_shown, found))

    # -- SQL answered from the rows ---------------------------------------------------

    def answer(self, sql: str, params: Sequence[Any]) -> list[Row] | None:
        """The rows SQLite would give for `sql` with `params`, if it is one answered here.

        `sql` is one of the facet and chart queries (`META_FACETS` for this run's ids,
        `SLICE_SQL` ... for this run); None for any other query, or another run.
        """
        make = self._answers.get(sql)
        if make is None:
            return None
        if sql == META_FACETS:
            return make() if tuple(params) == self._range else None
        if not params or params[0] != self.run_id:
            return None
        return make(*params[1:])

    def _once(self, key: Hashable, make: Callable[[], T]) -> T:
        """`make()`, made once (the run page asks some of these several times)."""
        return self._made.get(key, make)

    def _samples_unique(self) -> bool:
        """Whether no sample repeats within an experiment (clusters are made when one does)."""
        return all(c.clusters is None for c in self.gathered.columns.values())

    def _columns(self) -> _Columns:
        """The rows' columns the answers read (made once)."""
        return self._once("columns", lambda: _Columns(self._rows, self._batches))

    def _facet_rows(self) -> list[Row]:
        """`META_FACETS`: `(key, value, results)` by key, most results first, value."""
        counts = collections.Counter(self._columns().texts)
        sql = (
            f"SELECT e.key, {META_VALUE} AS value, sum(r.n) AS n FROM texts AS r, "
            "json_each(r.metadata) AS e GROUP BY e.key, value ORDER BY e.key, n DESC, value"
        )
        return _scratch(((t, n) for t, n in counts.items() if t is not None), sql)

    def _entries(self) -> dict[str, list[tuple[str, str]]]:
        """Each metadata text -> its `(key, value)` entries, as `meta` rows hold them."""

        def make() -> dict[str, list[tuple[str, str]]]:
            texts = [t for t in dict.fromkeys(self._columns().texts) if t is not None]
            out: dict[str, list[tuple[str, str]]] = {text: [] for text in texts}
            for text, key, value in _scratch(((t, 1) for t in texts), _ENTRIES):
                out[text].append((key, value))
            return out

        return self._once("entries", make)

    def _values(self, key: str) -> dict[str | None, list[str]]:
        """Each metadata text (None: no metadata) -> the values of `key` in it."""
        found: dict[str | None, list[str]] = {
            text: [v for k, v in entries if k == key] for text, entries in self._entries().items()
        }
        found[None] = []
        return found

    def _slice_rows(self, key: str) -> list[Row]:
        """`SLICE_SQL`: per value of `key` and experiment: results, passed, samples."""
        c = self._columns()
        values = self._values(key)
        if not self._samples_unique() or any(len(set(v)) < len(v) for v in values.values()):
            return self._slice_rows_counted(values)
        # Each result counts once in a group, so a group's samples are its results. A
        # Counter keeps first appearances in order: a group's rank is that of its first
        # result (`min(r.id)`).
        groups: dict[tuple[str, str], list[int]] = {}  # -> [n, passed, rank]
        counted = collections.Counter(zip(c.texts, c.experiments, c.passed, strict=True))
        for rank, ((text, experiment, passed), n) in enumerate(counted.items()):
            for value in values[text]:
                group = groups.get((value, experiment))
                if group is None:
                    group = groups[(value, experiment)] = [0, 0, rank]
                group[0] += n
                group[1] += n if passed else 0
        ordered = sorted(groups.items(), key=lambda item: (item[0][0], item[1][2]))
        return [(value, e, n, p, n) for (value, e), (n, p, _) in ordered]

    def _slice_rows_counted(self, values: dict[str | None, list[str]]) -> list[Row]:
        """`_slice_rows` when a sample may count more than once in a group."""
        c = self._columns()
        groups: dict[tuple[str, str], list[Any]] = {}  # -> [n, passed, first id, samples]
        rows = zip(c.ids, c.texts, c.experiments, c.samples, c.passed, strict=True)
        for result_id, text, experiment, sample, passed in rows:
            for value in values[text]:
                group = groups.get((value, experiment))
                if group is None:
                    group = groups[(value, experiment)] = [0, 0, result_id, set()]
                group[0] += 1
                group[1] += passed
                group[3].add(sample)
        ordered = sorted(groups.items(), key=lambda item: (item[0][0], item[1][2]))
        return [(v, e, n, p, len(samples)) for (v, e), (n, p, _, samples) in ordered]

    def _slice_values(self, key: str, value: str, experiment: str) -> list[Row]:
        """`SLICE_ROWS_SQL`: `(passed, sample)` of each result of one slice, in order."""
        c = self._columns()
        values = self._values(key)
        rows = zip(c.texts, c.experiments, c.samples, c.passed, strict=True)
        return [
            (int(passed), sample)
            for text, exp, sample, passed in rows
            if exp == experiment
            for _ in range(values[text].count(value))
        ]

    def _metric_rows(self) -> list[Row]:
        """`METRIC_SQL`: per check and experiment: n, sum, samples, 0/1 values, in [0, 1]."""
        c = self._columns()
        ids, names, values, experiments = c.metrics()
        unique = self._samples_unique() and _unique(ids, names)
        # In order of first appearance (`min(r.id)`): a Counter keeps it, and a group's
        # first value comes first.
        groups: dict[tuple[str, str], list[Any]] = {}  # -> [n, sum, 0/1 values, min, max]
        counted = collections.Counter(zip(names, experiments, values, strict=True))
        for (name, experiment, value), n in counted.items():
            group = groups.get((name, experiment))
            if group is None:
                group = groups[(name, experiment)] = [0, 0.0, 0, value, value]
            group[0] += n
            group[1] += value * n  # read only when every value is 0 or 1: exact then
            group[2] += n if value in (0, 1) else 0
            group[3] = min(group[3], value)
            group[4] = max(group[4], value)
        distinct: dict[tuple[str, str], set[str]] = {}
        if not unique:
            samples = c.metric_samples()
            for name, experiment, sample in zip(names, experiments, samples, strict=True):
                distinct.setdefault((name, experiment), set()).add(sample)
        return [
            (name, e, n, total, n if unique else len(distinct[(name, e)]), binary,
             int(low >= 0 and high <= 1))
            for (name, e), (n, total, binary, low, high) in groups.items()
        ]  # fmt: skip

    def _metric_values(self, name: str, experiment: str) -> list[Row]:
        """`METRIC_ROWS_SQL`: `(value, sample)` of one check's results, in order."""
        c = self._columns()
        _, names, values, experiments = c.metrics()
        rows = zip(names, experiments, values, c.metric_samples(), strict=True)
        return [(v, s) for n, e, v, s in rows if n == name and e == experiment]

    def _epoch_rows(self) -> list[Row]:
        """`EPOCHS_SQL`: the number of epochs."""
        return [(len(set(self._columns().epochs)),)]

    def _attempt_rows(self) -> list[Row]:
        """`ATTEMPTS_SQL`: per experiment and sample: attempts, passes, in order."""
        c = self._columns()
        keys = list(zip(c.experiments, c.samples, strict=True))
        passes = collections.Counter(itertools.compress(keys, c.passed))
        return [(e, s, n, passes[(e, s)]) for (e, s), n in collections.Counter(keys).items()]


class _Columns:
    """Columns of a run's rows (in id order) and of its metrics, as the answers read them."""

    def __init__(self, rows: Sequence[Row], batches: Sequence[DecodedBatch]) -> None:
        def column(position: int) -> list[Any]:
            return list(map(operator.itemgetter(position), rows))

        self.ids: list[int] = column(_ID)
        self.experiments: list[str] = column(_EXPERIMENT)
        self.samples: list[str] = column(_SAMPLE)
        self.epochs: list[int] = column(_EPOCH)
        self.passed = [status == "passed" for status in column(_STATUS)]
        self.texts: list[str | None] = []
        """The metadata text of each row (None: it has none)."""
        for batch in batches:
            if len(batch.metadata) == len(batch.rows):  # usually: every result has some
                self.texts += map(operator.itemgetter(1), batch.metadata)
            else:
                of = {result_id: text for result_id, text, _ in batch.metadata}
                self.texts += [of.get(row[_ID]) for row in batch.rows]
        self._metrics = list(itertools.chain.from_iterable(b.metrics for b in batches))
        self._lock = threading.Lock()
        self._by_metric: tuple[list[Any], ...] | None = None
        self._rows_of_metrics: list[int] | None = None

    def metrics(self) -> tuple[list[Any], ...]:
        """`(ids, names, values, experiments)` of every metric, in order.

        Values as the `metrics` table holds them (REAL: floats).
        """
        with self._lock:
            if self._by_metric is None:
                metrics = self._metrics
                ids = list(map(operator.itemgetter(0), metrics))
                self._rows_of_metrics = self._positions(ids)
                self._by_metric = (
                    ids,
                    list(map(operator.itemgetter(1), metrics)),
                    list(map(float, map(operator.itemgetter(2), metrics))),
                    self._pick(self.experiments),
                )
            return self._by_metric

    def metric_samples(self) -> list[str]:
        """The sample of every metric (as `metrics`)."""
        self.metrics()
        with self._lock:
            return self._pick(self.samples)

    def _positions(self, ids: list[int]) -> list[int] | None:
        """Where each of `ids` is in the rows; None when they are the rows' ids."""
        if ids == self.ids:  # usually: one metric per result
            return None
        at = dict(zip(self.ids, range(len(self.ids)), strict=True))
        return list(map(at.__getitem__, ids))

    def _pick(self, column: list[Any]) -> list[Any]:
        """`column`'s value for each metric."""
        rows = self._rows_of_metrics
        return list(column) if rows is None else list(map(column.__getitem__, rows))


def _unique(ids: list[int], names: list[str]) -> bool:
    """Whether no result has two metrics of one name."""
    return len(set(ids)) == len(ids) or len(set(zip(ids, names, strict=True))) == len(ids)


def _shown(row: Row) -> ResultRow:
    """The grid's row of a `results` row, valued as SQLite gives it (REAL as float)."""
    values = list(row[:_SHOWN])
    values[_SCORE] = float(values[_SCORE])
    values[_LATENCY] = float(values[_LATENCY])
    return result_row(values)


def _scratch(texts: Iterable[tuple[str, int]], sql: str) -> list[Row]:
    """`sql` over a table `texts (metadata, n)` of `texts`, in a database of its own.

    Each distinct metadata text once, valued by the SQL that values `meta` rows
    (`META_VALUE`), so a value's text is the one SQLite gives later.
    """
    db = sqlite3.connect(":memory:")
    try:
        db.create_function("wink_json_text", 1, json_text, deterministic=True)
        db.execute("CREATE TABLE texts (metadata TEXT, n INTEGER)")
        db.executemany("INSERT INTO texts VALUES (?, ?)", texts)
        return db.execute(sql).fetchall()
    finally:
        db.close()
