"""The local runner: run a dataset through a target, one sample at a time, concurrently.

Holds `evaluate()` / `run_eval()` and their options (`_evaluate.py`, `EvalConfig` in
`_config.py`), the scheduler that
pulls samples, bounds concurrency, enforces timeouts and appends results to the run store
(`_scheduler.py`; the results it makes itself, `slim` and `error_result`: `_outcomes.py`;
a new run's manifest, written once its first samples are under way: `_publish.py`), how a
target (an `AgentLoop`, a function, a suite) is adapted
(`_target.py`), how one sample is executed and scored (`_sample.py`, and
`_async_executor.py` for async functions), its debug bundle (`_bundles.py`), per-sample
environments (`_environment.py`) and progress sinks (`_progress.py`). It may import the
shared records, `dataset`, `scoring`, `store` and `report`; not `loop`.
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from ._async_executor import (
        AsyncFunctionExecutor,
    )
    from ._bundles import (
        BundleOptions,
        BundleScope,
        record_bundle,
        record_outcome,
        with_bundle,
    )
    from ._config import (
        EvalConfig,
        PrepareMessages,
    )
    from ._environment import (
        Environment,
        EnvironmentFactory,
        check_environment,
        create_environment,
        restore_environment,
        serialize_environment,
    )
    from ._evaluate import (
        DatasetSource,
        EvalTarget,
        EvaluateOptions,
        evaluate,
        run_eval,
    )
    from ._fail_fast import DEFAULT_FAIL_FAST
    from ._outcomes import error_result, slim
    from ._progress import (
        CallbackProgress,
        NullProgress,
        ProgressSink,
        as_progress,
    )
    from ._sample import (
        SampleOutcome,
        execute_function,
        execute_sample,
    )
    from ._setup import (
        prepare_scorer,
    )


__all__ = [
    "DEFAULT_FAIL_FAST",
    "AsyncFunctionExecutor",
    "BundleOptions",
    "BundleScope",
    "CallbackProgress",
    "DatasetSource",
    "Environment",
    "EnvironmentFactory",
    "EvalConfig",
    "EvalTarget",
    "EvaluateOptions",
    "NullProgress",
    "PrepareMessages",
    "ProgressSink",
    "SampleOutcome",
    "as_progress",
    "check_environment",
    "create_environment",
    "error_result",
    "evaluate",
    "execute_function",
    "execute_sample",
    "prepare_scorer",
    "record_bundle",
    "record_outcome",
    "restore_environment",
    "run_eval",
    "serialize_environment",
    "slim",
    "with_bundle",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.evals.runner._async_executor": ("AsyncFunctionExecutor",),
        "weakincentives.evals.runner._bundles": (
            "BundleOptions",
            "BundleScope",
            "record_bundle",
            "record_outcome",
            "with_bundle",
        ),
        "weakincentives.evals.runner._config": ("EvalConfig", "PrepareMessages"),
        "weakincentives.evals.runner._environment": (
            "Environment",
            "EnvironmentFactory",
            "check_environment",
            "create_environment",
            "restore_environment",
            "serialize_environment",
        ),
        "weakincentives.evals.runner._evaluate": (
            "DatasetSource",
            "EvalTarget",
            "EvaluateOptions",
            "evaluate",
            "run_eval",
        ),
        "weakincentives.evals.runner._fail_fast": ("DEFAULT_FAIL_FAST",),
        "weakincentives.evals.runner._progress": (
            "CallbackProgress",
            "NullProgress",
            "ProgressSink",
            "as_progress",
        ),
        "weakincentives.evals.runner._sample": (
            "SampleOutcome",
            "execute_function",
            "execute_sample",
        ),
        "weakincentives.evals.runner._outcomes": ("error_result", "slim"),
        "weakincentives.evals.runner._setup": ("prepare_scorer",),
    },
)
