"""The mailbox side: `EvalLoop` and the helpers that submit and collect work.

Holds `EvalLoop` (a mailbox worker wrapping an `AgentLoop` or a function, scoring each
request: `_eval_loop.py`) and `submit_dataset` / `submit_experiments` / `collect_results`
(`_submit.py`), which a client uses to send a dataset to workers and gather a report.
It may import everything else of `evals` (it sits on top) and `runtime`.
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from ._eval_loop import (
        TRANSIENT_ERRORS,
        EvalLoop,
        EvalLoopConfig,
    )
    from ._submit import (
        collect_results,
        submit_dataset,
        submit_experiments,
    )


__all__ = [
    "TRANSIENT_ERRORS",
    "EvalLoop",
    "EvalLoopConfig",
    "collect_results",
    "submit_dataset",
    "submit_experiments",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.evals.loop._eval_loop": ("TRANSIENT_ERRORS", "EvalLoop", "EvalLoopConfig"),
        "weakincentives.evals.loop._submit": (
            "collect_results",
            "submit_dataset",
            "submit_experiments",
        ),
    },
)
