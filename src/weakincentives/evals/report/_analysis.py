"""Slicing and summarizing results: `group_by`, `summarize`, flaky samples, pass@k.

Conventions shared with `EvalReport`:

- an errored result counts as *not passed* and scores 0 (`pass_rate = passed / n`);
- a summary's intervals come from `weakincentives.evals.stats.summarize_outcomes`: Wilson
  for the pass rate and Student t for the mean, or cluster-robust t intervals when
  results are clustered (see `summarize`).

Examples:
    >>> from weakincentives.evals import EvalResult, Score
    >>> rs = [
    ...     EvalResult(sample_id=str(i), experiment_name="x", latency_ms=1.0,
    ...                score=Score(value=float(i % 2), passed=bool(i % 2)),
    ...                metadata={"level": i % 3})
    ...     for i in range(6)
    ... ]
    >>> {level: summarize(group)["n"] for level, group in group_by(rs, "level").items()}
    {0: 2, 1: 2, 2: 2}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar, overload

from weakincentives.errors import ConfigurationError, InvalidStatisticError

from .. import stats
from .._records import EvalResult
from ._totals import ResultTotals

__all__ = [
    "FlakySample",
    "GroupKey",
    "Summary",
    "flaky_samples",
    "group_by",
    "mean_pass_at_k",
    "mean_pass_at_k_of",
    "percentile",
    "score_of",
    "summarize",
    "summary_of_totals",
]

# numpy is imported inside the functions that use it (as in `stats`), so importing
# `weakincentives.evals` and running an eval do not load it.

K = TypeVar("K", bound=Hashable)

GroupKey = str | Callable[[EvalResult], Hashable]
"""How to group results: a metadata key, or a function of the result."""

_NAN = math.nan


@overload
def group_by(
    results: Iterable[EvalResult], key: Callable[[EvalResult], K]
) -> dict[K, tuple[EvalResult, ...]]: ...


@overload
def group_by(results: Iterable[EvalResult], key: str) -> dict[Any, tuple[EvalResult, ...]]: ...


def group_by(results: Iterable[EvalResult], key: GroupKey) -> dict[Any, tuple[EvalResult, ...]]:
    """Group results by a metadata key or by a function of the result.

    With a string, results are grouped by `result.metadata[key]`; results without the
    key form the `None` group (they are not dropped). Groups keep the order in which
    their keys first appear, and results keep their order within a group.

    Raises:
        ConfigurationError: a key value is not hashable (e.g. a list in metadata).
    """
    key_of = _key_function(key)
    groups: dict[Any, list[EvalResult]] = {}
    for result in results:
        value = key_of(result)
        try:
            group = groups.setdefault(value, [])
        except TypeError:  # unhashable: `_hashable` says which result and why
            _hashable(value, key, result)
            raise
        group.append(result)
    return {k: tuple(v) for k, v in groups.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """Descriptive statistics of a set of results; also readable as `summary["mean"]`.

    Errored results count: they did not pass and score 0. Spreads and intervals are NaN
    when they are unknown (fewer than two values, or fewer than two clusters).
    """

    n: int
    """Number of results (errors included)."""
    passed: int
    """Results that passed."""
    errors: int
    """Results that ended in an error."""
    pass_rate: float
    """`passed / n` (0.0 when `n == 0`)."""
    pass_rate_low: float
    """Lower end of the pass rate's interval (Wilson, or cluster-robust)."""
    pass_rate_high: float
    """Upper end of the pass rate's interval."""
    mean: float
    """Mean score, errors counted as 0 (0.0 when `n == 0`)."""
    std: float
    """Standard deviation of the scores (`ddof=1`)."""
    se: float
    """Standard error of the mean (cluster-robust when clustered)."""
    min: float
    """Lowest score."""
    max: float
    """Highest score."""
    mean_low: float
    """Lower end of the mean's interval (Student t, or cluster-robust t)."""
    mean_high: float
    """Upper end of the mean's interval."""
    confidence: float
    """Coverage of both intervals, e.g. 0.95."""
    n_clusters: int | None = None
    """Number of clusters when the intervals are cluster-robust, else None."""
    metrics: Mapping[str, float] = field(default_factory=dict)
    """Mean of each named `Score.metrics` entry, over the results that report it."""
    reason: str = ""
    """Why an interval is unknown (NaN), e.g. one sample when clustered; else empty."""

    def __getitem__(self, key: str) -> Any:
        if key not in _SUMMARY_KEYS:
            raise KeyError(f"{key!r} is not a summary field; fields: {', '.join(_SUMMARY_KEYS)}")
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in _SUMMARY_KEYS

    def keys(self) -> tuple[str, ...]:
        """Field names, as for a mapping (so `dict(summary)` works)."""
        return _SUMMARY_KEYS

    @property
    def pass_rate_ci(self) -> stats.Interval:
        """`Interval(pass_rate_low, pass_rate_high)`."""
        return stats.Interval(self.pass_rate_low, self.pass_rate_high)

    @property
    def mean_ci(self) -> stats.Interval:
        """`Interval(mean_low, mean_high)`."""
        return stats.Interval(self.mean_low, self.mean_high)

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a plain dict (NaN kept as float NaN)."""
        out = {name: getattr(self, name) for name in _SUMMARY_KEYS}
        out["metrics"] = dict(self.metrics)
        return out


_SUMMARY_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Summary))


def summarize(
    results: Iterable[EvalResult],
    *,
    confidence: float = 0.95,
    cluster: GroupKey | None = None,
) -> Summary:
    """Summarize results: counts, pass rate and mean score with intervals, score spread.

    Clustering: results that share a cluster are correlated, and treating them as
    independent makes intervals too narrow. With `cluster` (a metadata key or a function)
    the intervals are cluster-robust (`stats.clustered_mean`, t with `G - 1` degrees of
    freedom). Without it, results that repeat a sample (epochs) are clustered by
    `(experiment_name, sample_id)` automatically; with one result per sample the pass
    rate gets a Wilson interval and the mean a Student t interval. The numbers are
    `stats.summarize_outcomes`'s, which every view shows: intervals stay inside [0, 1]
    (the mean score's when every score is in [0, 1]) and never have zero width there.

    Raises:
        ConfigurationError: `cluster` is a metadata key that some result lacks.
    """
    import numpy as np

    items = tuple(results)
    n = len(items)
    keys = _cluster_keys(items, cluster) if n else None
    if keys is None:
        return summary_of_totals(ResultTotals.of(items), confidence=confidence)
    passes = [1.0 if r.passed else 0.0 for r in items]
    scores = [score_of(r) for r in items]
    passed = int(sum(passes))
    out = stats.summarize_outcomes(passes, scores, clusters=keys, confidence=confidence)
    return Summary(
        n=n,
        passed=passed,
        errors=sum(1 for r in items if r.is_error),
        pass_rate=passed / n,
        confidence=confidence,
        metrics=ResultTotals.of(items).metric_means(),
        min=min(scores),
        max=max(scores),
        pass_rate_low=out.pass_rate_low,
        pass_rate_high=out.pass_rate_high,
        mean=out.mean,
        std=float(np.std(scores, ddof=1)) if n > 1 else _NAN,
        se=out.se,
        mean_low=out.mean_low,
        mean_high=out.mean_high,
        n_clusters=out.n_clusters,
        reason=out.reason,
    )


def summary_of_totals(totals: ResultTotals, *, confidence: float = 0.95) -> Summary:
    """The `Summary` of counted results, none clustered (one result per sample).

    What `summarize` gives for the same results when nothing is clustered: the same
    counts and the same calls (`wilson_interval`, `mean_ci_counts`), so the same numbers.
    """
    n, nan = totals.n, _NAN
    if n == 0:
        out = stats.summarize_outcomes([], [], confidence=confidence)
        return Summary(
            n=0, passed=0, errors=0, pass_rate=0.0, pass_rate_low=out.pass_rate_low,
            pass_rate_high=out.pass_rate_high, mean=0.0, std=nan, se=out.se, min=nan,
            max=nan, mean_low=out.mean_low, mean_high=out.mean_high,
            confidence=confidence, reason=out.reason,
        )  # fmt: skip
    scores = totals.scores
    rate = stats.wilson_interval(totals.passed, n, confidence=confidence)
    bounds = (0.0, 1.0) if all(0.0 <= s <= 1.0 for s in scores) else None
    mean = stats.mean_ci_counts(scores, confidence=confidence, bounds=bounds)
    return Summary(
        n=n, passed=totals.passed, errors=totals.errors, pass_rate=totals.passed / n,
        pass_rate_low=rate.low, pass_rate_high=rate.high, mean=mean.mean,
        std=mean.std if n > 1 else nan, se=mean.se, min=float(min(scores)),
        max=float(max(scores)), mean_low=mean.low, mean_high=mean.high,
        confidence=confidence, n_clusters=None, metrics=totals.metric_means(),
        reason=mean.reason,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class FlakySample:
    """A sample that passed in some epochs and failed in others."""

    experiment_name: str
    """Experiment the attempts ran under."""
    sample_id: str
    """The sample."""
    attempts: int
    """Number of attempts (results) for the sample."""
    passes: int
    """Attempts that passed (0 < passes < attempts)."""

    @property
    def pass_rate(self) -> float:
        """`passes / attempts`."""
        return self.passes / self.attempts


def flaky_samples(results: Iterable[EvalResult]) -> tuple[FlakySample, ...]:
    """Return the samples whose attempts disagree, in order of first appearance."""
    flaky = []
    for (experiment, sample_id), attempts in _attempts(results).items():
        passes = sum(1 for r in attempts if r.passed)
        if 0 < passes < len(attempts):
            flaky.append(FlakySample(experiment, sample_id, len(attempts), passes))
    return tuple(flaky)


def mean_pass_at_k(results: Iterable[EvalResult], k: int, *, all_pass: bool = False) -> float:
    """Average pass@k (or pass^k with `all_pass=True`) over the samples of `results`.

    Attempts are grouped by `(experiment_name, sample_id)`; each sample's estimate comes
    from `stats.pass_at_k` / `stats.pass_hat_k`. Errors count as failed attempts.

    Raises:
        InvalidStatisticError: there are no results, or a sample has fewer than `k` attempts
            (the message names it).
    """
    counted = (
        (experiment, sample_id, len(attempts), sum(1 for r in attempts if r.passed))
        for (experiment, sample_id), attempts in _attempts(results).items()
    )
    return mean_pass_at_k_of(counted, k, all_pass=all_pass)


def mean_pass_at_k_of(
    samples: Iterable[tuple[str, str, int, int]], k: int, *, all_pass: bool = False
) -> float:
    """`mean_pass_at_k` of `(experiment, sample id, attempts, passes)` per sample.

    Raises:
        InvalidStatisticError: as `mean_pass_at_k`.
    """
    import numpy as np

    estimator = stats.pass_hat_k if all_pass else stats.pass_at_k
    name = "pass^k" if all_pass else "pass@k"
    values = []
    for experiment, sample_id, attempts, passes in samples:
        try:
            values.append(estimator(attempts, passes, k))
        except InvalidStatisticError as exc:
            raise InvalidStatisticError(
                f"{name}: sample {sample_id!r} of experiment {experiment!r}: {exc}"
            ) from exc
    if not values:
        raise InvalidStatisticError(f"{name} needs at least one result")
    return float(np.mean(values))


def percentile(values: Sequence[float], q: float) -> float:
    """Return the `q`-th percentile (linear interpolation, as numpy); 0.0 when empty."""
    import numpy as np

    return float(np.percentile(values, q)) if len(values) else 0.0


def score_of(result: EvalResult) -> float:
    """A result's score for averaging: errors count as 0."""
    return 0.0 if result.is_error else result.score.value


# -- helpers ----------------------------------------------------------------------------


def _key_function(key: GroupKey) -> Callable[[EvalResult], Hashable]:
    if isinstance(key, str):
        return lambda result: result.metadata.get(key)
    return key


def _hashable(value: object, key: GroupKey, result: EvalResult) -> Hashable:
    try:
        hash(value)
    except TypeError:
        label = repr(key) if isinstance(key, str) else "the key function"
        raise ConfigurationError(
            f"cannot group by {label}: result {result.sample_id!r} gives an unhashable "
            f"{type(value).__name__}; use a key function that returns a hashable value"
        ) from None
    return value


def _cluster_keys(items: Sequence[EvalResult], cluster: GroupKey | None) -> list[Hashable] | None:
    if cluster is None:
        keys: list[Hashable] = [(r.experiment_name, r.sample_id) for r in items]
        return keys if len(set(keys)) < len(keys) else None
    if isinstance(cluster, str):
        missing = next((r for r in items if cluster not in r.metadata), None)
        if missing is not None:
            raise ConfigurationError(
                f"cannot cluster by metadata key {cluster!r}: result {missing.sample_id!r} "
                f"({missing.experiment_name}) does not have it"
            )
    key_of = _key_function(cluster)
    return [_hashable(key_of(r), cluster, r) for r in items]


def _attempts(results: Iterable[EvalResult]) -> dict[tuple[str, str], list[EvalResult]]:
    groups: dict[tuple[str, str], list[EvalResult]] = {}
    for result in results:
        groups.setdefault((result.experiment_name, result.sample_id), []).append(result)
    return groups
