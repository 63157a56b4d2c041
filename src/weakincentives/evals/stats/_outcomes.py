"""One experiment's pass rate and mean score with intervals: the numbers every view shows.

The terminal report, `--json`, the HTML report, the viewer and the comparisons all call
`summarize_outcomes`, so one run shows one interval everywhere.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ._intervals import Bounds, RateEstimate, clustered_mean, mean_ci, wilson_interval
from ._normal import critical_value

__all__ = ["OutcomeSummary", "repeated_samples", "score_bounds", "summarize_outcomes"]

WILSON = "Wilson"
"""`pass_rate_method` of an unclustered pass rate."""

_UNIT = (0.0, 1.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeSummary:
    """Pass rate and mean score of one experiment, with intervals (see `summarize_outcomes`)."""

    n: int
    """Number of results."""
    passed: int
    """Results that passed."""
    pass_rate: float
    """`passed / n` (0.0 when `n == 0`)."""
    pass_rate_low: float
    """Lower end of the pass rate's interval."""
    pass_rate_high: float
    """Upper end of the pass rate's interval."""
    pass_rate_method: str
    """`"Wilson"`, or clustered `"Student t"` / `"Wilson (no spread)"`."""
    mean: float
    """Mean score (0.0 when `n == 0`)."""
    se: float
    """Standard error of the mean score (cluster-robust when clustered)."""
    mean_low: float
    """Lower end of the mean score's interval; NaN when unknown (see `reason`)."""
    mean_high: float
    """Upper end of the mean score's interval."""
    mean_method: str
    """`"Student t"` or `"Wilson (no spread)"`."""
    score_bounds: Bounds | None
    """`(0, 1)` when every score is in [0, 1] (the intervals stay inside), else None."""
    n_clusters: int | None
    """Number of clusters when the intervals are cluster-robust, else None."""
    confidence: float
    """Coverage of both intervals."""
    reason: str = ""
    """Why an interval is unknown (NaN), e.g. `"1 sample: ..."`; empty when both are known."""

    def rate(self) -> RateEstimate:
        """The pass rate as a `RateEstimate` (its interval is the one above, clustered or not)."""
        return RateEstimate(
            successes=self.passed, n=self.n, rate=self.pass_rate, low=self.pass_rate_low,
            high=self.pass_rate_high, confidence=self.confidence, method=self.pass_rate_method,
            n_clusters=self.n_clusters,
        )  # fmt: skip


def repeated_samples(samples: Sequence[Hashable]) -> Sequence[Hashable] | None:
    """`samples` when some sample occurs more than once (epochs), else None.

    The clustering rule of every view: results of one sample are clustered together when
    a sample repeats; with one result per sample nothing is clustered.
    """
    return samples if len(set(samples)) < len(samples) else None


def score_bounds(scores: Sequence[float]) -> Bounds | None:
    """`(0.0, 1.0)` when every score lies in [0, 1] (the usual range), else None."""
    return _UNIT if all(0.0 <= s <= 1.0 for s in scores) else None


def summarize_outcomes(
    passed: Sequence[bool | float],
    scores: Sequence[float],
    *,
    clusters: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
) -> OutcomeSummary:
    """Summarize one experiment's results: pass rate and mean score with their intervals.

    Without `clusters` the pass rate gets a Wilson interval and the mean score a Student t
    interval (`mean_ci`). With `clusters` (e.g. `repeated_samples(sample_ids)` when epochs
    repeat) both are cluster-robust (`clustered_mean`, t with `G - 1` degrees of freedom),
    and when every cluster has the same rate (every epoch passed) the interval is the
    Wilson interval over the `G` clusters, never of zero width. Every interval stays
    inside its range: the pass rate in [0, 1], the mean score in [0, 1] when every score
    is (`score_bounds`).

    Raises:
        InvalidStatisticError: the sequences have different lengths, or `confidence` is
            not in `(0, 1)`.
    """
    from ._normal import check_same_length

    check_same_length(("passed", "scores"), passed, scores)
    critical_value(confidence)
    n = len(passed)
    passes = [1.0 if p else 0.0 for p in passed]
    count = int(sum(passes))
    bounds = score_bounds(scores)
    make = functools.partial(
        OutcomeSummary, n=n, passed=count, score_bounds=bounds, confidence=confidence
    )
    if n == 0:
        whole = wilson_interval(0, 0, confidence=confidence)
        return make(
            pass_rate=0.0, pass_rate_low=whole.low, pass_rate_high=whole.high,
            pass_rate_method=WILSON, mean=0.0, se=math.nan, mean_low=math.nan,
            mean_high=math.nan, mean_method="", n_clusters=None, reason="no results",
        )  # fmt: skip
    if clusters is None:
        rate = wilson_interval(count, n, confidence=confidence)
        mean = mean_ci(scores, confidence=confidence, bounds=bounds)
        return make(
            pass_rate=rate.rate, pass_rate_low=rate.low, pass_rate_high=rate.high,
            pass_rate_method=WILSON, mean=mean.mean, se=mean.se, mean_low=mean.low,
            mean_high=mean.high, mean_method=mean.method, n_clusters=None, reason=mean.reason,
        )  # fmt: skip
    rate_c = clustered_mean(passes, clusters, confidence=confidence, bounds=_UNIT)
    mean_c = clustered_mean(scores, clusters, confidence=confidence, bounds=bounds)
    return make(
        pass_rate=count / n, pass_rate_low=rate_c.low, pass_rate_high=rate_c.high,
        pass_rate_method=rate_c.method, mean=mean_c.mean, se=mean_c.se, mean_low=mean_c.low,
        mean_high=mean_c.high, mean_method=mean_c.method, n_clusters=mean_c.n_clusters,
        reason=mean_c.reason,
    )  # fmt: skip
