"""Reports: what a set of results says, as numbers, tables and files.

Holds `EvalReport` (`_report.py`), the per-result analysis it is built on (`group_by`,
`summarize`, flaky samples: `_analysis.py`), per-check rates (`_checks.py`), paired A/B
comparisons (`_comparison.py`), the JSON export (`_export.py`), the terminal tables
(`_render.py`), costs and cost deltas (`_cost.py`) and `save`/`load` (`_persistence.py`).
The numbers themselves come from `evals.stats`. It may import the shared records, `stats`
and `store` (to read a run directory); not `runner` or `loop`.
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from ._analysis import (
        FlakySample,
        GroupKey,
        Summary,
        flaky_samples,
        group_by,
        summarize,
    )
    from ._checks import CheckRate, check_rates
    from ._comparison import (
        ExperimentComparison,
        FlippedSample,
        OutcomeComparison,
        Outcomes,
        compare_outcomes,
        compare_results,
    )
    from ._cost import (
        CostDelta,
        CostSummary,
        cost_delta,
        cost_summary,
        format_usd,
        paired_cost_delta,
        result_cost,
        summarize_costs,
    )
    from ._export import (
        report_to_dict,
    )
    from ._family import compare_all
    from ._persistence import (
        REPORT_FORMAT,
        REPORT_VERSION,
    )
    from ._render import (
        render_report,
    )
    from ._report import (
        EvalReport,
    )


__all__ = [
    "REPORT_FORMAT",
    "REPORT_VERSION",
    "CheckRate",
    "CostDelta",
    "CostSummary",
    "EvalReport",
    "ExperimentComparison",
    "FlakySample",
    "FlippedSample",
    "GroupKey",
    "OutcomeComparison",
    "Outcomes",
    "Summary",
    "check_rates",
    "compare_all",
    "compare_outcomes",
    "compare_results",
    "cost_delta",
    "cost_summary",
    "flaky_samples",
    "format_usd",
    "group_by",
    "paired_cost_delta",
    "render_report",
    "report_to_dict",
    "result_cost",
    "summarize",
    "summarize_costs",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.evals.report._analysis": (
            "FlakySample",
            "GroupKey",
            "Summary",
            "flaky_samples",
            "group_by",
            "summarize",
        ),
        "weakincentives.evals.report._checks": ("CheckRate", "check_rates"),
        "weakincentives.evals.report._comparison": (
            "ExperimentComparison",
            "FlippedSample",
            "OutcomeComparison",
            "Outcomes",
            "compare_outcomes",
            "compare_results",
        ),
        "weakincentives.evals.report._cost": (
            "CostDelta",
            "CostSummary",
            "cost_delta",
            "cost_summary",
            "format_usd",
            "paired_cost_delta",
            "result_cost",
            "summarize_costs",
        ),
        "weakincentives.evals.report._export": ("report_to_dict",),
        "weakincentives.evals.report._family": ("compare_all",),
        "weakincentives.evals.report._persistence": ("REPORT_FORMAT", "REPORT_VERSION"),
        "weakincentives.evals.report._render": ("render_report",),
        "weakincentives.evals.report._report": ("EvalReport",),
    },
)
