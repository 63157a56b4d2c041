"""Statistics for eval reports: every rate with its n and interval, A/B tests, pass@k.

Pure Python and numpy; the numbers match statsmodels and scipy (checked by the tests).
Intervals stay honest at small n and in degenerate cases: Student t (n - 1 df) for
means and paired differences, t with G - 1 df for cluster-robust ones, Wilson for
rates, Newcombe for paired rates, and a worst-case interval rather than zero width
when the data show no spread. `docs/statistics.md` says which is used when.
numpy is imported by the functions that use it, on their first call: importing this
package (or running an eval) does not load it. It may import nothing else of `evals`:
every other part may use it.
Results are frozen dataclasses; bad input raises `InvalidStatisticError`.

Rates and means:

- `wilson_interval(successes, n)` -> `RateEstimate`: a pass rate with its Wilson interval.
- `mean_ci(values, bounds=...)` -> `MeanEstimate`: a mean with its Student t interval;
  `mean_ci_counts({value: count})` the same from counted values (`count_values`), and
  `percentile_counts` / `fsum_counts` their percentile and exact sum: what a report
  keeps while results stream.
- `clustered_mean(values, clusters)` -> `ClusteredEstimate`: cluster-robust (CR1) SE,
  t interval with `n_clusters - 1` degrees of freedom.
- `summarize_outcomes(passed, scores, clusters=...)` -> `OutcomeSummary`: the pass rate
  and mean score of one experiment as every view shows them; clustered by sample when
  `repeated_samples(sample_ids)` says a sample repeats (epochs).
- `Interval(low, high)`: what every estimate's `.interval` returns.

Comparing experiments:

- `paired_comparison(baseline, treatment)` -> `PairedComparison`: per-sample A/B delta,
  paired SE, correlation, interval, p-value, McNemar, seeded bootstrap, detectable effect;
  with `clusters=` (e.g. sample ids when epochs repeat) all of it is cluster-robust (CR1).
- `paired_comparisons(comparisons)`: several paired comparisons over the same pairs (e.g.
  pass/fail and score) sharing one set of bootstrap draws; each equals `paired_comparison`.
- `mcnemar(b, c)` -> `McNemarResult`: exact when `b + c <= 25`, else chi-square.
- `newcombe_paired_interval(both, only_first, only_second, neither)`: interval of the
  difference of two paired proportions (Newcombe 1998, method 10).
- `holm(p_values)`, `benjamini_hochberg(p_values)`: adjusted p-values for many tests.

Planning:

- `minimum_detectable_effect(n, sd=...)`: the smallest difference a t-test on `n` pairs
  detects; `required_sample_size(effect, sd=...)`: the pairs it needs; `t_test_power`.
- `mcnemar_power(n, p10=..., p01=...)`: exact power of McNemar's test as the report runs
  it; `mcnemar_sample_size(...)`, `mcnemar_detectable_effect(n, discordant=...)`;
  `connor_sample_size(...)`: Connor's (1987) approximation; for planning,
  `discordant_rates(p1, p2, correlation)` and `mcnemar_detectable_rise(n, baseline_rate=...)`.
- `required_sample_size_proportions(p1, p2)`: samples per group for two independent rates.

Repeated attempts (epochs):

- `pass_at_k(n, c, k)`, `pass_hat_k(n, c, k)`: at least one / all of k attempts pass.
- `pass_at_k_by_sample(...)`, `pass_hat_k_by_sample(...)`: the same for every sample.

Judges:

- `cohens_kappa(a, b)`: chance-corrected agreement of two label sequences.
- `judge_agreement(judge, human)` -> `JudgeAgreement`: TPR, TNR, accuracy and kappa.
- `corrected_pass_rate(observed_passes, n, tpr=..., tnr=..., ...)` -> `CorrectedRate`:
  the pass rate corrected for judge errors (Rogan-Gladen) with a delta-method SE.

- `format_signed(x)`, `plural(n, word)`: how every view prints a signed number (never
  "-0.0") and a count.
- `normal_ppf(p)`: the inverse standard normal CDF (AS241); `t_ppf(p, df)`, `t_sf(t, df)`:
  Student's t quantile and tail, without scipy.
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from weakincentives.errors import InvalidStatisticError

    from ._counts import ValueCounts, count_values, fsum_counts, percentile_counts
    from ._floats import Floats
    from ._format import format_signed, plural
    from ._intervals import (
        ClusteredEstimate,
        Interval,
        MeanEstimate,
        RateEstimate,
        clustered_mean,
        mean_ci,
        mean_ci_counts,
        wilson_interval,
    )
    from ._judge import (
        CorrectedRate,
        JudgeAgreement,
        cohens_kappa,
        corrected_pass_rate,
        judge_agreement,
    )
    from ._mcnemar import McNemarResult, mcnemar
    from ._mcnemar_power import (
        connor_sample_size,
        discordant_rates,
        mcnemar_detectable_effect,
        mcnemar_detectable_rise,
        mcnemar_power,
        mcnemar_sample_size,
    )
    from ._multiple import benjamini_hochberg, holm
    from ._newcombe import newcombe_paired_interval
    from ._normal import normal_ppf
    from ._outcomes import OutcomeSummary, repeated_samples, summarize_outcomes
    from ._paired import PairedComparison, paired_comparison, paired_comparisons
    from ._passk import pass_at_k, pass_at_k_by_sample, pass_hat_k, pass_hat_k_by_sample
    from ._power import (
        minimum_detectable_effect,
        required_sample_size,
        required_sample_size_proportions,
        t_test_power,
    )
    from ._tdist import t_ppf, t_sf


__all__ = [
    "ClusteredEstimate",
    "CorrectedRate",
    "Floats",
    "Interval",
    "InvalidStatisticError",
    "JudgeAgreement",
    "McNemarResult",
    "MeanEstimate",
    "OutcomeSummary",
    "PairedComparison",
    "RateEstimate",
    "ValueCounts",
    "benjamini_hochberg",
    "clustered_mean",
    "cohens_kappa",
    "connor_sample_size",
    "corrected_pass_rate",
    "count_values",
    "discordant_rates",
    "format_signed",
    "fsum_counts",
    "holm",
    "judge_agreement",
    "mcnemar",
    "mcnemar_detectable_effect",
    "mcnemar_detectable_rise",
    "mcnemar_power",
    "mcnemar_sample_size",
    "mean_ci",
    "mean_ci_counts",
    "minimum_detectable_effect",
    "newcombe_paired_interval",
    "normal_ppf",
    "paired_comparison",
    "paired_comparisons",
    "pass_at_k",
    "pass_at_k_by_sample",
    "pass_hat_k",
    "pass_hat_k_by_sample",
    "percentile_counts",
    "plural",
    "repeated_samples",
    "required_sample_size",
    "required_sample_size_proportions",
    "summarize_outcomes",
    "t_ppf",
    "t_sf",
    "t_test_power",
    "wilson_interval",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.errors": ("InvalidStatisticError",),
        "weakincentives.evals.stats._counts": (
            "ValueCounts",
            "count_values",
            "fsum_counts",
            "percentile_counts",
        ),
        "weakincentives.evals.stats._floats": ("Floats",),
        "weakincentives.evals.stats._format": ("format_signed", "plural"),
        "weakincentives.evals.stats._intervals": (
            "ClusteredEstimate",
            "Interval",
            "MeanEstimate",
            "RateEstimate",
            "clustered_mean",
            "mean_ci",
            "mean_ci_counts",
            "wilson_interval",
        ),
        "weakincentives.evals.stats._judge": (
            "CorrectedRate",
            "JudgeAgreement",
            "cohens_kappa",
            "corrected_pass_rate",
            "judge_agreement",
        ),
        "weakincentives.evals.stats._mcnemar": ("McNemarResult", "mcnemar"),
        "weakincentives.evals.stats._mcnemar_power": (
            "connor_sample_size",
            "discordant_rates",
            "mcnemar_detectable_effect",
            "mcnemar_detectable_rise",
            "mcnemar_power",
            "mcnemar_sample_size",
        ),
        "weakincentives.evals.stats._multiple": ("benjamini_hochberg", "holm"),
        "weakincentives.evals.stats._newcombe": ("newcombe_paired_interval",),
        "weakincentives.evals.stats._normal": ("normal_ppf",),
        "weakincentives.evals.stats._outcomes": (
            "OutcomeSummary",
            "repeated_samples",
            "summarize_outcomes",
        ),
        "weakincentives.evals.stats._paired": (
            "PairedComparison",
            "paired_comparison",
            "paired_comparisons",
        ),
        "weakincentives.evals.stats._passk": (
            "pass_at_k",
            "pass_at_k_by_sample",
            "pass_hat_k",
            "pass_hat_k_by_sample",
        ),
        "weakincentives.evals.stats._power": (
            "minimum_detectable_effect",
            "required_sample_size",
            "required_sample_size_proportions",
            "t_test_power",
        ),
        "weakincentives.evals.stats._tdist": ("t_ppf", "t_sf"),
    },
)
