"""`ReportView`: the part of a report that exporting, rendering and comparing read.

A `Protocol`, so that the modules `EvalReport` is built from (`_export`, `_render`,
`_family`) never import `_report`, which imports them. `EvalReport` satisfies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .._records import EvalResult
from ._analysis import FlakySample, GroupKey, Summary
from ._checks import CheckRate
from ._comparison import ExperimentComparison
from ._cost import CostDelta, CostSummary

__all__ = ["ReportView"]


class ReportView(Protocol):
    """What `report_to_dict`, `render_report` and `compare_all` read of an `EvalReport`."""

    @property
    def results(self) -> Sequence[EvalResult]:
        """Every result, in the order they were added."""
        ...

    @property
    def run_id(self) -> str | None:
        """The run the results belong to, if known."""
        ...

    @property
    def expected_count(self) -> int | None:
        """How many results the run expects (None when unknown)."""
        ...

    @property
    def total(self) -> int:
        """Number of results (errors included)."""
        ...

    @property
    def distinct_count(self) -> int:
        """Number of distinct result keys."""
        ...

    @property
    def missing(self) -> int:
        """Expected results that are not there."""
        ...

    @property
    def complete(self) -> bool:
        """True when every expected result is there."""
        ...

    @property
    def epochs(self) -> int:
        """Number of distinct epochs."""
        ...

    @property
    def experiment_names(self) -> tuple[str, ...]:
        """Experiment names, in order of first appearance."""
        ...

    @property
    def pass_rate_excluding_errors(self) -> float:
        """Pass rate among results that did not error."""
        ...

    @property
    def error_rate(self) -> float:
        """Share of results that errored."""
        ...

    @property
    def mean_score_excluding_errors(self) -> float:
        """Mean score among results that did not error."""
        ...

    @property
    def mean_latency_ms(self) -> float:
        """Mean latency in milliseconds."""
        ...

    @property
    def latency_p50_ms(self) -> float:
        """Median latency in milliseconds."""
        ...

    @property
    def latency_p95_ms(self) -> float:
        """95th percentile latency in milliseconds."""
        ...

    @property
    def total_input_tokens(self) -> int:
        """Input tokens over every result."""
        ...

    @property
    def total_output_tokens(self) -> int:
        """Output tokens over every result."""
        ...

    @property
    def total_tokens(self) -> int:
        """Input and output tokens over every result."""
        ...

    @property
    def has_repeats(self) -> bool:
        """Whether some sample has more than one result in an experiment (epochs)."""
        ...

    def fewest_attempts(self) -> int:
        """The fewest results any sample of any experiment has (1 when there are none)."""
        ...

    def cost_delta(self, baseline: str, treatment: str) -> CostDelta | None:
        """The paired cost difference of two experiments (None when no pair is priced)."""
        ...

    def cost_summary(self) -> CostSummary:
        """What the results cost."""
        ...

    def check_rates(self) -> dict[str, CheckRate]:
        """Per-check rates of the results."""
        ...

    def experiment(self, name: str) -> ReportView:
        """The report of one experiment."""
        ...

    def summarize(self, *, confidence: float = 0.95, cluster: GroupKey | None = None) -> Summary:
        """Headline numbers with intervals."""
        ...

    def errors_by_kind(self) -> dict[str, int]:
        """Error counts per kind."""
        ...

    def flaky_samples(self, *, experiment: str | None = None) -> tuple[FlakySample, ...]:
        """Samples that both passed and failed across epochs."""
        ...

    def pass_at_k(self, k: int, *, experiment: str | None = None) -> float:
        """Mean pass@k over samples."""
        ...

    def pass_hat_k(self, k: int, *, experiment: str | None = None) -> float:
        """Mean pass^k over samples."""
        ...

    def compare_experiments(
        self,
        baseline: str,
        treatment: str,
        *,
        confidence: float = 0.95,
        bootstrap_resamples: int = 2000,
        seed: int = 0,
    ) -> ExperimentComparison:
        """Paired comparison of `treatment` with `baseline`."""
        ...
