"""`ResultColumns`: the compact form of a stored run that a report compares side by side.

A run of several experiments or epochs, each key once, read with `EvalReport.load(...,
slim=True)` keeps none of its results (`StoredResults.compact`). Its tables come from
one pass over `results.jsonl` that counts `ResultTotals`; what needs the results side by
side (clustered intervals when epochs repeat, pass@k, flaky samples, paired comparisons,
the paired cost delta) is computed from columns kept in the same pass, one entry per
result, in file order:

| column | bytes | what |
| --- | --- | --- |
| `experiment` | 2 | index into `experiments` |
| `sample` | 4 | index into `samples`, where each sample id is kept once |
| `epoch` | 4 | the epoch |
| `passed` | 1 | passed (errors never pass) |
| `score` | 8 | the score, errors counted as 0 (`score_of`) |
| `offset` | 8 | where the result's line starts: a flipped pair's results are read back from it |
| `cost`, `judge_cost` | 8 + 8 | only once some result is priced (NaN when unpriced) |

That is 27 bytes per result (43 when priced) plus each distinct sample id once. The
numbers are those of the in-memory report, to the bit: the statistics are called with
the same values in the same order (cluster keys become integers, which group the
same results in the same first-seen order).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast, overload

from .. import stats
from .._records import EvalResult

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ._comparison import ExperimentComparison, FlippedSample
    from ._cost import CostDelta

# `_comparison` is imported where it is used: a run imports this module (through the
# report) without comparing anything.

__all__ = ["ResultColumns", "StoredFlips", "compare_columns", "flip_keys"]


class ResultColumns:
    """The columns of the module docstring, filled by `add` in file order."""

    __slots__ = (
        "_experiment_ids", "_sample_ids", "cost", "epoch", "experiment", "experiments",
        "judge_cost", "offset", "passed", "sample", "samples", "score",
    )  # fmt: skip

    def __init__(self) -> None:
        """Start with no results."""
        self.experiment = array("H")
        self.sample = array("I")
        self.epoch = array("i")
        self.passed = bytearray()
        self.score = array("d")
        self.offset = array("q")
        self.cost: array[float] | None = None
        self.judge_cost: array[float] | None = None
        self.experiments: list[str] = []
        """Experiment names, in order of first appearance."""
        self.samples: list[str] = []
        """Sample ids, in order of first appearance."""
        self._experiment_ids: dict[str, int] = {}
        self._sample_ids: dict[str, int] = {}

    def add(self, offset: int, result: EvalResult) -> None:
        """Keep the compact form of `result`, whose line starts at `offset`."""
        name = result.experiment_name
        index = self._experiment_ids.get(name)
        if index is None:
            index = self._experiment_ids[name] = len(self.experiments)
            self.experiments.append(name)
        self.experiment.append(index)
        sample = self._sample_ids.get(result.sample_id)
        if sample is None:
            sample = self._sample_ids[result.sample_id] = len(self.samples)
            self.samples.append(result.sample_id)
        self.sample.append(sample)
        self.epoch.append(result.epoch)
        error = result.error is not None
        self.passed.append(0 if error else int(result.score.passed))
        self.score.append(0.0 if error else result.score.value)
        self.offset.append(offset)
        if self.cost is not None or result.cost is not None or result.judge_cost is not None:
            self._add_cost(result.cost, result.judge_cost)

    def _add_cost(self, cost: float | None, judge_cost: float | None) -> None:
        if self.cost is None or self.judge_cost is None:
            before = len(self.score) - 1  # unpriced so far
            self.cost = array("d", [math.nan]) * before
            self.judge_cost = array("d", [math.nan]) * before
        self.cost.append(math.nan if cost is None else cost)
        self.judge_cost.append(math.nan if judge_cost is None else judge_cost)

    def finish(self) -> None:
        """Drop what was only needed while reading (the id -> index maps)."""
        self._sample_ids = {}

    # -- selections ----------------------------------------------------------------------

    def rows(self, experiment: str | None) -> npt.NDArray[np.intp]:
        """Row numbers of one experiment's results (of every result with None), in order."""
        import numpy as np

        if experiment is None:
            return np.arange(len(self.score))
        index = self.experiments.index(experiment)
        return np.flatnonzero(np.frombuffer(self.experiment, dtype=np.uint16) == index)

    def cluster_keys(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
        """One integer per `(experiment, sample)` of `rows`: what a summary clusters by."""
        import numpy as np

        experiment = np.frombuffer(self.experiment, dtype=np.uint16)[rows].astype(np.int64)
        sample = np.frombuffer(self.sample, dtype=np.uint32)[rows].astype(np.int64)
        keys: npt.NDArray[np.int64] = experiment * max(len(self.samples), 1) + sample
        return keys

    def repeats(self, rows: npt.NDArray[np.intp]) -> bool:
        """Whether some sample of some experiment has several results among `rows`."""
        import numpy as np

        return bool(np.unique(self.cluster_keys(rows)).size < rows.size)

    def passes(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        """1.0 / 0.0 per result of `rows`."""
        import numpy as np

        return np.frombuffer(self.passed, dtype=np.uint8)[rows].astype(np.float64)

    def scores(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        """The score of each result of `rows` (errors 0)."""
        import numpy as np

        return np.frombuffer(self.score, dtype=np.float64)[rows]

    # -- what groups results by sample ---------------------------------------------------

    def attempts(self, rows: npt.NDArray[np.intp]) -> Iterator[tuple[str, str, int, int]]:
        """`(experiment, sample_id, attempts, passes)` per sample, in order of first sight."""
        import numpy as np

        keys = self.cluster_keys(rows)
        unique, first, codes = np.unique(keys, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # groups in order of first appearance
        counts = np.bincount(codes, minlength=unique.size)
        passed = np.bincount(
            codes, weights=np.frombuffer(self.passed, dtype=np.uint8)[rows], minlength=unique.size
        )
        width = max(len(self.samples), 1)
        for group in order.tolist():
            key = int(unique[group])
            yield (
                self.experiments[key // width],
                self.samples[key % width],
                int(counts[group]),
                int(passed[group]),
            )

    def mean_pass_at_k(self, rows: npt.NDArray[np.intp], k: int, *, all_pass: bool) -> float:
        """`mean_pass_at_k` of the results of `rows` (see `_analysis.mean_pass_at_k`)."""
        from ._analysis import mean_pass_at_k_of

        return mean_pass_at_k_of(self.attempts(rows), k, all_pass=all_pass)

    # -- comparisons ---------------------------------------------------------------------

    def cost_delta(self, baseline: str, treatment: str) -> CostDelta | None:
        """`paired_cost_delta` of two experiments, on arrays (the same numbers).

        The treatment's priced results in order, each with its baseline partner's cost
        when that is priced: the differences and the baseline costs reach
        `delta_of_pairs` as the lists `paired_cost_delta` makes, one entry per pair.
        """
        import numpy as np

        from ._cost import delta_of_pairs

        if self.cost is None or self.judge_cost is None:
            return None  # no result is priced
        cost = np.frombuffer(self.cost, dtype=np.float64)
        judge = np.frombuffer(self.judge_cost, dtype=np.float64)
        total = cost + np.where(np.isnan(judge), 0.0, judge)  # `result_cost`: NaN unpriced
        base_rows, treat_rows = self.rows(baseline), self.rows(treatment)
        treat_rows = treat_rows[~np.isnan(total[treat_rows])]
        if not treat_rows.size:
            return None
        j, i, _, _ = _match(_pair_keys(self, treat_rows), _pair_keys(self, base_rows))
        after, earlier = total[treat_rows[j]], total[base_rows[i]]
        priced = ~np.isnan(earlier)
        before = earlier[priced]
        return delta_of_pairs((after[priced] - before).tolist(), before.tolist())


def compare_columns(
    columns: ResultColumns,
    read_at: Callable[[int], EvalResult],
    *,
    baseline_name: str,
    treatment_name: str,
    confidence: float = 0.95,
    bootstrap_resamples: int = 2000,
    seed: int = 0,
) -> ExperimentComparison:
    """`compare_results` of two experiments of `columns`: the same comparison, to the bit.

    `compare_outcomes`, on arrays: pairs are matched by sorting keys rather than through
    a dict, and the statistics get numpy arrays of the same float64 values in the same
    order (`stats` takes them without a Python object per value), so the comparison
    costs a few arrays, not a few hundred bytes per result. Each key occurs once in a
    compact run, so no result is a duplicate. The flipped pairs read their results
    back with `read_at(offset)` when asked for.
    """
    import numpy as np

    from ._comparison import ExperimentComparison

    names, epochs = columns.samples, columns.epoch

    def keys(rows: npt.NDArray[np.intp]) -> tuple[tuple[str, int], ...]:
        return tuple((names[columns.sample[r]], epochs[r]) for r in rows.tolist())

    base_rows, treat_rows = columns.rows(baseline_name), columns.rows(treatment_name)
    rates = _rate(columns, base_rows, confidence), _rate(columns, treat_rows, confidence)
    i, j, lone_base, lone_treat = _match(
        _pair_keys(columns, base_rows), _pair_keys(columns, treat_rows)
    )
    unpaired = keys(base_rows[lone_base]), keys(treat_rows[lone_treat])
    # Only the paired rows are kept from here on, as 4-byte row numbers when they fit:
    # the statistics below hold a few arrays of the pairs at once.
    small = np.int32 if len(columns.score) < 2**31 else np.intp
    base: npt.NDArray[np.integer[Any]] = base_rows[i].astype(small)
    treat: npt.NDArray[np.integer[Any]] = treat_rows[j].astype(small)
    n_pairs = int(i.size)
    del base_rows, treat_rows, i, j, lone_base, lone_treat
    # Cluster by sample only when some sample has several paired epochs.
    clusters = _samples_if_repeated(columns, base)
    passed = np.frombuffer(columns.passed, dtype=np.uint8)
    score = np.frombuffer(columns.score, dtype=np.float64)
    base_passed, treat_passed = passed[base].astype(np.float64), passed[treat].astype(np.float64)
    paired = score_paired = None
    if n_pairs:
        paired, score_paired = stats.paired_comparisons(
            [(base_passed, treat_passed, True), (score[base], score[treat], None)],
            confidence=confidence, bootstrap_resamples=bootstrap_resamples, seed=seed,
            clusters=None if clusters is None else _seq(clusters),
        )  # fmt: skip

    def flips(mask: npt.NDArray[np.bool_]) -> tuple[FlippedSample, ...]:
        found = StoredFlips(names, read_at)
        for b, t in zip(base[mask].tolist(), treat[mask].tolist(), strict=True):
            found.add(columns.sample[b], epochs[b], columns.offset[b], columns.offset[t])
        # A Sequence, not a tuple: its FlippedSamples are made (and their results read)
        # when asked for; `flip_keys` reads none.
        return cast("tuple[FlippedSample, ...]", found)

    return ExperimentComparison(
        baseline_name=baseline_name, treatment_name=treatment_name,
        baseline=rates[0], treatment=rates[1],
        n_pairs=n_pairs, paired=paired, score_paired=score_paired,
        regressions=flips((base_passed == 1.0) & (treat_passed == 0.0)),
        improvements=flips((base_passed == 0.0) & (treat_passed == 1.0)),
        unpaired_baseline=unpaired[0], unpaired_treatment=unpaired[1],
    )  # fmt: skip


def _pair_keys(columns: ResultColumns, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    """One integer per `(sample, epoch)` of each result of `rows` (the same for any rows)."""
    import numpy as np

    every = np.frombuffer(columns.epoch, dtype=np.int32)
    low = int(every.min()) if every.size else 0
    span = int(every.max()) - low + 1 if every.size else 1
    sample = np.frombuffer(columns.sample, dtype=np.uint32)[rows].astype(np.int64)
    key: npt.NDArray[np.int64] = sample * span + (every[rows].astype(np.int64) - low)
    return key


def _samples_if_repeated(
    columns: ResultColumns, rows: npt.NDArray[np.integer[Any]]
) -> npt.NDArray[np.int64] | None:
    """The sample index of each result of `rows` when some sample occurs twice, else None.

    `stats.repeated_samples` on integers; one epoch among `rows` (keys occur once) means
    no sample repeats, which needs no sort to tell.
    """
    import numpy as np

    epochs = np.frombuffer(columns.epoch, dtype=np.int32)[rows]
    if not epochs.size or int(epochs.min()) == int(epochs.max()):
        return None
    sample = np.frombuffer(columns.sample, dtype=np.uint32)[rows].astype(np.int64)
    return sample if np.unique(sample).size < sample.size else None


def _match(
    base: npt.NDArray[np.int64], treat: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.intp], ...]:
    """Pairs `(i, j)` with `base[i] == treat[j]` in `base`'s order, and the unpaired.

    Returns `i`, `j`, the positions of `base` without a partner, then of `treat` (each
    in order). Keys are unique on each side.
    """
    import numpy as np

    order = np.argsort(treat, kind="stable")
    ranked = treat[order]
    at = np.minimum(np.searchsorted(ranked, base), max(ranked.size - 1, 0))
    found = ranked[at] == base if ranked.size else np.zeros(base.size, dtype=bool)
    i = np.flatnonzero(found)
    j = order[at[found]]
    partnered = np.zeros(treat.size, dtype=bool)
    partnered[j] = True
    return i, j, np.flatnonzero(~found), np.flatnonzero(~partnered)


def _rate(
    columns: ResultColumns, rows: npt.NDArray[np.intp], confidence: float
) -> stats.RateEstimate:
    """`_comparison._rate` of one experiment: its pass rate, clustered on repeats."""
    import numpy as np

    clusters = _samples_if_repeated(columns, rows)
    summary = stats.summarize_outcomes(
        _seq(np.frombuffer(columns.passed, dtype=np.uint8)[rows]),
        _seq(np.frombuffer(columns.score, dtype=np.float64)[rows]),
        clusters=None if clusters is None else _seq(clusters),
        confidence=confidence,
    )
    return summary.rate()


def _seq(values: npt.NDArray[Any]) -> Sequence[Any]:
    """`values` as the sequence `stats` takes: it reads numpy arrays as arrays (no copy)."""
    return cast("Sequence[Any]", values)


class StoredFlips(Sequence["FlippedSample"]):
    """Flipped pairs of a stored run: 24 bytes each; a `FlippedSample` made when asked for.

    Indexing or iterating reads the pair's two results back from the run's file
    (`read_at`); `keys()` gives `(sample_id, epoch)` without reading anything, which is
    all a report prints.
    """

    __slots__ = ("_base", "_epoch", "_names", "_read_at", "_sample", "_treat")

    def __init__(self, names: Sequence[str], read_at: Callable[[int], EvalResult]) -> None:
        """No flips yet; `names[i]` is the id of sample `i`."""
        self._names = names
        self._read_at = read_at
        self._sample = array("I")
        self._epoch = array("i")
        self._base = array("q")
        self._treat = array("q")

    def add(self, sample: int, epoch: int, base_offset: int, treat_offset: int) -> None:
        """Add the pair of sample index `sample` whose results start at these offsets."""
        self._sample.append(sample)
        self._epoch.append(epoch)
        self._base.append(base_offset)
        self._treat.append(treat_offset)

    def keys(self) -> Iterator[tuple[str, int]]:
        """`(sample_id, epoch)` of each pair, in order, reading nothing."""
        names = self._names
        return ((names[s], e) for s, e in zip(self._sample, self._epoch, strict=True))

    def __len__(self) -> int:
        return len(self._sample)

    @overload
    def __getitem__(self, index: int) -> FlippedSample: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[FlippedSample, ...]: ...
    def __getitem__(self, index: int | slice) -> FlippedSample | tuple[FlippedSample, ...]:
        if isinstance(index, slice):
            return tuple(self._flip(i) for i in range(len(self))[index])
        return self._flip(range(len(self))[index])

    def __iter__(self) -> Iterator[FlippedSample]:
        return (self._flip(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredFlips | tuple | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"StoredFlips({len(self)} pairs)"

    def _flip(self, i: int) -> FlippedSample:
        from ._comparison import FlippedSample

        read = self._read_at
        return FlippedSample(
            self._names[self._sample[i]], self._epoch[i], read(self._base[i]), read(self._treat[i])
        )


def flip_keys(flips: Sequence[FlippedSample]) -> Iterator[tuple[str, int]]:
    """`(sample_id, epoch)` of each flipped pair (of a stored run: without reading it)."""
    if isinstance(flips, StoredFlips):
        return flips.keys()
    return ((f.sample_id, f.epoch) for f in flips)
