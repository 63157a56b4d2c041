"""What a run cost: totals per experiment, per-sample means with intervals, A/B deltas.

Each result records `cost` (the agent's model calls) and `judge_cost` (the judge's), or
None when its model is unpriced. These functions add them up without ever counting an
unpriced result as free: `CostSummary.unpriced` says how many results have no price,
and the per-sample mean and its interval are over the priced ones only. The same
functions feed the terminal report, `--json`, the HTML report and the viewer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import stats
from .._records import EvalResult

__all__ = [
    "CostDelta",
    "CostSummary",
    "CostTally",
    "cost_delta",
    "cost_summary",
    "delta_of_pairs",
    "format_usd",
    "paired_cost_delta",
    "result_cost",
    "summarize_costs",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CostSummary:
    """The cost of a set of results (one experiment, or a whole run)."""

    n: int
    """Results looked at."""
    priced: int
    """Results whose agent cost is known."""
    unpriced: int
    """Results whose agent's model has no price (their cost is unknown, not zero)."""
    agent_usd: float
    """Dollars of the priced results' agent calls."""
    judge_usd: float
    """Dollars of the judge calls that were priced."""
    mean_usd: float
    """Mean dollars (agent + judge) per priced result; NaN when none is priced."""
    low_usd: float
    """Lower bound of the 95% interval of `mean_usd` (NaN below two priced results)."""
    high_usd: float
    """Upper bound of the 95% interval of `mean_usd`."""

    @property
    def total_usd(self) -> float:
        """Agent plus judge dollars of the priced results."""
        return self.agent_usd + self.judge_usd

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (NaN where unknown)."""
        return {
            "n": self.n,
            "priced": self.priced,
            "unpriced": self.unpriced,
            "total_usd": self.total_usd if self.priced else None,
            "agent_usd": self.agent_usd if self.priced else None,
            "judge_usd": self.judge_usd,
            "per_sample_usd": self.mean_usd,
            "per_sample_ci_usd": [self.low_usd, self.high_usd],
        }

    def describe(self) -> str:
        """One line for a report: total, split, per sample with its interval, unpriced."""
        if not self.priced:
            return f"unpriced ({self.n} results; add the model with --price MODEL=IN,OUT)"
        # No judge cost is either no judge or an unpriced one: say so rather than "$0".
        judge = f"judge {format_usd(self.judge_usd)}" if self.judge_usd else "no priced judge calls"
        text = (
            f"{format_usd(self.total_usd)} (agent {format_usd(self.agent_usd)}, {judge}); "
            f"{format_usd(self.mean_usd)}/sample"
        )
        if not math.isnan(self.low_usd):
            text += f" [{format_usd(self.low_usd)}, {format_usd(self.high_usd)}]"
        if self.unpriced:
            text += f"; {self.unpriced} of {self.n} results unpriced"
        return text


@dataclass(frozen=True, slots=True, kw_only=True)
class CostDelta:
    """Paired per-sample cost difference, treatment minus baseline."""

    n_pairs: int
    """Pairs (same sample and epoch) where both results are priced."""
    delta_usd: float
    """Mean per-sample difference in dollars (agent + judge)."""
    low_usd: float
    """Lower bound of its 95% interval (NaN below two pairs)."""
    high_usd: float
    """Upper bound of its 95% interval."""
    relative: float | None
    """`delta / baseline mean` (None when the baseline costs nothing)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {
            "n_pairs": self.n_pairs,
            "delta_usd": self.delta_usd,
            "delta_ci_usd": [self.low_usd, self.high_usd],
            "relative": self.relative,
        }

    def describe(self) -> str:
        """One line for a report."""
        text = f"{format_usd(self.delta_usd, signed=True)}/sample"
        if not math.isnan(self.low_usd):
            low, high = (
                format_usd(self.low_usd, signed=True),
                format_usd(self.high_usd, signed=True),
            )
            text += f" [{low}, {high}]"
        if self.relative is not None:
            text += f" ({self.relative:+.1%})"
        return text + f", {self.n_pairs} priced pairs"


def cost_summary(results: Iterable[EvalResult]) -> CostSummary:
    """Add up what `results` cost (see `CostSummary`)."""
    return summarize_costs((r.cost, r.judge_cost) for r in results)


def result_cost(cost: float | None, judge_cost: float | None) -> float | None:
    """Dollars one result cost, agent plus judge; None when its agent is unpriced.

    The per-result value every cost view is made of: `summarize_costs` averages it,
    `paired_cost_delta` differences it, the cost histograms bin it.

    Examples:
        >>> result_cost(0.002, 0.0005), result_cost(0.002, None), result_cost(None, 0.0005)
        (0.0025, 0.002, None)
    """
    return None if cost is None else cost + (judge_cost or 0.0)


def summarize_costs(costs: Iterable[tuple[float | None, float | None]]) -> CostSummary:
    """`CostSummary` of `(agent cost, judge cost)` pairs, one per result (None: unpriced).

    The function behind every view of a run's cost (report, JSON, HTML, viewer).
    """
    tally = CostTally()
    for cost, judge_cost in costs:
        tally.add(cost, judge_cost)
    return tally.summary()


class CostTally:
    """What `summarize_costs` keeps while costs stream past: sums, and counted values.

    The per-result costs are kept as `{value: count}` (`stats.count_values`' form), so a
    million results with a few distinct prices hold a few entries.
    """

    __slots__ = ("agent", "judge", "n", "per", "priced")

    def __init__(self) -> None:
        """Start with no costs."""
        self.n = self.priced = 0
        self.agent = self.judge = 0.0
        self.per: dict[float, int] = {}

    def add(self, cost: float | None, judge_cost: float | None) -> None:
        """Count one result's `(agent cost, judge cost)`."""
        self.n += 1
        self.judge += judge_cost or 0.0
        if cost is None:
            return
        self.priced += 1
        self.agent += cost
        total = cost + (judge_cost or 0.0)  # `result_cost`, inlined: this runs per result
        self.per[total] = self.per.get(total, 0) + 1

    def summary(self) -> CostSummary:
        """The `CostSummary` of the costs added."""
        if self.per:
            estimate = stats.mean_ci_counts(self.per)
            mean, low, high = estimate.mean, estimate.low, estimate.high
        else:
            mean = low = high = math.nan
        return CostSummary(
            n=self.n, priced=self.priced, unpriced=self.n - self.priced,
            agent_usd=self.agent, judge_usd=self.judge, mean_usd=mean, low_usd=low,
            high_usd=high,
        )  # fmt: skip


CostRow = tuple[str, int, "float | None", "float | None"]
"""`(sample_id, epoch, cost, judge_cost)` of one result."""


def cost_delta(baseline: Iterable[EvalResult], treatment: Iterable[EvalResult]) -> CostDelta | None:
    """The paired cost difference, or None when no pair has both costs."""
    return paired_cost_delta(
        ((r.sample_id, r.epoch, r.cost, r.judge_cost) for r in baseline),
        ((r.sample_id, r.epoch, r.cost, r.judge_cost) for r in treatment),
    )


def _row_total(row: CostRow) -> float | None:
    return result_cost(row[2], row[3])


def paired_cost_delta(
    baseline: Iterable[CostRow], treatment: Iterable[CostRow]
) -> CostDelta | None:
    """`cost_delta` over `(sample_id, epoch, cost, judge_cost)` rows (what the viewer has).

    Pairs are results of the same sample and epoch where both sides are priced.
    """
    priced = [
        ((row[0], row[1]), total) for row in treatment if (total := _row_total(row)) is not None
    ]
    if not priced:  # unpriced runs: no pair, and no need to index the baseline
        return None
    before = {(row[0], row[1]): _row_total(row) for row in baseline}
    differences: list[float] = []
    base: list[float] = []
    for key, after in priced:
        earlier = before.get(key)
        if earlier is not None:
            differences.append(after - earlier)
            base.append(earlier)
    return delta_of_pairs(differences, base)


def delta_of_pairs(differences: list[float], base: list[float]) -> CostDelta | None:
    """The `CostDelta` of paired differences (treatment - baseline) and baseline costs.

    Both lists are in pair order; None without pairs.
    """
    if not differences:
        return None
    delta, low, high = _mean_ci(differences)
    base_mean = sum(base) / len(base)
    return CostDelta(
        n_pairs=len(differences),
        delta_usd=delta,
        low_usd=low,
        high_usd=high,
        relative=delta / base_mean if base_mean else None,
    )


def _mean_ci(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return math.nan, math.nan, math.nan
    estimate = stats.mean_ci(values)
    return estimate.mean, estimate.low, estimate.high


def format_usd(value: float, *, signed: bool = False) -> str:
    """Dollars with enough digits for small per-sample costs: `$12.35`, `$0.00042`."""
    if math.isnan(value):
        return "n/a"
    sign = ("+" if value >= 0 else "-") if signed else ("-" if value < 0 else "")
    size = abs(value)
    digits = 2 if size >= 1 else 4 if size >= 0.01 else 6
    return f"{sign}${size:.{digits}f}"
