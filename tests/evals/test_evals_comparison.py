from __future__ import annotations

import io
import math

import numpy as np
import pytest
import statsmodels.api as sm
from rich.console import Console
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from weakincentives.evals import (
    EvalReport,
    EvalResult,
    ExperimentComparison,
    Score,
    compare_all,
    compare_results,
    stats,
)
from weakincentives.evals.report._render import comparison_table

# (baseline passed, treatment passed); None = the treatment errored (counts as not passed)
PAIRS: dict[str, tuple[int, int | None]] = {
    "s0": (1, 1),
    "s1": (1, 1),
    "s2": (1, 0),  # regression
    "s3": (0, 1),  # improvement
    "s4": (0, 1),  # improvement
    "s5": (1, None),  # regression through an error
    "s6": (0, 1),  # improvement
    "s7": (0, 0),
    "s8": (1, 1),
    "s9": (0, 1),  # improvement
    "s10": (1, 1),
    "s11": (0, 0),
}


def result(
    sample_id: str,
    experiment: str,
    passed: bool,
    *,
    value: float | None = None,
    epoch: int = 0,
    error: bool = False,
) -> EvalResult:
    score = Score(value=float(passed) if value is None else value, passed=passed)
    return EvalResult(
        sample_id=sample_id,
        experiment_name=experiment,
        score=score,
        latency_ms=1,
        epoch=epoch,
        error="boom" if error else None,
        error_kind="agent" if error else None,
    )


def paired_report() -> EvalReport:
    results = [result(sid, "baseline", bool(b)) for sid, (b, _) in PAIRS.items()]
    results.append(result("only_base", "baseline", True))
    for sid, (_, t) in PAIRS.items():
        # treatment passes score 0.8; the errored one carries a stale value that must count 0
        if t is None:
            results.append(result(sid, "v2", True, value=0.7, error=True))
        else:
            results.append(result(sid, "v2", bool(t), value=0.8 if t else 0.0))
    results.append(result("only_treat", "v2", False))
    return EvalReport(results=tuple(results))


@pytest.fixture
def comparison() -> ExperimentComparison:
    return paired_report().compare_experiments("baseline", "v2")


def test_headline_pass_rates_use_all_results_with_errors_as_failures(
    comparison: ExperimentComparison,
) -> None:
    assert comparison.baseline_name == "baseline"
    assert comparison.treatment_name == "v2"
    assert comparison.baseline_pass_rate == pytest.approx(7 / 13)
    assert comparison.treatment_pass_rate == pytest.approx(8 / 13)
    assert comparison.pass_rate_delta == pytest.approx(1 / 13)
    assert comparison.relative_improvement == pytest.approx((1 / 13) / (7 / 13))
    assert comparison.baseline == stats.wilson_interval(7, 13)


def test_pairs_flips_and_unpaired_samples(comparison: ExperimentComparison) -> None:
    assert comparison.n_pairs == 12
    assert [f.sample_id for f in comparison.regressions] == ["s2", "s5"]
    assert [f.sample_id for f in comparison.improvements] == ["s3", "s4", "s6", "s9"]
    assert comparison.discordant == (2, 4)
    assert comparison.regressions[1].treatment.error == "boom"
    assert comparison.unpaired_baseline == (("only_base", 0),)
    assert comparison.unpaired_treatment == (("only_treat", 0),)
    assert comparison.unpaired == 2


def test_paired_statistics_match_the_stats_functions(comparison: ExperimentComparison) -> None:
    base = [float(b) for b, _ in PAIRS.values()]
    treat = [float(bool(t)) for _, t in PAIRS.values()]
    expected = stats.paired_comparison(base, treat, binary=True)
    assert comparison.paired == expected
    assert comparison.delta == pytest.approx(2 / 12)
    assert comparison.delta_ci == expected.interval
    assert comparison.bootstrap_ci == expected.bootstrap_interval
    # 12 pairs with 6 discordant cannot reach 80% power with McNemar: unknown, with why.
    assert math.isnan(comparison.minimum_detectable_effect)
    assert (
        comparison.why("minimum_detectable_effect") == expected.reasons["minimum_detectable_effect"]
    )
    mcnemar = stats.mcnemar(2, 4)
    assert comparison.mcnemar == mcnemar
    assert mcnemar.exact
    assert comparison.p_value == mcnemar.p_value


def test_mcnemar_p_value_agrees_with_statsmodels(comparison: ExperimentComparison) -> None:
    # table rows: baseline pass/fail; columns: treatment pass/fail
    table = [[4, 2], [4, 2]]
    assert comparison.p_value == pytest.approx(sm_mcnemar(table, exact=True).pvalue)


def test_score_comparison_counts_errors_as_zero(comparison: ExperimentComparison) -> None:
    base = [float(b) for b, _ in PAIRS.values()]
    treat = [0.8 if t else 0.0 for _, t in PAIRS.values()]
    assert comparison.score_paired == stats.paired_comparison(base, treat)


def test_seed_and_confidence_reach_the_statistics() -> None:
    report = paired_report()
    narrow = report.compare_experiments("baseline", "v2", confidence=0.8, seed=7)
    assert narrow.paired is not None
    assert narrow.paired.confidence == 0.8
    assert narrow.delta_ci.width < report.compare_experiments("baseline", "v2").delta_ci.width
    base = [float(b) for b, _ in PAIRS.values()]
    treat = [float(bool(t)) for _, t in PAIRS.values()]
    expected = stats.paired_comparison(base, treat, confidence=0.8, seed=7, binary=True)
    assert narrow.bootstrap_ci == expected.bootstrap_interval


def test_results_pair_by_sample_and_epoch_and_duplicates_are_counted() -> None:
    baseline = [
        result("a", "b", True, epoch=0),
        result("a", "b", False, epoch=1),
        result("a", "b", False, epoch=0),  # a duplicate delivery: the first one is used
    ]
    treatment = [result("a", "t", False, epoch=0)]
    c = compare_results(baseline, treatment, baseline_name="b", treatment_name="t")
    assert c.n_pairs == 1
    assert c.unpaired_baseline == (("a", 1),)
    assert c.duplicates == 1
    assert [(f.sample_id, f.epoch) for f in c.regressions] == [("a", 0)]
    assert math.isnan(c.p_value) is False  # McNemar is defined with one pair
    assert c.delta_ci == stats.newcombe_paired_interval(0, 0, 1, 0)  # and Newcombe's interval


def test_no_pairs_gives_nan_statistics_but_counts_everything() -> None:
    c = compare_results(
        [result("a", "b", True)], [result("z", "t", True)], baseline_name="b", treatment_name="t"
    )
    assert c.n_pairs == 0
    assert c.paired is None
    assert c.score_paired is None
    assert c.mcnemar is None
    assert math.isnan(c.delta)
    assert math.isnan(c.p_value)
    assert math.isnan(c.bootstrap_ci.low)
    assert math.isnan(c.minimum_detectable_effect)
    assert c.discordant == (0, 0)
    assert c.unpaired == 2
    assert c.pass_rate_delta == 0.0


def test_relative_improvement_is_none_when_the_baseline_never_passes() -> None:
    c = compare_results(
        [result("a", "b", False)], [result("a", "t", True)], baseline_name="b", treatment_name="t"
    )
    assert c.relative_improvement is None
    assert c.pass_rate_delta == 1.0


def many_treatments() -> EvalReport:
    n = 30
    results = [result(f"s{i}", "baseline", i % 2 == 0) for i in range(n)]
    for name, extra in (("small", 2), ("large", 10), ("none", 0)):
        # flip `extra` failing baseline samples to passes
        failing = [i for i in range(n) if i % 2 == 1][:extra]
        results += [result(f"s{i}", name, i % 2 == 0 or i in failing) for i in range(n)]
    results.append(result("new", "tiny", True))  # no pairs: no p-value to adjust
    return EvalReport(results=tuple(results))


def test_compare_all_adjusts_p_values_with_holm_and_benjamini_hochberg() -> None:
    report = many_treatments()
    comparisons = compare_all(report, "baseline")
    assert list(comparisons) == ["small", "large", "none", "tiny"]
    tested = ["small", "large", "none"]
    raw = [comparisons[name].p_value for name in tested]
    assert raw == [stats.mcnemar(0, e).p_value for e in (2, 10, 0)]
    holm = stats.holm(raw)
    bh = stats.benjamini_hochberg(raw)
    for name, p_holm, p_bh in zip(tested, holm, bh, strict=True):
        assert comparisons[name].p_value_holm == p_holm
        assert comparisons[name].p_value_bh == p_bh
    assert comparisons["large"].p_value_holm == pytest.approx(3 * comparisons["large"].p_value)
    assert comparisons["tiny"].p_value_holm is None
    assert report.compare_all("baseline")["large"].p_value_bh == comparisons["large"].p_value_bh


def test_compare_all_with_chosen_treatments() -> None:
    comparisons = compare_all(many_treatments(), "baseline", treatments=["large"])
    assert list(comparisons) == ["large"]
    assert comparisons["large"].p_value_holm == comparisons["large"].p_value


# -- several epochs per sample: pairs are clustered by sample --------------------------------

# per sample: (baseline passes, treatment passes) of 3 epochs; epochs mostly agree
EPOCHS: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {
    "s0": ((1, 1, 1), (1, 1, 1)),
    "s1": ((0, 0, 0), (1, 1, 1)),
    "s2": ((0, 0, 1), (1, 1, 1)),
    "s3": ((1, 1, 1), (0, 0, 0)),
    "s4": ((0, 0, 0), (1, 1, 0)),
    "s5": ((0, 0, 0), (0, 0, 0)),
    "s6": ((1, 0, 1), (1, 1, 1)),
    "s7": ((0, 0, 0), (1, 1, 1)),
}


def epochs_report() -> EvalReport:
    results = [
        result(sid, name, bool(p), value=0.9 * p, epoch=epoch)
        for name, side in (("baseline", 0), ("v2", 1))
        for sid, sides in EPOCHS.items()
        for epoch, p in enumerate(sides[side])
    ]
    return EvalReport(results=tuple(results))


def epochs_columns() -> tuple[list[float], list[float], list[str]]:
    base = [float(p) for b, _ in EPOCHS.values() for p in b]
    treat = [float(p) for _, t in EPOCHS.values() for p in t]
    return base, treat, [sid for sid in EPOCHS for _ in range(3)]


def test_repeated_epochs_are_clustered_by_sample_without_mcnemar() -> None:
    c = epochs_report().compare_experiments("baseline", "v2")
    base, treat, clusters = epochs_columns()
    expected = stats.paired_comparison(base, treat, binary=True, clusters=clusters)
    assert c.paired == expected
    assert c.n_pairs == 24
    assert c.n_clusters == 8
    assert c.mcnemar is None
    assert c.test_name == "cluster-robust t-test"
    assert c.p_value == expected.p_value
    assert c.delta_ci == expected.interval
    assert c.bootstrap_ci == expected.bootstrap_interval
    assert c.minimum_detectable_effect == expected.minimum_detectable_effect
    scores = stats.paired_comparison(
        [0.9 * x for x in base], [0.9 * x for x in treat], clusters=clusters
    )
    assert c.score_paired == scores
    naive = stats.paired_comparison(base, treat)
    assert c.delta == naive.delta
    assert c.delta_ci.width > naive.interval.width
    assert c.p_value > stats.mcnemar(*c.discordant).p_value


def test_clustered_p_value_matches_statsmodels_cluster_robust_ols() -> None:
    c = epochs_report().compare_experiments("baseline", "v2", confidence=0.9)
    base, treat, clusters = epochs_columns()
    differences = np.subtract(treat, base)
    fit = sm.OLS(differences, np.ones_like(differences)).fit(
        cov_type="cluster",
        cov_kwds={"groups": np.unique(clusters, return_inverse=True)[1]},
        use_t=True,
    )
    low, high = fit.conf_int(alpha=0.1)[0]
    assert c.paired is not None
    assert c.paired.se == pytest.approx(fit.bse[0], rel=1e-9)
    assert c.p_value == pytest.approx(fit.pvalues[0], rel=1e-9)
    assert c.delta_ci.low == pytest.approx(low, abs=1e-9)
    assert c.delta_ci.high == pytest.approx(high, abs=1e-9)


def test_clustered_flips_stay_per_sample_and_epoch() -> None:
    c = epochs_report().compare_experiments("baseline", "v2")
    assert [(f.sample_id, f.epoch) for f in c.regressions] == [("s3", 0), ("s3", 1), ("s3", 2)]
    improved = [(f.sample_id, f.epoch) for f in c.improvements]
    assert improved[:5] == [("s1", 0), ("s1", 1), ("s1", 2), ("s2", 0), ("s2", 1)]
    assert ("s6", 1) in improved
    assert c.discordant == (3, 11)


def test_one_epoch_per_sample_is_not_clustered(comparison: ExperimentComparison) -> None:
    assert comparison.n_clusters is None
    assert comparison.test_name == "McNemar exact"
    assert comparison.mcnemar is not None


def test_only_repeats_inside_the_pairing_cluster() -> None:
    # Epoch 1 of "a" ran under the baseline only: one pair per sample, nothing clustered.
    baseline = [result("a", "b", True, epoch=0), result("a", "b", False, epoch=1)]
    baseline.append(result("z", "b", True))
    treatment = [result("a", "t", False, epoch=0), result("z", "t", False)]
    c = compare_results(baseline, treatment, baseline_name="b", treatment_name="t")
    assert c.n_clusters is None
    assert c.mcnemar is not None


def test_clustered_pairs_of_one_sample_have_no_p_value_and_no_adjustment() -> None:
    results = [result("a", "baseline", bool(e % 2), epoch=e) for e in range(4)]
    results += [result("a", "one", True, epoch=e) for e in range(4)]
    results += [result("b", "baseline", False)]  # "one" never ran "b"
    comparisons = compare_all(EvalReport(results=tuple(results)), "baseline")
    c = comparisons["one"]
    assert c.n_clusters == 1
    assert math.isnan(c.p_value)
    assert math.isnan(c.delta_ci.low)
    assert c.test_name == "cluster-robust t-test"
    assert c.p_value_holm is None
    assert "p-value n/a (1 sample: no spread between samples to estimate)" in _rendered(c)


def _rendered(c: ExperimentComparison) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=100).print(comparison_table(c))
    return " ".join(buffer.getvalue().split())


def test_clustered_comparison_renders_its_test_and_samples() -> None:
    c = epochs_report().compare_experiments("baseline", "v2")
    text = _rendered(c)
    assert "(95% CI, 24 pairs in 8 samples; Student t)" in text
    assert f"p-value {c.p_value:.3f} (cluster-robust t-test)" in text
    assert "Discordant 3 pass->fail, 11 fail->pass" in text


def test_compare_all_adjusts_clustered_p_values() -> None:
    comparisons = compare_all(epochs_report(), "baseline")
    assert comparisons["v2"].p_value_holm == comparisons["v2"].p_value


def test_clustered_comparisons_name_their_test_in_json_and_html() -> None:
    from weakincentives.debug import render_html_report
    from weakincentives.evals.report._export import comparison_block

    report = epochs_report()
    [c] = compare_all(report, "baseline").values()

    block = comparison_block(c)
    assert block["mcnemar"] is None
    assert block["test_name"] == "cluster-robust t-test"
    assert block["n_clusters"] == c.n_clusters and c.n_clusters is not None
    html = render_html_report(report)
    assert "(cluster-robust t-test)" in html
    assert "cluster-robust by sample" in html


def test_compare_outcomes_on_hand_built_columns_matches_paired_stats_and_flip_rows() -> None:
    from weakincentives.evals import Outcomes, compare_outcomes

    # Rows: (sample_id, epoch, passed, score); an errored result is not passed and scores 0.
    baseline_rows = [
        ("a", 0, True, 0.9),  # 0
        ("a", 1, False, 0.4),  # 1
        ("b", 0, True, 0.7),  # 2
        ("b", 1, True, 0.8),  # 3
        ("c", 0, False, 0.0),  # 4: error
        ("c", 1, False, 0.3),  # 5
        ("d", 0, True, 1.0),  # 6: only the baseline has d
        ("a", 0, False, 0.1),  # 7: repeats ("a", 0), ignored
    ]
    treatment_rows = [  # another order, so the rows of a pair differ
        ("c", 1, True, 0.6),  # 0
        ("b", 0, False, 0.0),  # 1: error
        ("a", 1, True, 0.55),  # 2
        ("a", 0, True, 0.95),  # 3
        ("c", 0, True, 0.5),  # 4
        ("b", 1, True, 0.85),  # 5
        ("e", 0, True, 1.0),  # 6: only the treatment has e
    ]

    def columns(rows: list[tuple[str, int, bool, float]]) -> Outcomes:
        ids, epochs, passed, scores = zip(*rows, strict=True)
        return Outcomes(sample_ids=ids, epochs=epochs, passed=passed, scores=scores)

    c = compare_outcomes(
        columns(baseline_rows), columns(treatment_rows), baseline_name="b", treatment_name="t"
    )
    # Pairs in baseline order: a0, a1, b0, b1, c0, c1; two epochs per sample, so clustered.
    clusters = ["a", "a", "b", "b", "c", "c"]
    assert c.paired == stats.paired_comparison(
        [1, 0, 1, 1, 0, 0], [1, 1, 0, 1, 1, 1], binary=True, clusters=clusters
    )
    assert c.score_paired == stats.paired_comparison(
        [0.9, 0.4, 0.7, 0.8, 0.0, 0.3], [0.95, 0.55, 0.0, 0.85, 0.5, 0.6], clusters=clusters
    )
    assert (c.n_pairs, c.n_clusters, c.mcnemar) == (6, 3, None)
    assert c.test_name == "cluster-robust t-test"
    # Each side's rate is the experiment's summary: clustered by sample (epochs repeat).
    for side, rows in ((c.baseline, baseline_rows), (c.treatment, treatment_rows)):
        ids, _, passed, scores = zip(*rows, strict=True)
        assert side == stats.summarize_outcomes(passed, scores, clusters=ids).rate()
        assert side.n_clusters == len(set(ids))
    # (baseline_row, treatment_row): b0 regressed; a1, c0 and c1 improved.
    assert c.regressions == ((2, 1),)
    assert c.improvements == ((1, 2), (4, 4), (5, 0))
    assert (c.unpaired_baseline, c.unpaired_treatment) == ((("d", 0),), (("e", 0),))
    assert c.duplicates == 1


def test_outcomes_columns_must_have_one_entry_per_result() -> None:
    from weakincentives.errors import ConfigurationError
    from weakincentives.evals.report._comparison import Outcomes

    with pytest.raises(ConfigurationError, match="lengths"):
        Outcomes(sample_ids=["a", "b"], epochs=[0, 0], passed=[True], scores=[1.0, 0.0])
