"""Every treatment against one baseline, with p-values adjusted across the family.

`compare_all` runs `compare_experiments` for each treatment and adds Holm (family-wise)
and Benjamini-Hochberg (false discovery rate) adjusted p-values, because with many
treatments some "significant" result is likely by chance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from .. import stats
from ._collector import collector_paused
from ._comparison import ExperimentComparison
from ._view import ReportView

__all__ = ["compare_all"]


@collector_paused()
def compare_all(
    report: ReportView,
    baseline: str,
    *,
    treatments: Sequence[str] | None = None,
    confidence: float = 0.95,
    bootstrap_resamples: int = 2000,
    seed: int = 0,
) -> Mapping[str, ExperimentComparison]:
    """Compare every other experiment (or `treatments`) with `baseline`.

    With many treatments some "significant" result is likely by chance, so each
    comparison also carries its Holm (family-wise) and Benjamini-Hochberg (false
    discovery rate) adjusted p-values over the family; compare those with alpha.
    Comparisons without a p-value (no pairs, or clustered pairs of a single sample) are
    left out of the adjustment.

    Raises:
        ConfigurationError: an experiment name has no results.
    """
    names = (
        [name for name in report.experiment_names if name != baseline]
        if treatments is None
        else list(treatments)
    )
    comparisons = {
        name: report.compare_experiments(
            baseline,
            name,
            confidence=confidence,
            bootstrap_resamples=bootstrap_resamples,
            seed=seed,
        )
        for name in names
    }
    tested = [name for name, c in comparisons.items() if math.isfinite(c.p_value)]
    p_values = [comparisons[name].p_value for name in tested]
    holm = stats.holm(p_values)
    bh = stats.benjamini_hochberg(p_values)
    for name, p_holm, p_bh in zip(tested, holm, bh, strict=True):
        comparisons[name] = replace(comparisons[name], p_value_holm=p_holm, p_value_bh=p_bh)
    return comparisons
