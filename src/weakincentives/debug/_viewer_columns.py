"""The per-experiment columns of a run's statistics, and gathering them while it loads.

The run page shows, per experiment, counts, the pass rate and mean score with their
intervals, latency percentiles, tokens and cost (`experiment_view`), and draws score,
latency, token and cost histograms (`_viewer_charts`). Both read the same
`ExperimentColumns`: the per-result values the statistics functions need, as lists in
index order (the order `summarize` reads a run in), and exact totals.

`ColumnGatherer` makes them from the rows the index inserts, batch by batch, as the
run's file is read: the values are already in hand then, so the run page needs no
second pass over 100,000 rows. It gives exactly what SQL over the index gives
(`_viewer_stats.experiment_columns`, the oracle and the fallback): the same values, the
same types (REAL columns as floats), the same order. When the index's rows are not the
rows gathered (a line judged by SQL, or a key written twice whose earlier line is
dropped), the gatherer gives up and the statistics are read from the index instead.
"""

from __future__ import annotations

import collections
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._viewer_lines import DecodedBatch

__all__ = ["ColumnGatherer", "ExperimentColumns", "Gathered", "TallyRow"]

TallyRow = tuple[str, str, "str | None", int, int]
"""`(experiment, status, error_kind, results, first id)`: a row of `_viewer_schema.TALLY`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentColumns:
    """One experiment's per-result values (index order) and exact totals."""

    name: str
    """The experiment."""
    passed: Sequence[int]
    """1 when the result passed, else 0 (errors count as not passed)."""
    scores: Sequence[float]
    """Score of each result, 0.0 for an error."""
    latency_ms: Sequence[float]
    """Latency of each result."""
    tokens: Sequence[int]
    """Input plus output tokens of each result."""
    clusters: Sequence[Hashable] | None
    """Sample id of each result when a sample repeats (epochs), else None."""
    errors_by_kind: dict[str, int]
    """Error kind (`unknown` when none) -> errors, in order of first appearance."""
    input_tokens: int
    """Input tokens of every result."""
    output_tokens: int
    """Output tokens of every result."""
    costs: Sequence[tuple[float | None, float | None]]
    """`(cost, judge_cost)` of the results that have either, in index order."""
    uncosted: int
    """Results with neither (`(None, None)`: nothing to add, only to count)."""

    @property
    def n(self) -> int:
        """Number of results."""
        return len(self.passed)


@dataclass(frozen=True, slots=True)
class Gathered:
    """What `ColumnGatherer` gathered of one run."""

    columns: dict[str, ExperimentColumns]
    """Experiment -> its columns, in order of first appearance."""
    tally: list[TallyRow]
    """The rows `_viewer_schema.TALLY` gives (in no particular order)."""
    failed: list[tuple[Any, ...]]
    """The rows `_viewer_schema.FAILED_SQL` gives (the results that did not pass)."""


# Positions in a `results` row (`_viewer_schema.RESULT_COLUMNS`).
_ID, _SAMPLE, _EXPERIMENT, _EPOCH, _STATUS, _KIND, _SCORE = 0, 2, 3, 4, 5, 6, 7
_LATENCY, _INPUT, _OUTPUT, _TOKENS, _COST, _JUDGE = 9, 10, 11, 12, 20, 21


class _Part:
    """What is gathered of one experiment."""

    __slots__ = (
        "costs", "epochs", "input_tokens", "kinds", "latency", "output_tokens", "passed",
        "samples", "scores", "tokens", "uncosted",
    )  # fmt: skip

    def __init__(self) -> None:
        self.passed: list[int] = []
        self.scores: list[float] = []
        self.latency: list[float] = []
        self.tokens: list[int] = []
        self.samples: list[str] = []
        self.epochs: set[int] = set()
        self.kinds: dict[str, int] = {}
        self.input_tokens = self.output_tokens = self.uncosted = 0
        self.costs: list[tuple[float | None, float | None]] = []

    def add(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Add rows of this experiment, in index order."""

        def column(position: int) -> list[Any]:
            return _column(rows, position)

        statuses = column(_STATUS)
        self.passed += [1 if s == "passed" else 0 for s in statuses]
        # REAL columns give floats; an error's score counts as 0.0 (`_viewer_stats._VALUES`).
        self.scores += [
            0.0 if s == "error" else float(v) for s, v in zip(statuses, column(_SCORE), strict=True)
        ]
        self.latency += map(float, column(_LATENCY))
        self.tokens += column(_TOKENS)
        self.samples += column(_SAMPLE)
        self.epochs.update(column(_EPOCH))
        self.input_tokens += sum(column(_INPUT))
        self.output_tokens += sum(column(_OUTPUT))
        if "error" in statuses:
            kinds = self.kinds
            for status, kind in zip(statuses, column(_KIND), strict=True):
                if status == "error":
                    kind = kind or "unknown"
                    kinds[kind] = kinds.get(kind, 0) + 1
        costs, judges = column(_COST), column(_JUDGE)
        if costs.count(None) == judges.count(None) == len(rows):  # usually: nothing priced
            self.uncosted += len(rows)
            return
        for cost, judge in zip(costs, judges, strict=True):
            if cost is None and judge is None:
                self.uncosted += 1
            else:
                self.costs.append(
                    (None if cost is None else float(cost), None if judge is None else float(judge))
                )

    def columns(self, name: str) -> ExperimentColumns:
        clusters = None
        if len(self.epochs) > 1:  # else every sample once: nothing to cluster
            from weakincentives.evals import stats

            clusters = stats.repeated_samples(self.samples)
        return ExperimentColumns(
            name=name, passed=self.passed, scores=self.scores, latency_ms=self.latency,
            tokens=self.tokens, clusters=clusters, errors_by_kind=self.kinds,
            input_tokens=self.input_tokens, output_tokens=self.output_tokens,
            costs=self.costs, uncosted=self.uncosted,
        )  # fmt: skip


def _column(rows: Sequence[tuple[Any, ...]], position: int) -> list[Any]:
    return list(map(operator.itemgetter(position), rows))


class ColumnGatherer:
    """Gathers each experiment's `ExperimentColumns` from one run's rows as they are inserted.

    `add` takes each batch of `results` rows in index order; `drop` says the index's rows
    will differ from them (the gatherer then gives nothing); `result` gives the rest.
    """

    def __init__(self) -> None:
        self._parts: dict[str, _Part] = {}
        self._tally: dict[tuple[str, str, str | None], list[int]] = {}
        self._failed: list[tuple[Any, ...]] = []
        self._valid = True

    def add(self, batch: DecodedBatch) -> None:
        """Add a batch's decoded rows (ids ascending, after every earlier batch)."""
        rows = batch.rows
        if not self._valid or not rows:
            return
        self._failed += batch.failed
        experiments = _column(rows, _EXPERIMENT)
        self._count(rows, experiments)
        if experiments.count(experiments[0]) == len(rows):  # usually: a batch, one experiment
            self._part(experiments[0]).add(rows)
            return
        groups: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows:
            groups.setdefault(row[_EXPERIMENT], []).append(row)
        for name, group in groups.items():
            self._part(name).add(group)

    def _count(self, rows: Sequence[tuple[Any, ...]], experiments: list[str]) -> None:
        keys = list(zip(experiments, _column(rows, _STATUS), _column(rows, _KIND), strict=True))
        tally = self._tally
        for key, n in collections.Counter(keys).items():
            entry = tally.get(key)
            if entry is None:
                tally[key] = [n, rows[keys.index(key)][_ID]]
            else:
                entry[0] += n

    def _part(self, name: str) -> _Part:
        part = self._parts.get(name)
        if part is None:
            part = self._parts[name] = _Part()
        return part

    def drop(self) -> None:
        """The index holds other rows than those added: give up (`columns` gives None)."""
        self._valid = False
        self._parts = {}
        self._tally = {}
        self._failed = []

    def result(self) -> Gathered | None:
        """What was gathered; None after `drop`."""
        if not self._valid:
            return None
        return Gathered(
            columns={name: part.columns(name) for name, part in self._parts.items()},
            tally=[(*key, n, first) for key, (n, first) in self._tally.items()],
            failed=self._failed,
        )
