"""`ResultTotals`: what a report's tables need of a set of results, counted in one pass.

A report shows counts, a pass rate and a mean score with their intervals, errors by
kind, latency percentiles, tokens, costs and per-check rates. Each of these is computed
here from counts kept while the results go by once: integers, running sums, and each
distribution as `{value: count}` (`stats.count_values`' form: a pass/fail score is two
entries, latencies in whole milliseconds a few thousand at most). A report over a
million stored results is therefore computed while they stream from the run's file,
without holding them; a report over results in memory counts them the same way, so
both show the same numbers, to the bit.

What needs each result beside the others (clustered intervals when samples repeat,
paired comparisons, pass@k, slices) is not here: a stored run's report keeps a compact
form of each result for it (`_columns.py`), a report in memory reads its results.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import stats
from .._records import EvalResult
from ._checks import CheckRate, CheckTally
from ._cost import CostSummary, CostTally

__all__ = ["ResultTotals", "TotalsByExperiment"]


class ResultTotals:
    """Counts, sums and counted values of a set of results (see the module docstring)."""

    __slots__ = (
        "_checks", "_costs", "errors", "errors_by_kind", "input_tokens", "latencies", "n",
        "output_tokens", "passed", "scored", "scores",
    )  # fmt: skip

    def __init__(self) -> None:
        """Start with no results."""
        self.n = self.passed = self.errors = 0
        self.errors_by_kind: dict[str, int] = {}
        self.scores: dict[float, int] = {}
        """Every result's score, errors counted as 0.0."""
        self.scored: dict[float, int] = {}
        """The scores of the results without an error."""
        self.latencies: dict[float, int] = {}
        self.input_tokens = self.output_tokens = 0
        self._costs = CostTally()
        self._checks = CheckTally()

    @classmethod
    def of(cls, results: Iterable[EvalResult]) -> ResultTotals:
        """The totals of `results` (read once)."""
        totals = cls()
        for result in results:
            totals.add(result)
        return totals

    def add(self, result: EvalResult) -> None:
        """Count one result in."""
        self.n += 1
        if result.error is not None:  # `result.is_error`, inlined: this runs per result
            self.errors += 1
            kind = result.error_kind or "unknown"
            self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + 1
            score = 0.0
        else:
            score = result.score.value
            self.scored[score] = self.scored.get(score, 0) + 1
            self.passed += result.score.passed
        self.scores[score] = self.scores.get(score, 0) + 1
        latency = result.latency_ms
        self.latencies[latency] = self.latencies.get(latency, 0) + 1
        usage = result.usage
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self._costs.add(result.cost, result.judge_cost)
        if result.score.metrics:
            self._checks.add(result)

    # -- the numbers ----------------------------------------------------------------

    @property
    def mean_score(self) -> float:
        """Mean score, errors counted as 0 (0.0 when empty)."""
        return stats.fsum_counts(self.scores) / self.n if self.n else 0.0

    @property
    def mean_score_excluding_errors(self) -> float:
        """Mean score of the results without an error (0.0 when there are none)."""
        count = self.n - self.errors
        return stats.fsum_counts(self.scored) / count if count else 0.0

    @property
    def mean_latency_ms(self) -> float:
        """Mean latency (0.0 when empty)."""
        return stats.fsum_counts(self.latencies) / self.n if self.n else 0.0

    def latency_percentile(self, q: float) -> float:
        """The `q`-th latency percentile, as `numpy.percentile` (0.0 when empty)."""
        return stats.percentile_counts(self.latencies, q)

    def cost(self) -> CostSummary:
        """What the results cost (`summarize_costs`)."""
        return self._costs.summary()

    def checks(self) -> dict[str, CheckRate]:
        """Per-check rates (`check_rates`)."""
        return self._checks.rates()

    def metric_means(self) -> dict[str, float]:
        """Mean of each named metric over the results that report it."""
        return {name: rate.mean for name, rate in self.checks().items()}


class TotalsByExperiment:
    """`ResultTotals` of all results and of each experiment's, and the epochs seen."""

    __slots__ = ("by_experiment", "epochs", "epochs_by_experiment", "overall")

    def __init__(self) -> None:
        """Start with no results."""
        self.overall = ResultTotals()
        self.by_experiment: dict[str, ResultTotals] = {}
        """In order of first appearance."""
        self.epochs: set[int] = set()
        self.epochs_by_experiment: dict[str, set[int]] = {}

    def part(self, name: str) -> TotalsByExperiment:
        """The totals of experiment `name`'s results alone (counted in the same pass)."""
        part = TotalsByExperiment()
        part.overall = self.by_experiment[name]
        part.by_experiment = {name: part.overall}
        part.epochs = self.epochs_by_experiment[name]
        part.epochs_by_experiment = {name: part.epochs}
        return part

    @classmethod
    def of(cls, results: Iterable[EvalResult]) -> TotalsByExperiment:
        """The totals of `results` (read once)."""
        totals = cls()
        overall, by_experiment = totals.overall, totals.by_experiment
        epochs = totals.epochs_by_experiment
        for result in results:
            overall.add(result)
            name = result.experiment_name
            part = by_experiment.get(name)
            if part is None:
                part = by_experiment[name] = ResultTotals()
                epochs[name] = set()
            part.add(result)
            epochs[name].add(result.epoch)
        totals.epochs = set().union(*epochs.values())
        return totals
