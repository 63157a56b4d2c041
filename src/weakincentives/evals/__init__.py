"""Evaluation: datasets, scoring, runners, reports and statistics.

Use it to run the agent you ship (an `AgentLoop`) over a dataset, score each output,
and read the results as a report with honest numbers:

- `Sample`, `Dataset` (`Dataset.load(path, InputType, ExpectedType)` reads JSONL);
- `Score` (with named `Metric`s), `EvalRequest`, `EvalResult`;
- runners: `evaluate()` (async, asyncio or trio) and `run_eval()` (sync) run a dataset
  locally with concurrency, epochs, timeouts, a run store with resume, a response cache
  and progress (`ProgressSink`); `EvalLoop` runs behind mailboxes on many workers;
- RL-style scoring: `Trajectory` scorers `(trajectory, sample) -> Score` and per-sample
  `Environment`s (`environment_factory=`, `restore_environment`);
- `EvalReport`: pass rate (errors count as not passed), intervals, per-experiment
  breakdowns, paired A/B comparisons (`compare_experiments`, `compare_all`), pass@k,
  slicing (`group_by`, `summarize`), `save`/`load`, `render`, `to_json`;
- evaluators: `exact_match`, `contains`, `regex_match`, `json_equal`, `numeric_close`,
  combinators (`all_of`, `any_of`, `not_`, `threshold`), session evaluators
  (`tool_called`, `tool_sequence`, `token_usage_under`, ...) and LLM judges (`llm_judge`,
  `pairwise_judge`); `run_evaluator` and `is_session_aware` tell plain from session-aware;
  `inline_evaluator` marks one that never blocks (scored on the event loop);
- `stats`: the statistics behind the report (Wilson, paired tests, McNemar, pass@k...);
- `Experiment`, `BASELINE`, `CONTROL`, re-exported from `weakincentives.experiment`.
"""

from weakincentives.experiment import BASELINE, CONTROL, Experiment

from . import stats
from ._analysis import FlakySample, GroupKey, Summary, flaky_samples, group_by, summarize
from ._comparison import (
    ExperimentComparison,
    FlippedSample,
    OutcomeComparison,
    Outcomes,
    compare_all,
    compare_outcomes,
    compare_results,
)
from ._dataset import Dataset, dataset_sha256, iter_jsonl, load_jsonl
from ._environment import (
    Environment,
    EnvironmentFactory,
    check_environment,
    create_environment,
    restore_environment,
    serialize_environment,
)
from ._evaluator_core import (
    Evaluator,
    SessionEvaluator,
    adapt,
    classify_error,
    evaluator_name,
    inline_evaluator,
    is_inline_evaluator,
    is_session_aware,
    run_evaluator,
    session_aware,
)
from ._evaluators import all_of, any_of, contains, contains_ci, exact_match, not_, threshold
from ._execute import SampleOutcome, execute_sample
from ._export import report_to_dict
from ._fingerprint import ExperimentFingerprint, Fingerprint, diff_fingerprints
from ._helpers import collect_results, submit_dataset, submit_experiments
from ._judge import (
    JUDGE_TEMPLATE,
    PAIRWISE_TEMPLATE,
    PASSING_RATINGS,
    RATING_VALUES,
    JudgeOutput,
    JudgeParams,
    JudgeRating,
    PairwiseJudge,
    PairwiseJudgment,
    PairwiseOutput,
    PairwiseParams,
    PairwiseVerdict,
    PairwiseWinner,
    llm_judge,
    pairwise_judge,
)
from ._loop import TRANSIENT_ERRORS, EvalLoop, EvalLoopConfig
from ._matchers import json_equal, numeric_close, regex_match, regex_search
from ._progress import CallbackProgress, NullProgress, ProgressSink, as_progress
from ._render import render_report
from ._report import EvalReport
from ._report_io import REPORT_FORMAT, REPORT_VERSION
from ._run import RunCounts, RunHandle, RunManifest, RunStatus
from ._runfile import MANIFEST_FILE, RESULTS_FILE, iter_results, latest_results
from ._runner import DatasetSource, EvalTarget, EvaluateOptions, evaluate, run_eval
from ._session_evaluators import (
    all_tools_succeeded,
    latency_under,
    max_model_requests,
    slice_contains,
    token_usage_under,
    tool_args_match,
    tool_call_count,
    tool_called,
    tool_not_called,
    tool_sequence,
)
from ._store import RunStore, new_run_id
from ._trajectory import Trajectory, TrajectoryScorer, is_trajectory_scorer, trajectory_scorer
from ._types import (
    ERROR_KINDS,
    ErrorKind,
    EvalRequest,
    EvalResult,
    Metric,
    Sample,
    Score,
    ToolCallRecord,
)

__all__ = [
    "BASELINE",
    "CONTROL",
    "ERROR_KINDS",
    "JUDGE_TEMPLATE",
    "MANIFEST_FILE",
    "PAIRWISE_TEMPLATE",
    "PASSING_RATINGS",
    "RATING_VALUES",
    "REPORT_FORMAT",
    "REPORT_VERSION",
    "RESULTS_FILE",
    "TRANSIENT_ERRORS",
    "CallbackProgress",
    "Dataset",
    "DatasetSource",
    "Environment",
    "EnvironmentFactory",
    "ErrorKind",
    "EvalLoop",
    "EvalLoopConfig",
    "EvalReport",
    "EvalRequest",
    "EvalResult",
    "EvalTarget",
    "EvaluateOptions",
    "Evaluator",
    "Experiment",
    "ExperimentComparison",
    "ExperimentFingerprint",
    "Fingerprint",
    "FlakySample",
    "FlippedSample",
    "GroupKey",
    "JudgeOutput",
    "JudgeParams",
    "JudgeRating",
    "Metric",
    "NullProgress",
    "OutcomeComparison",
    "Outcomes",
    "PairwiseJudge",
    "PairwiseJudgment",
    "PairwiseOutput",
    "PairwiseParams",
    "PairwiseVerdict",
    "PairwiseWinner",
    "ProgressSink",
    "RunCounts",
    "RunHandle",
    "RunManifest",
    "RunStatus",
    "RunStore",
    "Sample",
    "SampleOutcome",
    "Score",
    "SessionEvaluator",
    "Summary",
    "ToolCallRecord",
    "Trajectory",
    "TrajectoryScorer",
    "adapt",
    "all_of",
    "all_tools_succeeded",
    "any_of",
    "as_progress",
    "check_environment",
    "classify_error",
    "collect_results",
    "compare_all",
    "compare_outcomes",
    "compare_results",
    "contains",
    "contains_ci",
    "create_environment",
    "dataset_sha256",
    "diff_fingerprints",
    "evaluate",
    "evaluator_name",
    "exact_match",
    "execute_sample",
    "flaky_samples",
    "group_by",
    "inline_evaluator",
    "is_inline_evaluator",
    "is_session_aware",
    "is_trajectory_scorer",
    "iter_jsonl",
    "iter_results",
    "json_equal",
    "latency_under",
    "latest_results",
    "llm_judge",
    "load_jsonl",
    "max_model_requests",
    "new_run_id",
    "not_",
    "numeric_close",
    "pairwise_judge",
    "regex_match",
    "regex_search",
    "render_report",
    "report_to_dict",
    "restore_environment",
    "run_eval",
    "run_evaluator",
    "serialize_environment",
    "session_aware",
    "slice_contains",
    "stats",
    "submit_dataset",
    "submit_experiments",
    "summarize",
    "threshold",
    "token_usage_under",
    "tool_args_match",
    "tool_call_count",
    "tool_called",
    "tool_not_called",
    "tool_sequence",
    "trajectory_scorer",
]
