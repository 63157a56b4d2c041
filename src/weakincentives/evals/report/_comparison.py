"""A/B comparison of two experiments run on the same samples, with paired statistics.

Results are paired by `(sample_id, epoch)`. Paired statistics (delta, interval, p-value,
McNemar, bootstrap, detectable effect) use the pairs only; samples that ran under one
experiment but not the other are counted in `unpaired_baseline` / `unpaired_treatment`
and never silently dropped. The headline pass rates use *all* results of each experiment.
Errors count as not passed (and score 0) everywhere.

Epochs: when some sample has more than one paired epoch, the pairs of one sample are
the same question asked again, not independent evidence. The paired statistics are then
clustered by sample (`stats.paired_comparison(..., clusters=sample_ids)`): CR1
cluster-robust SE, interval and t-test (G - 1 df), a bootstrap that resamples samples, and no
McNemar (it assumes independent pairs); `test_name` says which test gave `p_value`.
Flipped pairs are still listed per `(sample_id, epoch)`. With one epoch per sample
nothing is clustered.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

from weakincentives.errors import ConfigurationError

from .. import stats
from .._records import EvalResult
from ._analysis import score_of

__all__ = [
    "ExperimentComparison",
    "FlippedSample",
    "OutcomeComparison",
    "Outcomes",
    "compare_outcomes",
    "compare_results",
]

PairKey = tuple[str, int]
"""`(sample_id, epoch)`: what pairs a baseline result with a treatment result."""


@dataclass(frozen=True, slots=True)
class FlippedSample:
    """A pair whose verdict differs between baseline and treatment."""

    sample_id: str
    """The sample."""
    epoch: int
    """The epoch of the pair."""
    baseline: EvalResult
    """The baseline's result."""
    treatment: EvalResult
    """The treatment's result."""


_FlipT = TypeVar("_FlipT")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Comparison(Generic[_FlipT]):
    """Treatment against baseline: the fields and numbers both kinds of comparison share.

    `_FlipT` is how a flipped pair is given: a `FlippedSample` or a pair of row positions.
    """

    baseline_name: str
    """Name of the baseline experiment."""
    treatment_name: str
    """Name of the treatment experiment."""
    baseline: stats.RateEstimate
    """Baseline pass rate over all its results, with its interval: Wilson, or clustered by
    sample when epochs repeat (the same number as the experiment's summary)."""
    treatment: stats.RateEstimate
    """Treatment pass rate over all its results, with its interval (as `baseline`)."""
    n_pairs: int
    """Number of `(sample_id, epoch)` pairs present in both experiments."""
    paired: stats.PairedComparison | None
    """Paired comparison of pass/fail (1/0) on the pairs; None without pairs.

    With McNemar's test, or clustered by sample (no McNemar) when epochs repeat."""
    score_paired: stats.PairedComparison | None
    """Paired comparison of scores (errors = 0) on the pairs, clustered like `paired`;
    None without pairs."""
    regressions: tuple[_FlipT, ...]
    """Pairs where the baseline passed and the treatment did not (McNemar's `b`)."""
    improvements: tuple[_FlipT, ...]
    """Pairs where the treatment passed and the baseline did not (McNemar's `c`)."""
    unpaired_baseline: tuple[PairKey, ...]
    """`(sample_id, epoch)` keys that only the baseline has."""
    unpaired_treatment: tuple[PairKey, ...]
    """`(sample_id, epoch)` keys that only the treatment has."""
    duplicates: int = 0
    """Results ignored because their key already appeared in the same experiment."""

    @property
    def baseline_pass_rate(self) -> float:
        """Pass rate of the baseline (passed / total, errors count as not passed)."""
        return self.baseline.rate

    @property
    def treatment_pass_rate(self) -> float:
        """Pass rate of the treatment."""
        return self.treatment.rate

    @property
    def pass_rate_delta(self) -> float:
        """Treatment minus baseline pass rate (over all results; see `delta` for pairs)."""
        return self.treatment.rate - self.baseline.rate

    @property
    def relative_improvement(self) -> float | None:
        """`pass_rate_delta / baseline_pass_rate` as a fraction (0.25 = +25%); None at 0."""
        if self.baseline.rate == 0:
            return None
        return self.pass_rate_delta / self.baseline.rate

    @property
    def delta(self) -> float:
        """Paired pass-rate difference on the pairs (NaN without pairs)."""
        return self.paired.delta if self.paired is not None else math.nan

    @property
    def n_clusters(self) -> int | None:
        """Samples the pairs are clustered by when some sample repeats, else None."""
        return self.paired.n_clusters if self.paired is not None else None

    @property
    def delta_ci(self) -> stats.Interval:
        """Interval of the paired delta (`paired.interval_method` says which).

        Newcombe's paired interval for independent pass/fail pairs; clustered, the
        cluster-robust t interval (Newcombe over the samples when every sample moved
        alike). NaN ends without pairs or with a single sample (`why("interval")`).
        """
        return self.paired.interval if self.paired else stats.Interval(math.nan, math.nan)

    @property
    def bootstrap_ci(self) -> stats.Interval:
        """Seeded paired-bootstrap interval of the delta: a cross-check of `delta_ci`."""
        if self.paired is None:
            return stats.Interval(math.nan, math.nan)
        return self.paired.bootstrap_interval

    @property
    def mcnemar(self) -> stats.McNemarResult | None:
        """McNemar's test on the discordant pairs; None without pairs or when clustered."""
        return self.paired.mcnemar if self.paired is not None else None

    @property
    def p_value(self) -> float:
        """Two-sided p-value of the pass/fail difference (NaN without pairs).

        McNemar's test on the discordant pairs, exact up to 25 of them; when clustered,
        the cluster-robust t-test of `paired` (NaN with a single sample). `test_name` says
        which.
        """
        test = self.mcnemar
        if test is not None:
            return test.p_value
        return self.paired.p_value if self.paired is not None else math.nan

    @property
    def test_name(self) -> str | None:
        """The test behind `p_value`; None without pairs.

        `"McNemar exact"`, `"McNemar chi-square"`, or `"cluster-robust t-test"` (`"sign
        test"` when every sample moved alike) when the
        pairs are clustered by sample.
        """
        test = self.mcnemar
        if test is not None:
            return "McNemar exact" if test.exact else "McNemar chi-square"
        return self.paired.test_name if self.paired is not None else None

    @property
    def discordant(self) -> tuple[int, int]:
        """`(b, c)`: pairs that went pass -> fail and fail -> pass."""
        return (len(self.regressions), len(self.improvements))

    @property
    def minimum_detectable_effect(self) -> float:
        """Smallest pass-rate delta these pairs detect at 80% power with the test used.

        McNemar's exact power at the observed share of discordant pairs; clustered, the
        cluster-robust t-test's. NaN when no effect is detectable or nothing estimates it
        (`why("minimum_detectable_effect")` says which).
        """
        return self.paired.minimum_detectable_effect if self.paired is not None else math.nan

    def why(self, name: str) -> str:
        """Why the pass/fail number `name` is unknown (NaN); empty when it is known.

        `name` is `"interval"`, `"p_value"`, `"bootstrap"` or `"minimum_detectable_effect"`.
        """
        if self.paired is None:
            return "no pairs"
        if name == "p_value" and self.mcnemar is not None:
            return ""  # McNemar's test is defined even for one pair
        return self.paired.reasons.get(name, "")

    @property
    def unpaired(self) -> int:
        """Number of results left without a partner (both sides)."""
        return len(self.unpaired_baseline) + len(self.unpaired_treatment)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentComparison(_Comparison[FlippedSample]):
    """Treatment against baseline: pass rates, paired delta with interval, tests, flips.

    `regressions` and `improvements` hold the flipped pairs' results (`FlippedSample`).

    Example::

        c = report.compare_experiments("baseline", "concise")
        print(f"{c.delta:+.1%} [{c.delta_ci.low:+.1%}, {c.delta_ci.high:+.1%}], p={c.p_value:.3f}")
        print("regressed:", [f.sample_id for f in c.regressions])
    """

    p_value_holm: float | None = None
    """Holm-adjusted `p_value` when made by `compare_all`, else None."""
    p_value_bh: float | None = None
    """Benjamini-Hochberg-adjusted `p_value` when made by `compare_all`, else None."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcomes:
    """One experiment's results as columns, one entry per result: what a comparison reads.

    `Outcomes.of(results)` makes them from `EvalResult`s; a store that keeps these columns
    (the viewer's index) builds them directly, without making 100,000 results.
    """

    sample_ids: Sequence[str]
    """Sample id of each result."""
    epochs: Sequence[int]
    """Epoch of each result."""
    passed: Sequence[bool]
    """Whether each result passed (errors never pass)."""
    scores: Sequence[float]
    """Score of each result for averaging: errors count as 0 (see `score_of`)."""

    def __post_init__(self) -> None:
        lengths = {len(self.sample_ids), len(self.epochs), len(self.passed), len(self.scores)}
        if len(lengths) > 1:
            raise ConfigurationError(
                "Outcomes needs one sample id, epoch, passed and score per result; got "
                f"lengths {sorted(lengths)}"
            )

    @classmethod
    def of(cls, results: Iterable[EvalResult]) -> Outcomes:
        """The columns of `results`, in order."""
        results = tuple(results)
        return cls(
            sample_ids=[r.sample_id for r in results],
            epochs=[r.epoch for r in results],
            passed=[r.passed for r in results],
            scores=[score_of(r) for r in results],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeComparison(_Comparison[tuple[int, int]]):
    """`ExperimentComparison` of two `Outcomes`, flipped pairs given as row positions.

    The same fields, numbers and properties as `ExperimentComparison`, except that
    `regressions` and `improvements` hold `(baseline_row, treatment_row)` positions in the
    two `Outcomes` rather than the results themselves, and there are no multiple-testing
    adjusted p-values (`p_value_holm`, `p_value_bh`: only `compare_all` makes those).
    """


def compare_outcomes(
    baseline: Outcomes,
    treatment: Outcomes,
    *,
    baseline_name: str,
    treatment_name: str,
    confidence: float = 0.95,
    bootstrap_resamples: int = 2000,
    seed: int = 0,
) -> OutcomeComparison:
    """`compare_results` on columns: the same numbers, flips as row positions.

    The pass/fail and score comparisons share their bootstrap draws
    (`stats.paired_comparisons`), which is what `compare_results` computes too.
    """
    base, base_dups = _index(baseline)
    treat, treat_dups = _index(treatment)
    rows = [(row, treat[key]) for key, row in base.items() if key in treat]
    samples = [baseline.sample_ids[i] for i, _ in rows]
    # Cluster by sample only when some sample has several paired epochs.
    clusters = samples if len(set(samples)) < len(samples) else None
    paired = score_paired = None
    if rows:
        passed = (baseline.passed, treatment.passed)
        scores = (baseline.scores, treatment.scores)
        paired, score_paired = stats.paired_comparisons(
            [
                (
                    [float(passed[0][i]) for i, _ in rows],
                    [float(passed[1][j]) for _, j in rows],
                    True,
                ),
                ([scores[0][i] for i, _ in rows], [scores[1][j] for _, j in rows], None),
            ],
            confidence=confidence,
            bootstrap_resamples=bootstrap_resamples,
            seed=seed,
            clusters=clusters,
        )
    return OutcomeComparison(
        baseline_name=baseline_name,
        treatment_name=treatment_name,
        baseline=_rate(baseline, confidence),
        treatment=_rate(treatment, confidence),
        n_pairs=len(rows),
        paired=paired,
        score_paired=score_paired,
        regressions=_flips(rows, baseline, treatment, regressions=True),
        improvements=_flips(rows, baseline, treatment, regressions=False),
        unpaired_baseline=tuple(key for key in base if key not in treat),
        unpaired_treatment=tuple(key for key in treat if key not in base),
        duplicates=base_dups + treat_dups,
    )


def compare_results(
    baseline: Iterable[EvalResult],
    treatment: Iterable[EvalResult],
    *,
    baseline_name: str,
    treatment_name: str,
    confidence: float = 0.95,
    bootstrap_resamples: int = 2000,
    seed: int = 0,
) -> ExperimentComparison:
    """Compare two lists of results pair by pair (see the module docstring).

    When some sample has more than one paired epoch, the paired statistics are clustered
    by sample (cluster-robust, without McNemar); otherwise pairs are independent.
    """
    base_all = tuple(baseline)
    treat_all = tuple(treatment)
    c = compare_outcomes(
        Outcomes.of(base_all),
        Outcomes.of(treat_all),
        baseline_name=baseline_name,
        treatment_name=treatment_name,
        confidence=confidence,
        bootstrap_resamples=bootstrap_resamples,
        seed=seed,
    )

    def flipped(rows: Iterable[tuple[int, int]]) -> tuple[FlippedSample, ...]:
        return tuple(
            FlippedSample(base_all[i].sample_id, base_all[i].epoch, base_all[i], treat_all[j])
            for i, j in rows
        )

    shared: dict[str, Any] = {f.name: getattr(c, f.name) for f in fields(_Comparison)}
    shared.update(regressions=flipped(c.regressions), improvements=flipped(c.improvements))
    return ExperimentComparison(**shared)


# -- helpers ----------------------------------------------------------------------------


def _index(outcomes: Outcomes) -> tuple[dict[PairKey, int], int]:
    """`(sample_id, epoch)` -> row of its first result, and how many later rows repeat a key."""
    index: dict[PairKey, int] = {}
    duplicates = 0
    for row, key in enumerate(zip(outcomes.sample_ids, outcomes.epochs, strict=True)):
        if key in index:
            duplicates += 1
        else:
            index[key] = row
    return index, duplicates


def _rate(outcomes: Outcomes, confidence: float) -> stats.RateEstimate:
    """The experiment's pass rate as every view shows it: clustered by sample on epochs."""
    summary = stats.summarize_outcomes(
        outcomes.passed,
        outcomes.scores,
        clusters=stats.repeated_samples(outcomes.sample_ids),
        confidence=confidence,
    )
    return summary.rate()


def _flips(
    rows: Sequence[tuple[int, int]],
    baseline: Outcomes,
    treatment: Outcomes,
    *,
    regressions: bool,
) -> tuple[tuple[int, int], ...]:
    base, treat = baseline.passed, treatment.passed
    return tuple(
        (i, j)
        for i, j in rows
        if bool(base[i]) is regressions and bool(treat[j]) is not regressions
    )
