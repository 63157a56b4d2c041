"""Slicing and summarizing results after a run: `group_by`, `summarize`, flaky samples.

The second design's `evals.analysis` module, as a public path of its own; the same names
are exported by `weakincentives.evals`.

Examples:
    >>> from weakincentives.evals import EvalResult, Score
    >>> from weakincentives.evals.analysis import group_by, summarize
    >>> results = [
    ...     EvalResult(sample_id=str(i), experiment_name="x", latency_ms=1,
    ...                score=Score(value=float(i % 2), passed=bool(i % 2)),
    ...                metadata={"difficulty": i % 3})
    ...     for i in range(6)
    ... ]
    >>> by_difficulty = group_by(results, key=lambda r: r.metadata["difficulty"])
    >>> {level: summarize(group)["n"] for level, group in sorted(by_difficulty.items())}
    {0: 2, 1: 2, 2: 2}
"""

from .report import FlakySample, GroupKey, Summary, flaky_samples, group_by, summarize

__all__ = ["FlakySample", "GroupKey", "Summary", "flaky_samples", "group_by", "summarize"]
