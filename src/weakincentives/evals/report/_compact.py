"""`CompactView`: what an `EvalReport` of a stored run computes without holding its results.

`EvalReport` delegates here when its results are a `StoredResults` it streams: the
report's tables come from `ResultTotals` counted while the file goes by, and what needs
results side by side from the `ResultColumns` kept in the same pass (see `_columns.py`
for what they hold, byte by byte). A slice (`slice_by`) reads the file once more and
counts per slice value. Each method gives what the in-memory report gives for the same
results, to the bit (`tests/evals/test_report_compact.py` checks every one).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

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
from ._cost import CostDelta, paired_cost_delta
from ._totals import ResultTotals, TotalsByExperiment

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ._comparison import ExperimentComparison

__all__ = ["CompactView", "clustered_summary", "fewest_attempts", "metadata_keys", "stored_slices"]


class CompactView:
    """The columns of a stored run, seen from the whole report or from one experiment."""

    __slots__ = ("_results", "columns", "scope", "totals")

    def __init__(
        self,
        results: StoredResults,
        columns: ResultColumns,
        totals: TotalsByExperiment,
        scope: str | None = None,
    ) -> None:
        """A view of `columns` (of `results`), of every result or of experiment `scope`."""
        self._results = results
        self.columns = columns
        self.totals = totals
        self.scope = scope

    @classmethod
    def read(cls, results: Sequence[EvalResult]) -> CompactView | None:
        """Count the totals and keep the columns of `results`, in one pass over the file.

        None unless `results` are `StoredResults` that want it (`compact`).
        """
        if not (isinstance(results, StoredResults) and results.compact):
            return None
        columns = ResultColumns()

        def feed() -> Iterator[EvalResult]:
            for offset, result in results.positions():
                columns.add(offset, result)
                yield result

        totals = TotalsByExperiment.of(feed())
        columns.finish()
        return cls(results, columns, totals)

    def scoped(self, experiment: str) -> CompactView:
        """The view of one experiment's results."""
        return CompactView(self._results, self.columns, self.totals.part(experiment), experiment)

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

    def repeats(self) -> bool:
        """Whether some sample has more than one result in an experiment (epochs)."""
        return self.columns.repeats(self._rows())

    def summary(self, *, confidence: float) -> Summary:
        """`summarize(results, confidence=confidence)` (clustered by sample on repeats)."""
        rows = self._rows()
        overall = self.totals.overall
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
        return paired_cost_delta(
            self.columns.cost_rows(baseline), self.columns.cost_rows(treatment)
        )

    def slices(self, key: GroupKey, *, confidence: float) -> dict[Hashable, Summary]:
        """`{value: summarize(group)}` of `slice_by(key)`: one more pass over the file."""
        rows = self._rows()
        values: list[Hashable] = []
        totals: dict[Hashable, ResultTotals] = {}
        codes: list[int] = []
        index: dict[Hashable, int] = {}
        for result in _scope(self._results.stream(), self.scope):
            value = _value(key, result)
            code = index.get(value)
            if code is None:
                code = index[value] = len(values)
                values.append(value)
                totals[value] = ResultTotals()
            codes.append(code)
            totals[value].add(result)
        import numpy as np

        by_value = np.asarray(codes, dtype=np.intp)
        del codes
        out: dict[Hashable, Summary] = {}
        for code, value in enumerate(values):
            group = rows[by_value == code]
            if self.columns.repeats(group):
                out[value] = clustered_summary(
                    self.columns, group, totals[value], confidence=confidence
                )
            else:
                out[value] = summary_of_totals(totals[value], confidence=confidence)
        return out


def clustered_summary(
    columns: ResultColumns, rows: npt.NDArray[np.intp], totals: ResultTotals, *,
    confidence: float,
) -> Summary:  # fmt: skip
    """`summarize` of the results of `rows` (some sample repeats), from the columns."""
    import numpy as np

    passes = columns.passes(rows)
    scores = columns.scores(rows)
    keys = columns.cluster_keys(rows).tolist()
    n = len(scores)
    passed = int(sum(passes))
    out = stats.summarize_outcomes(passes, scores, clusters=keys, confidence=confidence)
    return Summary(
        n=n, passed=passed, errors=totals.errors, pass_rate=passed / n, confidence=confidence,
        metrics=totals.metric_means(), min=min(scores), max=max(scores),
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


def metadata_keys(results: Sequence[EvalResult]) -> set[str]:
    """Every metadata key some result has (streamed from a stored run's file)."""
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


def _scope(results: Iterator[EvalResult], experiment: str | None) -> Iterator[EvalResult]:
    if experiment is None:
        return results
    return (r for r in results if r.experiment_name == experiment)
