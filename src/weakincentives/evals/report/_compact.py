"""`CompactView`: what an `EvalReport` of a stored run computes without holding its results.

`EvalReport` delegates here when its results are a `StoredResults` it streams: the
report's tables come from `ResultTotals` counted while the file goes by, and what needs
results side by side from the `ResultColumns` kept in the same pass (see `_columns.py`
for what they hold, byte by byte). A slice (`slice_by`) reads the file once more and
counts per slice value. Each method gives what the in-memory report gives for the same
results, to the bit (`tests/evals/test_report_compact.py` checks every one).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, cast

from .. import stats
from .._records import EvalResult
from ..store import StoredResults
from ._analysis import (
    FlakySample,
    GroupKey,
    Summary,
    _hashable,  # pyright: ignore[reportPrivateUsage]
    _key_function,  # pyright: ignore[reportPrivateUsage]
    summary_of_totals,
)
from ._columns import ResultColumns, compare_columns
from ._cost import CostDelta
from ._totals import ResultTotals, TotalsByExperiment

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ._comparison import ExperimentComparison

__all__ = ["CompactView", "clustered_summary", "fewest_attempts", "metadata_keys", "stored_slices"]


class CompactView:
    """The columns of a stored run, seen from the whole report or from one experiment."""

    __slots__ = ("_results", "_sliced", "columns", "metadata_keys", "scope", "totals")

    def __init__(
        self,
        results: StoredResults,
        columns: ResultColumns,
        totals: TotalsByExperiment,
        scope: str | None = None,
        *,
        metadata_keys: set[str],
        sliced: dict[GroupKey, _Sliced] | None = None,
    ) -> None:
        """A view of `columns` (of `results`), of every result or of experiment `scope`."""
        self._results = results
        self.columns = columns
        self.totals = totals
        self.scope = scope
        self.metadata_keys = metadata_keys
        """Every metadata key of the run's results."""
        self._sliced: dict[GroupKey, _Sliced] = {} if sliced is None else sliced

    @classmethod
    def read(
        cls, results: Sequence[EvalResult], *, slice_key: GroupKey | None = None
    ) -> CompactView | None:
        """Count the totals and keep the columns of `results`, in one pass over the file.

        With `slice_key`, that pass counts the slices by it too (see `slices`). None
        unless `results` are `StoredResults` that want it (`compact`), or that a report
        streams and a slice is asked of first: one pass then gives the totals, the
        metadata keys and the slice (the columns cost 27 bytes per result more).
        """
        if not isinstance(results, StoredResults):
            return None
        if not (results.compact or (slice_key is not None and results.streamed)):
            return None
        columns = ResultColumns()
        keys: set[str] = set()
        slicer = None if slice_key is None else _Slicer(slice_key, several=results.compact)

        def feed() -> Iterator[EvalResult]:
            for offset, result in results.positions():
                columns.add(offset, result)
                keys.update(result.metadata)
                if slicer is not None:
                    slicer.add(result)
                yield result

        totals = TotalsByExperiment.of(feed())
        columns.finish()
        sliced = {} if slicer is None else {slicer.key: slicer.done()}
        return cls(results, columns, totals, metadata_keys=keys, sliced=sliced)

    def scoped(self, experiment: str) -> CompactView:
        """The view of one experiment's results."""
        return CompactView(
            self._results, self.columns, self.totals.part(experiment), experiment,
            metadata_keys=self.metadata_keys, sliced=self._sliced,
        )  # fmt: skip

    def part_results(self, experiment: str) -> StoredResults:
        """The results of one experiment, read from the file if asked for."""
        return self._results.of_experiment(experiment, self.totals.by_experiment[experiment].n)

    def of(self, experiment: str | None) -> CompactView:
        """This view (None, or this view's experiment), or the view of `experiment`."""
        if experiment is None or experiment == self.scope:
            return self
        return self.scoped(experiment)

    def _rows(self) -> npt.NDArray[np.intp]:
        return self.columns.rows(self.scope)

    def _single_epochs(self) -> bool:
        # Each key once: with one epoch per experiment, no sample repeats (and no group
        # of these results), which then costs no pass over the columns to tell.
        return all(len(epochs) < 2 for epochs in self.totals.epochs_by_experiment.values())

    def repeats(self) -> bool:
        """Whether some sample has more than one result in an experiment (epochs)."""
        return not self._single_epochs() and self.columns.repeats(self._rows())

    def summary(self, *, confidence: float) -> Summary:
        """`summarize(results, confidence=confidence)` (clustered by sample on repeats)."""
        overall = self.totals.overall
        if self._single_epochs():
            return summary_of_totals(overall, confidence=confidence)
        rows = self._rows()
        if not rows.size or not self.columns.repeats(rows):
            return summary_of_totals(overall, confidence=confidence)
        return clustered_summary(self.columns, rows, overall, confidence=confidence)

    def flaky_samples(self) -> tuple[FlakySample, ...]:
        """`flaky_samples(results)`."""
        return tuple(
            FlakySample(experiment, sample_id, attempts, passes)
            for experiment, sample_id, attempts, passes in self.columns.attempts(self._rows())
            if 0 < passes < attempts
        )

    def pass_at_k(self, k: int, *, all_pass: bool) -> float:
        """`mean_pass_at_k(results, k, all_pass=all_pass)`."""
        return self.columns.mean_pass_at_k(self._rows(), k, all_pass=all_pass)

    def fewest_attempts(self) -> int:
        """The fewest results any sample of any experiment has (1 when there are none)."""
        return min((a for _, _, a, _ in self.columns.attempts(self._rows())), default=1)

    def compare(
        self, baseline: str, treatment: str, confidence: float, bootstrap_resamples: int,
        seed: int,
    ) -> ExperimentComparison:  # fmt: skip
        """`compare_results` of two experiments (flipped pairs read back when asked for)."""
        return compare_columns(
            self.columns, self._results.read_at, baseline_name=baseline,
            treatment_name=treatment, confidence=confidence,
            bootstrap_resamples=bootstrap_resamples, seed=seed,
        )  # fmt: skip

    def cost_delta(self, baseline: str, treatment: str) -> CostDelta | None:
        """`cost_delta` of two experiments' results."""
        return self.columns.cost_delta(baseline, treatment)

    def slices(self, key: GroupKey, *, confidence: float) -> dict[Hashable, Summary]:
        """`{value: summarize(group)}` of `slice_by(key)`.

        The first slice by `key` of any view of the run reads the file once more and
        counts, per value, for the whole run and for each experiment at once (4 bytes
        per result: its value's index); the other views use those counts.
        """
        import numpy as np

        sliced = self._sliced.get(key)
        if sliced is None:
            slicer = _Slicer(key, several=True)
            for result in self._results.stream():
                slicer.add(result)
            sliced = self._sliced[key] = slicer.done()
        values, codes, totals = sliced
        by_value = np.frombuffer(codes, dtype=np.int32)
        single, rows = self._single_epochs(), self._rows()
        out: dict[Hashable, Summary] = {}
        for (scope, code), counted in totals.items():
            if scope != self.scope:
                continue
            group = rows if single else rows[by_value[rows] == code]
            if not single and self.columns.repeats(group):
                summary = clustered_summary(self.columns, group, counted, confidence=confidence)
            else:
                summary = summary_of_totals(counted, confidence=confidence)
            out[values[code]] = summary
        return out


def clustered_summary(
    columns: ResultColumns, rows: npt.NDArray[np.intp], totals: ResultTotals, *,
    confidence: float,
) -> Summary:  # fmt: skip
    """`summarize` of the results of `rows` (some sample repeats), from the columns.

    The statistics get numpy arrays of the values `summarize` gives them as lists (the
    same float64 values, in the same order; integer cluster keys coded in the same
    first-seen order), so nothing is made per result.
    """
    import numpy as np

    passes, scores = columns.passes(rows), columns.scores(rows)
    keys = columns.cluster_keys(rows)
    n = int(scores.size)
    passed = int(passes.sum())
    out = stats.summarize_outcomes(
        cast("Sequence[float]", passes), cast("Sequence[float]", scores),
        clusters=cast("Sequence[Hashable]", keys), confidence=confidence,
    )  # fmt: skip
    return Summary(
        n=n, passed=passed, errors=totals.errors, pass_rate=passed / n, confidence=confidence,
        # `min` and `max` as over the list: the first of equal values (0.0 before -0.0).
        metrics=totals.metric_means(), min=float(min(scores)), max=float(max(scores)),
        pass_rate_low=out.pass_rate_low, pass_rate_high=out.pass_rate_high, mean=out.mean,
        std=float(np.std(scores, ddof=1)) if n > 1 else float("nan"), se=out.se,
        mean_low=out.mean_low, mean_high=out.mean_high, n_clusters=out.n_clusters,
        reason=out.reason,
    )  # fmt: skip


def stored_slices(
    results: Sequence[EvalResult],
    compact: CompactView | None,
    key: GroupKey,
    confidence: float,
    cluster: GroupKey | None,
) -> dict[Hashable, Summary] | None:
    """`slice_by(key)` of a stored run's report, counted as its file streams.

    None when the results are not a stored run's, or with a `cluster` key (then the
    report reads the results).
    """
    if cluster is not None:
        return None
    if compact is not None:
        return compact.slices(key, confidence=confidence)
    if not (isinstance(results, StoredResults) and results.streamed):
        return None
    # One experiment, one epoch, each key once: no sample repeats, counts suffice.
    totals: dict[Hashable, ResultTotals] = {}
    for result in results.stream():
        value = _value(key, result)
        part = totals.get(value)
        if part is None:
            part = totals[value] = ResultTotals()
        part.add(result)
    return {value: summary_of_totals(t, confidence=confidence) for value, t in totals.items()}


def metadata_keys(results: Sequence[EvalResult], compact: CompactView | None) -> set[str]:
    """Every metadata key some result has (streamed from a stored run's file)."""
    if compact is not None:
        return set(compact.metadata_keys)
    keys: set[str] = set()
    streamed = isinstance(results, StoredResults) and results.streamed
    for result in results.stream() if isinstance(results, StoredResults) and streamed else results:
        keys.update(result.metadata)
    return keys


def fewest_attempts(results: Iterable[EvalResult]) -> int:
    """The fewest results any `(experiment, sample)` has (1 when there are none)."""
    attempts: dict[tuple[str, str], int] = {}
    for result in results:
        key = (result.experiment_name, result.sample_id)
        attempts[key] = attempts.get(key, 0) + 1
    return min(attempts.values(), default=1)


def _value(key: GroupKey, result: EvalResult) -> Hashable:
    # `group_by`'s grouping: a metadata value (None without it), or the key function's.
    return _hashable(_key_function(key)(result), key, result)


_Sliced = tuple["list[Hashable]", "array[int]", "dict[tuple[str | None, int], ResultTotals]"]
"""A slice's values (first seen first), each result's value index, and the totals of
each `(experiment or None for all, value index)`, in order of first appearance."""


class _Slicer:
    """Counts a slice by `key` as results go by, for every result and per experiment.

    Unless `several` (experiments or epochs), the results are one experiment's: its
    counts are the same objects as those of every result, not counted twice.
    """

    def __init__(self, key: GroupKey, *, several: bool) -> None:
        self.key = key
        self._scopes: tuple[bool, ...] = (False, True) if several else (False,)
        self._experiment: str | None = None
        self._values: list[Hashable] = []
        self._index: dict[Hashable, int] = {}
        self._codes = array("i")
        self._totals: dict[tuple[str | None, int], ResultTotals] = {}

    def add(self, result: EvalResult) -> None:
        value = _value(self.key, result)
        code = self._index.get(value)
        if code is None:
            code = self._index[value] = len(self._values)
            self._values.append(value)
        self._codes.append(code)
        self._experiment = result.experiment_name
        for per_experiment in self._scopes:
            scope = result.experiment_name if per_experiment else None
            part = self._totals.get((scope, code))
            if part is None:
                part = self._totals[scope, code] = ResultTotals()
            part.add(result)

    def done(self) -> _Sliced:
        if len(self._scopes) == 1 and self._experiment is not None:
            for code in [c for scope, c in self._totals if scope is None]:
                self._totals[self._experiment, code] = self._totals[None, code]
        return self._values, self._codes, self._totals
