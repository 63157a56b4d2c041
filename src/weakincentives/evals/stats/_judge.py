"""How far an LLM judge agrees with human labels, and pass rates corrected for its errors."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from weakincentives.errors import InvalidStatisticError

from ._intervals import Interval, RateEstimate, wilson_interval
from ._normal import as_count, check_probability, check_same_length, critical_value


def cohens_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Return Cohen's kappa, the agreement of two raters beyond what chance explains.

    `a[i]` and `b[i]` are the two raters' labels for item `i`; labels are any hashable
    values. 1 is perfect agreement, 0 is chance level, negative is worse than chance.
    When both raters give every item one and the same label, chance agreement is already
    perfect and kappa is undefined: NaN is returned. Matches statsmodels
    `cohens_kappa(table)` on the confusion table.

    Raises:
        InvalidStatisticError: the sequences are empty or of different lengths.
    """
    check_same_length(("a", "b"), a, b)
    n = len(a)
    if n == 0:
        raise InvalidStatisticError("cohens_kappa needs at least one labelled item, got none")
    agree = sum(1 for x, y in zip(a, b, strict=True) if x == y)
    counts_b = Counter(b)
    # n**2 times the chance agreement, kept in integers so that only one rounding happens.
    chance = sum(count * counts_b[label] for label, count in Counter(a).items())
    if chance == n * n:
        return math.nan
    return (agree * n - chance) / (n * n - chance)


@dataclass(frozen=True, slots=True, kw_only=True)
class CorrectedRate:
    """A pass rate corrected for a judge's known error rates (Rogan-Gladen)."""

    rate: float
    """Corrected rate `(raw_rate + tnr - 1) / (tpr + tnr - 1)`, clipped to `[0, 1]`."""
    se: float
    """Delta-method standard error, including the uncertainty of `tpr` and `tnr`."""
    low: float
    """Lower end of the normal interval around the unclipped estimate, clipped to `[0, 1]`."""
    high: float
    """Upper end of that interval, clipped to `[0, 1]`."""
    raw_rate: float
    """The judge's observed pass rate, `observed_passes / n`."""
    n: int
    """Number of judged samples."""
    confidence: float
    """Coverage of the interval, e.g. `0.95`."""

    @property
    def interval(self) -> Interval:
        """`Interval(low, high)`."""
        return Interval(self.low, self.high)


def corrected_pass_rate(
    observed_passes: int,
    n: int,
    *,
    tpr: float,
    tnr: float,
    n_positive_labels: int,
    n_negative_labels: int,
    confidence: float = 0.95,
) -> CorrectedRate:
    """Correct a judge's pass rate for its false passes and false fails.

    A judge with true positive rate `tpr` and true negative rate `tnr` (measured on
    `n_positive_labels` human-labelled passes and `n_negative_labels` human-labelled
    fails, e.g. with `judge_agreement`) reports `p = tpr * t + (1 - tnr) * (1 - t)` for a
    true rate `t`. The Rogan-Gladen estimator inverts this. Its delta-method variance is

        (p(1-p)/n + t**2 tpr(1-tpr)/n_pos + (1-t)**2 tnr(1-tnr)/n_neg) / (tpr + tnr - 1)**2

    so a judge validated on few labels gives a wide interval, as it should.

    Raises:
        InvalidStatisticError: counts are invalid, a rate is outside `[0, 1]`, or
            `tpr + tnr <= 1` (the judge is no better than a coin and cannot be corrected).
    """
    observed_passes = as_count("observed_passes", observed_passes)
    n = as_count("n", n, minimum=1)
    if observed_passes > n:
        raise InvalidStatisticError(f"observed_passes ({observed_passes}) cannot exceed n ({n})")
    check_probability("tpr", tpr)
    check_probability("tnr", tnr)
    n_pos = as_count("n_positive_labels", n_positive_labels, minimum=1)
    n_neg = as_count("n_negative_labels", n_negative_labels, minimum=1)
    z = critical_value(confidence)
    # Subtracting the false-pass rate keeps a perfect judge's estimate exactly `p`.
    false_pass_rate = 1.0 - tnr
    youden = tpr - false_pass_rate
    if youden <= 0.0:
        raise InvalidStatisticError(
            f"tpr + tnr must exceed 1 to correct a pass rate, got {tpr!r} + {tnr!r}; "
            "the judge is no better than chance: improve it or label more data"
        )
    p = observed_passes / n
    estimate = (p - false_pass_rate) / youden
    variance = (
        p * (1.0 - p) / n
        + estimate**2 * tpr * (1.0 - tpr) / n_pos
        + (1.0 - estimate) ** 2 * tnr * (1.0 - tnr) / n_neg
    ) / youden**2
    se = math.sqrt(variance)
    return CorrectedRate(
        rate=min(max(estimate, 0.0), 1.0),
        se=se,
        low=min(max(estimate - z * se, 0.0), 1.0),
        high=min(max(estimate + z * se, 0.0), 1.0),
        raw_rate=p,
        n=n,
        confidence=confidence,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeAgreement:
    """A judge's pass/fail verdicts against human labels on the same samples."""

    n: int
    """Number of samples labelled by both."""
    true_positives: int
    """Judge pass, human pass."""
    false_positives: int
    """Judge pass, human fail."""
    true_negatives: int
    """Judge fail, human fail."""
    false_negatives: int
    """Judge fail, human pass."""
    tpr: float
    """True positive rate (sensitivity): share of human passes the judge passes; NaN if none."""
    tnr: float
    """True negative rate (specificity): share of human fails the judge fails; NaN if none."""
    accuracy: float
    """Share of samples where judge and human agree."""
    kappa: float
    """Cohen's kappa of judge against human; NaN when both give one identical label."""

    @property
    def n_positive(self) -> int:
        """Number of human-labelled passes."""
        return self.true_positives + self.false_negatives

    @property
    def n_negative(self) -> int:
        """Number of human-labelled fails."""
        return self.true_negatives + self.false_positives

    def tpr_estimate(self, *, confidence: float = 0.95) -> RateEstimate:
        """Return `tpr` with its Wilson interval."""
        return wilson_interval(self.true_positives, self.n_positive, confidence=confidence)

    def tnr_estimate(self, *, confidence: float = 0.95) -> RateEstimate:
        """Return `tnr` with its Wilson interval."""
        return wilson_interval(self.true_negatives, self.n_negative, confidence=confidence)

    def correct(self, observed_passes: int, n: int, *, confidence: float = 0.95) -> CorrectedRate:
        """Return `corrected_pass_rate` for this judge's verdicts on another `n` samples.

        Raises:
            InvalidStatisticError: the labels held no passes or no fails, so `tpr` or
                `tnr` is unknown, or `tpr + tnr <= 1`.
        """
        if self.n_positive == 0 or self.n_negative == 0:
            raise InvalidStatisticError(
                f"the human labels hold {self.n_positive} passes and {self.n_negative} fails; "
                "label at least one of each to measure tpr and tnr before correcting"
            )
        return corrected_pass_rate(
            observed_passes,
            n,
            tpr=self.tpr,
            tnr=self.tnr,
            n_positive_labels=self.n_positive,
            n_negative_labels=self.n_negative,
            confidence=confidence,
        )


def _labels(name: str, values: Sequence[object]) -> list[bool]:
    labels: list[bool] = []
    for index, value in enumerate(values):
        if value not in (True, False):
            raise InvalidStatisticError(
                f"{name}[{index}] is {value!r}; pass/fail labels must be booleans (or 0/1)"
            )
        labels.append(bool(value))
    return labels


def judge_agreement(judge: Sequence[bool], human: Sequence[bool]) -> JudgeAgreement:
    """Compare a judge's pass/fail verdicts with human labels of the same samples.

    Raises:
        InvalidStatisticError: the sequences are empty, of different lengths, or hold
            something other than booleans or 0/1.
    """
    check_same_length(("judge", "human"), judge, human)
    if len(judge) == 0:
        raise InvalidStatisticError("judge_agreement needs at least one labelled sample")
    verdicts = _labels("judge", judge)
    truths = _labels("human", human)
    pairs = Counter(zip(verdicts, truths, strict=True))
    tp, fp = pairs[True, True], pairs[True, False]
    tn, fn = pairs[False, False], pairs[False, True]
    n = len(verdicts)
    return JudgeAgreement(
        n=n,
        true_positives=tp,
        false_positives=fp,
        true_negatives=tn,
        false_negatives=fn,
        tpr=tp / (tp + fn) if tp + fn else math.nan,
        tnr=tn / (tn + fp) if tn + fp else math.nan,
        accuracy=(tp + tn) / n,
        kappa=cohens_kappa(verdicts, truths),
    )
