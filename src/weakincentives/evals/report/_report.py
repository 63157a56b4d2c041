"""`EvalReport`: the results of a run and everything computed from them.

Counting rules (DESIGN.md section 3): `pass_rate = passed / total`, where an errored
result counts as not passed; `mean_score` counts an errored result as 0. The
`*_excluding_errors` variants and `error_rate` are reported beside them, so a run that
errors a lot cannot look better than one that fails honestly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weakincentives.errors import ConfigurationError

from .. import stats
from .._records import EvalResult
from ..store import StoredResults
from ._analysis import (
    FlakySample,
    GroupKey,
    Summary,
    flaky_samples,
    group_by,
    mean_pass_at_k,
    summarize,
    summary_of_totals,
)
from ._checks import CheckRate
from ._compact import CompactView, fewest_attempts, metadata_keys, stored_slices
from ._cost import CostDelta, CostSummary, cost_delta
from ._persistence import StrPath, read_report, read_run_id, write_report
from ._totals import TotalsByExperiment

if TYPE_CHECKING:
    from rich.console import Console

    from ._comparison import ExperimentComparison

# Comparisons, export and rendering are imported by the methods that use them: a run
# builds its report without them (import time, issue 20).

__all__ = ["EvalReport"]


# Not slotted, so `cached_property` can cache derived values on the frozen instance.
# repr=False: the generated repr prints every result (asyncio.run formats a returned
# report on exit, which cost tens of MB at 30k results); ours is one line.
@dataclass(frozen=True, repr=False)
class EvalReport:
    """Results of an evaluation run, with rates, intervals, comparisons and I/O.

    Examples:
        >>> from weakincentives.evals import EvalResult, Score
        >>> ok = Score(value=1.0, passed=True)
        >>> report = EvalReport(results=(
        ...     EvalResult(sample_id="a", experiment_name="x", score=ok, latency_ms=10.0),
        ...     EvalResult(sample_id="b", experiment_name="x", score=Score(value=0.0, passed=False),
        ...                latency_ms=30.0, error="boom", error_kind="agent"),
        ... ))
        >>> report.pass_rate, report.pass_rate_excluding_errors, report.errors_by_kind()
        (0.5, 1.0, {'agent': 1})
    """

    results: Sequence[EvalResult] = ()
    """Every result, in arrival order (any iterable is stored as a tuple). The report of a
    run with a store holds a `StoredResults` instead: the same results, read back from the
    run's `results.jsonl` when first asked for (`len` reads nothing)."""
    _: KW_ONLY
    expected_count: int | None = None
    """How many results the run should produce (samples x experiments x epochs), if known."""
    run_id: str | None = None
    """Id of the run the results belong to."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """The run's configuration, kept for reproducibility (JSON-compatible)."""

    def __post_init__(self) -> None:
        if not isinstance(self.results, tuple | StoredResults):
            object.__setattr__(self, "results", tuple(self.results))

    def __repr__(self) -> str:
        return (
            f"EvalReport(run_id={self.run_id!r}, results={len(self.results)}, "
            f"expected_count={self.expected_count!r})"
        )

    # -- counts ---------------------------------------------------------------------

    @property
    def total(self) -> int:
        """Number of results (errors included)."""
        return len(self.results)

    @property
    def total_samples(self) -> int:
        """Same as `total` (the guide's name)."""
        return self.total

    @cached_property
    def _compact(self) -> CompactView | None:
        """A stored run's totals and compact columns (`StoredResults.compact`), or None."""
        return CompactView.read(self.results, slice_key=self.__dict__.get("_first_slice"))

    @cached_property
    def _totals(self) -> TotalsByExperiment:
        # One pass; a run store's results are streamed, not kept (`StoredResults.streamed`).
        if (compact := self._compact) is not None:
            return compact.totals
        if isinstance(results := self.results, StoredResults) and results.streamed:
            return TotalsByExperiment.of(results.stream())
        return TotalsByExperiment.of(results)

    @cached_property
    def _repeats(self) -> bool:
        """Whether some sample has more than one result in an experiment (epochs)."""
        results = self.results
        if (compact := self._compact) is not None:
            return compact.repeats()
        if isinstance(results, StoredResults) and results.unique_keys:
            # Each (sample, experiment, epoch) once: a sample repeats only across epochs.
            return len(self._totals.epochs) > 1
        return len({(r.experiment_name, r.sample_id) for r in results}) < len(results)

    @property
    def passed_count(self) -> int:
        """Results that passed (an errored result never passes)."""
        return self._totals.overall.passed

    @property
    def failed_count(self) -> int:
        """Results that did not pass, errors included."""
        return self.total - self.passed_count

    @property
    def error_count(self) -> int:
        """Results that ended in an error."""
        return self._totals.overall.errors

    @property
    def successful(self) -> int:
        """Results that completed without an error (passed or not)."""
        return self.total - self.error_count

    @cached_property
    def distinct_count(self) -> int:
        """Distinct `(sample_id, experiment_name, epoch)` keys; duplicates count once."""
        results = self.results
        if isinstance(results, StoredResults) and results.unique_keys:
            return len(results)
        return len({r.key for r in results})

    @property
    def missing(self) -> int:
        """Results still expected (`expected_count - distinct_count`); 0 when unknown."""
        if self.expected_count is None:
            return 0
        return max(0, self.expected_count - self.distinct_count)

    @property
    def complete(self) -> bool:
        """Whether every expected result is present (True when `expected_count` is None)."""
        return self.missing == 0

    # -- rates and means ------------------------------------------------------------

    @property
    def pass_rate(self) -> float:
        """`passed / total`: errors count as not passed (0.0 for an empty report)."""
        return self.passed_count / self.total if self.total else 0.0

    @property
    def error_rate(self) -> float:
        """`errors / total` (0.0 for an empty report)."""
        return self.error_count / self.total if self.total else 0.0

    @property
    def pass_rate_excluding_errors(self) -> float:
        """`passed / successful`: the pass rate among results that were scored."""
        return self.passed_count / self.successful if self.successful else 0.0

    @property
    def mean_score(self) -> float:
        """Mean `score.value`, errors counted as 0 (0.0 for an empty report)."""
        return self._totals.overall.mean_score

    @property
    def mean_score_excluding_errors(self) -> float:
        """Mean `score.value` over results without an error."""
        return self._totals.overall.mean_score_excluding_errors

    @property
    def mean_latency_ms(self) -> float:
        """Mean latency over all results, errors included (0.0 when empty)."""
        return self._totals.overall.mean_latency_ms

    @property
    def latency_p50_ms(self) -> float:
        """Median latency (linear interpolation, as `numpy.percentile`)."""
        return self._totals.overall.latency_percentile(50)

    @property
    def latency_p95_ms(self) -> float:
        """95th percentile latency (linear interpolation, as `numpy.percentile`)."""
        return self._totals.overall.latency_percentile(95)

    @property
    def total_input_tokens(self) -> int:
        """Input tokens over all results (errored results used tokens too)."""
        return self._totals.overall.input_tokens

    @property
    def total_output_tokens(self) -> int:
        """Output tokens over all results."""
        return self._totals.overall.output_tokens

    def cost_summary(self) -> CostSummary:
        """What the results cost (`cost_summary` of the results)."""
        return self._totals.overall.cost()

    def check_rates(self) -> dict[str, CheckRate]:
        """Per-check rates of the results (`check_rates` of the results)."""
        return self._totals.overall.checks()

    @property
    def has_repeats(self) -> bool:
        """Whether some sample has more than one result in an experiment (epochs)."""
        return self._repeats

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens over all results."""
        return self.total_input_tokens + self.total_output_tokens

    @cached_property
    def _summary(self) -> Summary:
        return self.summarize()

    @property
    def summary(self) -> dict[str, Any]:
        """All results summarized as a dict: `report.summary["mean"]`, `["n"]`, ... (a copy)."""
        return self._summary.to_dict()

    def summarize(self, *, confidence: float = 0.95, cluster: GroupKey | None = None) -> Summary:
        """Summarize all results (see `weakincentives.evals.summarize` for clustering)."""
        if cluster is None and not self._repeats:
            return summary_of_totals(self._totals.overall, confidence=confidence)
        if cluster is None and (compact := self._compact) is not None:
            return compact.summary(confidence=confidence)
        return summarize(self.results, confidence=confidence, cluster=cluster)

    def pass_rate_ci(
        self, *, confidence: float = 0.95, cluster: GroupKey | None = None
    ) -> stats.Interval:
        """Interval of `pass_rate`: Wilson, or cluster-robust with `cluster` or epochs."""
        return self.summarize(confidence=confidence, cluster=cluster).pass_rate_ci

    def mean_score_ci(
        self, *, confidence: float = 0.95, cluster: GroupKey | None = None
    ) -> stats.Interval:
        """Interval of `mean_score`: CLT, or cluster-robust with `cluster` or epochs."""
        return self.summarize(confidence=confidence, cluster=cluster).mean_ci

    # -- selections -----------------------------------------------------------------

    def passed_samples(self) -> tuple[EvalResult, ...]:
        """Results that passed."""
        return tuple(r for r in self.results if r.passed)

    def failed_samples(self) -> tuple[EvalResult, ...]:
        """Results that did not pass, errors included."""
        return tuple(r for r in self.results if not r.passed)

    def errors(self) -> tuple[EvalResult, ...]:
        """Results that ended in an error."""
        return tuple(r for r in self.results if r.is_error)

    def errors_by_kind(self) -> dict[str, int]:
        """Count of errored results per `error_kind` (`"unknown"` when it was not set)."""
        return dict(self._totals.overall.errors_by_kind)

    def filter(self, predicate: Callable[[EvalResult], bool]) -> EvalReport:
        """Return a report of the results for which `predicate` is true."""
        return self._derived(r for r in self.results if predicate(r))

    def deduplicated(self) -> EvalReport:
        """Keep one result per `(sample_id, experiment_name, epoch)`: the last one."""
        latest = {r.key: r for r in self.results}
        return EvalReport(
            results=tuple(latest.values()),
            expected_count=self.expected_count,
            run_id=self.run_id,
            config=self.config,
        )

    # -- experiments ----------------------------------------------------------------

    @cached_property
    def _by_experiment(self) -> dict[str, tuple[EvalResult, ...]]:
        return group_by(self.results, lambda r: r.experiment_name)

    @property
    def experiment_names(self) -> tuple[str, ...]:
        """Experiment names in order of first appearance."""
        return tuple(self._totals.by_experiment)

    def by_experiment(self) -> dict[str, tuple[EvalResult, ...]]:
        """Results grouped by experiment name, in order of first appearance."""
        return dict(self._by_experiment)

    def experiment(self, name: str) -> EvalReport:
        """The report of one experiment's results.

        Raises:
            ConfigurationError: no result has that experiment name.
        """
        part = self._experiments.get(name)
        if part is None:
            if name not in self._totals.by_experiment:
                self._results_of(name)  # raises, naming the experiments there are
            compact = self._compact
            if len(self._totals.by_experiment) == 1:
                # Every result is this experiment's: the same results (not read again).
                part = EvalReport(results=self.results, run_id=self.run_id, config=self.config)
            elif compact is not None:  # numbers from the columns, results read if asked for
                stored = compact.part_results(name)
                part = EvalReport(results=stored, run_id=self.run_id, config=self.config)
            else:
                part = self._derived(self._results_of(name))
            if compact is not None:
                object.__setattr__(part, "_compact", compact.scoped(name))
            # Its totals were counted in this report's pass.
            object.__setattr__(part, "_totals", self._totals.part(name))
            self._experiments[name] = part
        return part

    @cached_property
    def _experiments(self) -> dict[str, EvalReport]:
        """The reports `experiment(name)` made, made once each."""
        return {}

    def pass_rate_by_experiment(self) -> dict[str, float]:
        """Pass rate (errors count as not passed) per experiment."""
        return {name: self.experiment(name).pass_rate for name in self.experiment_names}

    def mean_score_by_experiment(self) -> dict[str, float]:
        """Mean score (errors count 0) per experiment."""
        return {name: self.experiment(name).mean_score for name in self.experiment_names}

    def pass_rate_ci_by_experiment(
        self, *, confidence: float = 0.95, cluster: GroupKey | None = None
    ) -> dict[str, stats.Interval]:
        """Pass-rate interval per experiment (see `pass_rate_ci`)."""
        return {
            name: self.experiment(name).pass_rate_ci(confidence=confidence, cluster=cluster)
            for name in self.experiment_names
        }

    def summary_by_experiment(
        self, *, confidence: float = 0.95, cluster: GroupKey | None = None
    ) -> dict[str, Summary]:
        """`summarize` per experiment."""
        return {
            name: self.experiment(name).summarize(confidence=confidence, cluster=cluster)
            for name in self.experiment_names
        }

    def compare_experiments(
        self,
        baseline: str,
        treatment: str,
        *,
        confidence: float = 0.95,
        bootstrap_resamples: int = 2000,
        seed: int = 0,
    ) -> ExperimentComparison:
        """Compare `treatment` with `baseline`, paired by `(sample_id, epoch)`.

        Raises:
            ConfigurationError: a name has no results, or both names are the same.
        """
        if baseline == treatment:
            raise ConfigurationError(f"cannot compare experiment {baseline!r} with itself")
        if (compact := self._compact) is not None and compact.scope is None:
            self._check_experiment(baseline, treatment)
            return compact.compare(baseline, treatment, confidence, bootstrap_resamples, seed)
        from ._comparison import compare_results

        return compare_results(
            self._results_of(baseline),
            self._results_of(treatment),
            baseline_name=baseline,
            treatment_name=treatment,
            confidence=confidence,
            bootstrap_resamples=bootstrap_resamples,
            seed=seed,
        )

    def compare_all(
        self,
        baseline: str,
        *,
        confidence: float = 0.95,
        bootstrap_resamples: int = 2000,
        seed: int = 0,
    ) -> Mapping[str, ExperimentComparison]:
        """Compare every other experiment with `baseline`, with Holm and BH p-values."""
        from ._family import compare_all

        return compare_all(
            self,
            baseline,
            confidence=confidence,
            bootstrap_resamples=bootstrap_resamples,
            seed=seed,
        )

    # -- epochs ---------------------------------------------------------------------

    @property
    def epochs(self) -> int:
        """Number of distinct epochs in the results (0 when empty)."""
        return len(self._totals.epochs)

    def pass_at_k(self, k: int, *, experiment: str | None = None) -> float:
        """Mean pass@k over samples: at least one of k attempts passes.

        Raises:
            InvalidStatisticError: a sample has fewer than `k` attempts.
        """
        if (compact := self._scoped_compact(experiment)) is not None:
            return compact.pass_at_k(k, all_pass=False)
        return mean_pass_at_k(self._scope(experiment), k)

    def pass_hat_k(self, k: int, *, experiment: str | None = None) -> float:
        """Mean pass^k over samples: all of k attempts pass.

        Raises:
            InvalidStatisticError: a sample has fewer than `k` attempts.
        """
        if (compact := self._scoped_compact(experiment)) is not None:
            return compact.pass_at_k(k, all_pass=True)
        return mean_pass_at_k(self._scope(experiment), k, all_pass=True)

    def pass_at_k_by_experiment(self, k: int) -> dict[str, float]:
        """pass@k per experiment."""
        return {name: self.pass_at_k(k, experiment=name) for name in self.experiment_names}

    def pass_hat_k_by_experiment(self, k: int) -> dict[str, float]:
        """pass^k per experiment."""
        return {name: self.pass_hat_k(k, experiment=name) for name in self.experiment_names}

    def flaky_samples(self, *, experiment: str | None = None) -> tuple[FlakySample, ...]:
        """Samples that passed in some epochs and failed in others."""
        if not self._repeats:
            return ()
        if (compact := self._scoped_compact(experiment)) is not None:
            return compact.flaky_samples()
        return flaky_samples(self._scope(experiment))

    def fewest_attempts(self) -> int:
        """The fewest results any sample of any experiment has (1 when there are none)."""
        compact = self._compact
        return fewest_attempts(self.results) if compact is None else compact.fewest_attempts()

    def cost_delta(self, baseline: str, treatment: str) -> CostDelta | None:
        """The paired cost difference of two experiments (None when no pair is priced)."""
        if (compact := self._compact) is not None and compact.scope is None:
            self._check_experiment(baseline, treatment)
            return compact.cost_delta(baseline, treatment)
        return cost_delta(self.experiment(baseline).results, self.experiment(treatment).results)

    # -- slicing --------------------------------------------------------------------

    def group_by(self, key: GroupKey) -> dict[Hashable, EvalReport]:
        """Split into one report per metadata value (or key function value)."""
        return {k: self._derived(v) for k, v in group_by(self.results, key).items()}

    def slice_by(
        self, key: GroupKey, *, confidence: float = 0.95, cluster: GroupKey | None = None
    ) -> dict[Hashable, Summary]:
        """`summarize` each group of `group_by(key)`, e.g. `report.slice_by("difficulty")`.

        A stored run's report counts per value as its file streams (no result held).
        """
        self.__dict__.setdefault("_first_slice", key)
        found = stored_slices(self.results, self._compact, key, confidence, cluster)
        return found if found is not None else {
            k: summarize(v, confidence=confidence, cluster=cluster)
            for k, v in group_by(self.results, key).items()
        }  # fmt: skip

    def metadata_keys(self) -> set[str]:
        """Every metadata key some result has (a stored run's file is read once more)."""
        return metadata_keys(self.results, self._compact)

    # -- output ---------------------------------------------------------------------

    def save(self, path: StrPath) -> Path:
        """Write the report as versioned JSONL; returns the file written.

        The first line is a header (format, version, run id, expected count, config),
        then one `EvalResult` per line. A directory `path` gets `report.jsonl` inside.
        """
        return write_report(
            path,
            self.results,
            run_id=self.run_id,
            expected_count=self.expected_count,
            config=self.config,
        )

    @classmethod
    def load(
        cls, path: StrPath, *, slim: bool = False, experiment_prefix: str = "", hold: bool = False
    ) -> EvalReport:
        """Read a report saved by `save`, a bare results JSONL, or a run directory.

        A run directory holds `results.jsonl` (one `EvalResult` per line; when a key
        appears twice the last line wins) and optionally `run.json` (its `run_id` and
        `counts.expected` or `expected_count` are used; the whole manifest becomes
        `config`). A last line cut short by a crash (no newline, unparseable) is skipped.

        With `slim=True` each result keeps only what the report's statistics, tables and
        charts use (sample id, experiment, epoch, score with its metrics, error and its
        kind, latency, usage, metadata, costs), and the rest of each line (transcript,
        output, input, expected, environment, ids) is skipped without being validated:
        the same numbers, read several times faster, in a fraction of the memory. This
        is what `wink eval report` and `wink eval compare` read. A slim read of a run
        directory in which each key occurs once holds none of its results (unless
        `hold`): a `StoredResults` over the run's file, streamed for the tables (and a
        compact form of each kept for comparisons and epochs, `report._columns`), read
        back when asked for (keep the directory while the report is in use).

        `experiment_prefix` is put before each result's experiment name as it is read:
        `wink eval compare RUN_A RUN_B` reads the experiments of each run as `RUN/NAME`
        so, rather than copying every result to rename it.

        Raises:
            InvalidReportError: unknown format version, or a corrupt line (file:line).
        """
        loaded = read_report(path, slim=slim, experiment_prefix=experiment_prefix, hold=hold)
        return cls(
            results=loaded.results,
            expected_count=loaded.expected_count,
            run_id=loaded.run_id,
            config=loaded.config,
        )

    @staticmethod
    def read_run_id(path: StrPath) -> Any:
        """The `run_id` that `load(path)` gives, read from the manifest or header alone.

        None when there is none, or when `path` cannot be read (`load` says why).
        """
        return read_run_id(path)

    def to_dict(self, *, baseline: str | None = None) -> dict[str, Any]:
        """The report's statistics as JSON-compatible data (see `report_to_dict`)."""
        from ._export import report_to_dict

        return report_to_dict(self, baseline=baseline)

    def to_json(self, *, baseline: str | None = None, indent: int | None = 2) -> str:
        """`to_dict` as JSON text."""
        return json.dumps(self.to_dict(baseline=baseline), indent=indent, ensure_ascii=False)

    def render(self, console: Console | None = None, *, baseline: str | None = None) -> None:
        """Print the report as rich tables (see `render_report`)."""
        from ._render import render_report

        render_report(self, console, baseline=baseline)

    # -- helpers --------------------------------------------------------------------

    def _derived(self, results: Iterable[EvalResult]) -> EvalReport:
        return EvalReport(results=tuple(results), run_id=self.run_id, config=self.config)

    def _results_of(self, name: str) -> tuple[EvalResult, ...]:
        self._check_experiment(name)
        return self._by_experiment[name]

    def _check_experiment(self, *names: str) -> None:
        for name in names:
            if name not in self._totals.by_experiment:
                known = ", ".join(repr(n) for n in self.experiment_names) or "none"
                raise ConfigurationError(
                    f"no results for experiment {name!r}; experiments in the report: {known}"
                )

    def _scoped_compact(self, experiment: str | None) -> CompactView | None:
        if experiment is not None and self._compact is not None:
            self._check_experiment(experiment)
        return None if self._compact is None else self._compact.of(experiment)

    def _scope(self, experiment: str | None) -> Sequence[EvalResult]:
        return self.results if experiment is None else self._results_of(experiment)
