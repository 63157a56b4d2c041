"""The columns behind a run page's statistics and charts, read once per experiment.

The run page shows, per experiment, counts, the pass rate and mean score with their
intervals, latency percentiles, tokens and cost (`experiment_view`), and draws score,
latency, token and cost histograms (`_viewer_charts`). Both read the same
`ExperimentColumns`: the per-result values the statistics functions need, as lists in
index order (the order `summarize` reads a run in), and what SQL can count exactly
(statuses, error kinds, token sums). At 100,000 results that is four narrow queries
per experiment instead of a row object per result.

What goes into the statistics functions is value for value what they got before:
`passed` 1/0 per result, the score with errors as 0.0, sample ids for clustering when
a sample repeats (`stats.repeated_samples`), `(cost, judge_cost)` pairs.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ._viewer_index import ResultIndex

__all__ = ["ExperimentColumns", "experiment_columns"]

_WHERE = "WHERE run_id = ? AND experiment = ?"
_TOTALS = f"""
SELECT count(*), min(epoch) = max(epoch), ifnull(sum(input_tokens), 0),
    ifnull(sum(output_tokens), 0), ifnull(sum(cost IS NOT NULL OR judge_cost IS NOT NULL), 0)
FROM results {_WHERE}
"""
_KINDS = f"""
SELECT coalesce(nullif(error_kind, ''), 'unknown') AS kind, count(*) FROM results
{_WHERE} AND status = 'error' GROUP BY kind ORDER BY min(id)
"""
_VALUES = f"""
SELECT status = 'passed', iif(status = 'error', 0.0, score), latency_ms, tokens FROM results
{_WHERE} ORDER BY id
"""
_SAMPLES = f"SELECT sample_id FROM results {_WHERE} ORDER BY id"
_COSTS = f"""
SELECT cost, judge_cost FROM results {_WHERE} AND (cost IS NOT NULL OR judge_cost IS NOT NULL)
ORDER BY id
"""


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


def experiment_columns(index: ResultIndex, run_id: str, experiment: str) -> ExperimentColumns:
    """Read one experiment's `ExperimentColumns` from the index."""
    from weakincentives.evals import stats

    key = (run_id, experiment)
    ((n, one_epoch, inputs, outputs, costed),) = index.query(_TOTALS, key)
    values = index.query(_VALUES, key)
    passed, scores, latency, tokens = (
        (list(column) for column in zip(*values, strict=True)) if values else ([], [], [], [])
    )
    # One epoch: every sample once (the index keeps one result per sample and epoch).
    clusters = None
    if n and not one_epoch:
        clusters = stats.repeated_samples([s for (s,) in index.query(_SAMPLES, key)])
    return ExperimentColumns(
        name=experiment, passed=passed, scores=scores, latency_ms=latency, tokens=tokens,
        clusters=clusters, errors_by_kind=dict(index.query(_KINDS, key)),
        input_tokens=int(inputs), output_tokens=int(outputs),
        costs=index.query(_COSTS, key) if costed else [], uncosted=n - int(costed),
    )  # fmt: skip
