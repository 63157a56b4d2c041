"""The columns behind a run page's statistics and charts, read from the index by SQL.

`ExperimentColumns` (`_viewer_columns.py`) are usually gathered while the run loads;
when they could not be (a run opened from its cache, a line judged by SQL, a key
written twice) they are read here: four narrow queries per experiment instead of a row
object per result, in index order (the order `summarize` reads a run in), with what SQL
can count exactly (statuses, error kinds, token sums).

What goes into the statistics functions is value for value what they got before:
`passed` 1/0 per result, the score with errors as 0.0, sample ids for clustering when
a sample repeats (`stats.repeated_samples`), `(cost, judge_cost)` pairs.
"""

from __future__ import annotations

from ._viewer_columns import ExperimentColumns
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
