"""The local runner: `evaluate()` (async, anyio) and `run_eval()` (sync).

`evaluate(dataset, target, evaluator)` runs every `(sample, experiment, epoch)` through
`target` and scores it, `max_concurrent` at a time, and returns an `EvalReport`. It runs
under asyncio and trio alike (`trio.run(functools.partial(evaluate, ...))`); `run_eval` is
the blocking wrapper (and accepts the older draft's `run_eval(loop, dataset, evaluator)`).

**Work and memory.** Work items are produced lazily, sample-major (each sample's
experiments and epochs one after another, so pairs complete together), from one shared
generator that `max_concurrent` worker tasks pull from. Only in-flight samples are in
memory, so a streamed dataset (a generator, `Dataset.stream(path, I, E)`) is run in
O(concurrency) memory besides the results. Of the results, the report keeps what it needs:

- with a run store, each full result (transcript included) is appended to the store as
  it completes, and the report keeps a *slim* copy (see `slim`): scores, metrics, errors,
  latency, usage, metadata and environment, but no transcript, `output`, `request_id`,
  `session_id`, nor the reason of a passed score; read those back with
  `RunStore(root).open(run_id).latest_results()`. About 0.3 KiB per result: 100,000
  results of a plain function stay under 100 MiB of peak RSS, interpreter included;
- without a store, the report keeps the results as recorded (`record_transcript=False`
  keeps them small).

**Threads.** A sync target (an `AgentLoop`, a sync function) runs in worker threads.
Without `environment_factory`, up to `max_concurrent` long-lived threads
(`runtime.WorkerThreads`, started without a handshake) each loop over the shared work,
appending to the run store as they go, and the progress sink gets the new results from
the event loop every `PROGRESS_INTERVAL` seconds. They start narrow (`_slots.SlotPool`):
one thread, its results written in batches, until a call is seen waiting; then all of
them. With environments, each sample is one hop from a worker task, so that it gets its
environment (the factory may be async).

**Store, fingerprint, resume.** With `store=`, the run is created with a `Fingerprint`
(dataset sha256, experiments, evaluator and target names, the models of the target's and
the judges' adapters, epochs, package version, git commit, `fingerprint_extra`) and its
`RunProvenance` in the manifest. `resume=run_id` reopens it: a changed fingerprint is refused
with `FingerprintMismatchError` listing the differences; keys already recorded are skipped
and never executed again (errored ones are re-run with `retry_errors=True`); the report
holds the earlier results read back from the store plus the new ones. A `Dataset` or a
list is hashed up front. A streamed dataset is hashed as it is read, and the hash is
written into the run's manifest when the run completes; to make a streamed run resumable
after an interruption, pass its hash up front (`dataset_sha256=dataset_sha256(path, I, E)`).

**Interruption.** Cancelling `evaluate` (a cancelled task group, Ctrl-C) marks the run
`interrupted` and re-raises; what was appended stays, and `resume=` continues it.

**Timeouts.** `timeout` bounds each sample (agent and scoring): the agent gets a
`Deadline` it may honour, and `anyio.move_on_after` stops waiting for it when it does not
(a worker thread is abandoned; an async target is cancelled). Either way the result is an
error of kind `timeout`, without environment state. Python cannot kill a thread: a
sync agent that never returns keeps running in its thread, abandoned. With a timeout,
sync samples run on threads the interpreter does not wait for at exit (slot threads: a
new one takes the place of one given up; with environments, `runtime.run_abandonable`),
so the run ends and the process exits; the abandoned thread
holds whatever it holds (a socket, a lock) until then. Give agents their own I/O
timeouts too: an abandoned thread still uses a core while it spins.

**Failures.** A sample's failure is its result (see `ErrorKind`), including a
`sys.exit()` or `KeyboardInterrupt` raised by the agent or the evaluator. A run whose
first `fail_fast` results are all errors of the same kind and message stops early
(the configuration is broken: the model server is down, the key is wrong), and so does
one that reaches `max_errors` errors; the report says why in `config["stopped"]`, the
stored run is `interrupted`, and `resume=` continues it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypedDict, Unpack, cast, overload

import anyio

# anyio imports the module of an event loop backend on its first use: under asyncio
# (`run_eval`'s default) that import is most of what a process's first `evaluate` used to
# cost beyond the others (10-20 ms: sockets, streams, TLS wrappers). Every run needs it,
# so it is imported with the runner, where import time is counted, not inside the first
# call (issue 20: cold start). A trio run loads its own backend as before.
import anyio._backends._asyncio

from weakincentives.adapters import CacheStats, ResponseCache, SQLiteResponseCache
from weakincentives.adapters.pricing import ModelPrice, PriceTable, default_prices
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.runtime.agent_loop import AgentLoop
from weakincentives.runtime.bundle import DebugBundleConfig
from weakincentives.runtime.limits import Budget

from .._records import DEFAULT_VALUE_LIMIT, EvalResult, RecordInputs, Score
from ..report import EvalReport
from ..scoring import evaluator_name
from ..store import (
    Fingerprint,
    RunStore,
    code_directory,
    git_commit,
    models_of,
    new_run_id,
)
from ._bundles import BundleOptions, BundleScope
from ._config import EvalConfig, PrepareMessages, limit_samples, with_prepared_messages
from ._environment import EnvironmentFactory
from ._fail_fast import DEFAULT_FAIL_FAST, FailFast
from ._progress import ProgressSink, as_progress
from ._publish import DeferredManifest
from ._scheduler import LocalRun
from ._settings import RunSettings
from ._setup import check_overrides_tags, prepare_scorer
from ._source import UNHASHED_STREAM, DatasetSource, SampleSource
from ._target import TargetOptions, make_target

__all__ = ["DatasetSource", "EvalTarget", "EvaluateOptions", "evaluate", "run_eval"]

EvalTarget = AgentLoop[Any, Any] | Callable[..., Any]
"""An `AgentLoop`, or a task function `fn(input) -> output` (sync or `async def`)."""


@overload
async def evaluate(
    dataset: DatasetSource,
    target: EvalTarget | EvalConfig,
    evaluator: Callable[..., Score],
    prepare_messages: PrepareMessages | None = None,
    **options: Unpack[_Keywords],
) -> EvalReport: ...


@overload
async def evaluate(
    *,
    samples: DatasetSource,
    config: EvalTarget | EvalConfig,
    score_fn: Callable[..., Score],
    prepare_messages: PrepareMessages | None = None,
    **options: Unpack[_Keywords],
) -> EvalReport: ...


async def evaluate(
    dataset: DatasetSource | None = None,
    target: EvalTarget | EvalConfig | None = None,
    evaluator: Callable[..., Score] | None = None,
    prepare_messages: PrepareMessages | None = None,
    *,
    samples: DatasetSource | None = None,
    config: EvalTarget | EvalConfig | None = None,
    score_fn: Callable[..., Score] | None = None,
    experiments: Iterable[Experiment] = (BASELINE,),
    epochs: int = 1,
    max_concurrent: int = 16,
    timeout: float | None = None,
    max_samples: int | None = None,
    budget: Budget | None = None,
    store: RunStore | str | Path | None = None,
    run_id: str | None = None,
    resume: str | None = None,
    retry_errors: bool = False,
    cache: ResponseCache | str | Path | None = None,
    environment_factory: EnvironmentFactory | None = None,
    judge_concurrency: int | None = None,
    progress: ProgressSink | Callable[[EvalResult], object] | None = None,
    record_transcript: bool = True,
    fingerprint_extra: Mapping[str, Any] | None = None,
    dataset_sha256: str | None = None,
    dataset_path: str | Path | None = None,
    record_inputs: bool = True,
    value_limit: int = DEFAULT_VALUE_LIMIT,
    bundles: BundleScope | None = None,
    fail_fast: int = DEFAULT_FAIL_FAST,
    max_errors: int | None = None,
    run_info: Mapping[str, Any] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    prices: PriceTable | None = None,
    max_cost: float | None = None,
) -> EvalReport:
    """Evaluate `target` on every sample of `dataset` and return the report.

    See the module docstring for memory, resume, interruption and timeout behaviour.

    Args:
        dataset: A `Dataset`, a list of `Sample`s, or any iterable of them (streamed).
        target: An `AgentLoop` (run in worker threads), or a task function of the sample
            input: sync (run in worker threads through a `FunctionLoop`) or `async def`
            (awaited on the event loop). A function may take `session=` (the run's
            session) and `env=` (the sample's environment). Or an `EvalConfig`: its
            target, and its values for the options it holds (`max_samples`,
            `max_concurrent`, `epochs`, `timeout`, and `experiment_name` for
            `experiments`).
        evaluator: `(output, expected) -> Score`, a session-aware evaluator
            `(output, expected, session) -> Score`, or a trajectory scorer
            `(trajectory, sample) -> Score` (see `trajectory_scorer`).
        prepare_messages: `prepare_messages(sample) -> messages`: the target receives
            these messages (as a list) instead of the sample's input, and the sample
            that is scored and recorded carries them as its `input`.
        samples: The spec's name for `dataset` (evaluation-abstractions.md's
            `evaluate(samples, config, score_fn)`); pass one of the two.
        config: The spec's name for `target` (usually an `EvalConfig`); pass one.
        score_fn: The spec's name for `evaluator` (usually a trajectory scorer); pass one.
        experiments: Experiments to run each sample under.
        epochs: Runs of each `(sample, experiment)`, numbered 0..epochs-1 (pass@k).
        max_concurrent: Samples in flight at once (worker tasks and worker threads).
        timeout: Seconds per sample (agent and scoring); an error of kind `timeout` after.
        max_samples: Run only the first `max_samples` samples (None: all).
        budget: Token budget per sample (an error of kind `budget` when exceeded).
        store: A `RunStore` or its root directory: results are appended as they complete.
        run_id: Id of the new run (default: a fresh sortable id); without a store, it is
            only stamped on the results.
        resume: Id (or path) of a stored run to continue instead of creating one.
        retry_errors: On resume, run again the keys whose latest result is an error.
        cache: A `ResponseCache` (or a SQLite file path) for the target `AgentLoop`'s
            adapter, which must be a `CacheableAdapter` (`FunctionAdapter` and
            `OpenAIAdapter` are). The loop passed in is not modified: the run uses a copy.
        environment_factory: `factory(sample) -> Environment` (sync or async), one per
            sample; its serialized end state is kept on `EvalResult.environment`.
        judge_concurrency: At most this many evaluator calls at once (LLM judges).
        progress: A `ProgressSink`, or a callback called with each result.
        record_transcript: Keep messages and tool calls on each stored result.
        fingerprint_extra: More values that must not change on resume (model name...).
        dataset_sha256: Content hash of a streamed dataset (`dataset_sha256(path, I, E)`),
            so the run can be resumed after an interruption.
        dataset_path: The file the dataset came from, recorded in the run's provenance.
        record_inputs: Keep each sample's input and expected value on its result
            (False for sensitive data).
        value_limit: Characters of input and expected kept per result; longer values
            are cut and marked (see `RecordInputs`).
        bundles: Write a debug bundle per sample into the run's `bundles/` directory:
            `"all"`, or `"failed"` for the samples that did not pass (needs `store`;
            sync targets and `AgentLoop`s).
        fail_fast: Stop early when the first `fail_fast` results are all errors of the
            same kind and message (a broken configuration); 0: never.
        max_errors: Stop early once this many results are errors (None: no limit).
        run_info: Facts about the run to keep with it (tags, a note, the dataset's source),
            JSON-compatible: written into the manifest's `config` when the run is created
            and into the report's `config`. Not part of the fingerprint.
        clock: Clock for latencies, deadlines and timestamps.
        prices: Prices for each result's `cost` and `judge_cost` (default: the package's
            table, `weakincentives.adapters.pricing.default_prices()`); a model the table
            does not know leaves the cost None (unpriced).
        max_cost: Dollars after which no new sample starts (samples running finish); the
            stored run is then marked interrupted and can be resumed.

    Raises:
        TypeError: both spellings of one argument were given (`dataset` and `samples`,
            `target` and `config`, `evaluator` and `score_fn`), or neither.
        ConfigurationError: the run is configured wrongly (checked before any sample runs).
        FingerprintMismatchError: `resume` names a run whose configuration changed.
        RunStoreError: the run store cannot be created, resumed or written.
        InvalidDatasetError: the dataset holds something other than `Sample`s.
    """
    dataset = _one_of("dataset", dataset, "samples", samples)
    target = _one_of("target", target, "config", config)
    evaluator = _one_of("evaluator", evaluator, "score_fn", score_fn)
    if isinstance(target, EvalConfig):
        config, target = target, target.target
        experiments = config.experiments() or experiments
        epochs, max_concurrent, timeout = config.epochs, config.max_concurrent, config.timeout
        max_samples = config.max_samples if config.max_samples is not None else max_samples
    dataset = with_prepared_messages(limit_samples(dataset, max_samples), prepare_messages)
    settings = RunSettings.build(
        experiments=experiments, epochs=epochs, max_concurrent=max_concurrent,
        timeout=timeout, judge_concurrency=judge_concurrency,
    )  # fmt: skip
    if resume is not None and store is None:
        raise ConfigurationError(f"resume={resume!r} needs store= (the run store to resume in)")
    if resume is not None and run_id is not None and run_id != resume:
        raise ConfigurationError(
            f"run_id={run_id!r} names a new run and resume={resume!r} an existing one; pass one"
        )
    check_overrides_tags(target, settings.experiments)
    bundle_options, run_id = _bundle_options(bundles, store, run_id, resume, clock)
    if max_cost is not None and not (isinstance(max_cost, int | float) and max_cost >= 0):
        raise ConfigurationError(f"max_cost must be a number of dollars >= 0, got {max_cost!r}")
    source = SampleSource(dataset, sha256=dataset_sha256, hashing=store is not None)
    scorer = prepare_scorer(evaluator, judge_concurrency)
    response_cache, owned = _open_cache(cache, clock)
    try:
        inputs = RecordInputs(enabled=record_inputs, limit=value_limit)
        options = TargetOptions(
            scorer,
            timeout,
            budget,
            record_transcript,
            clock,
            inputs,
            bundle_options,
            prices or PriceTable(_PackagePrices(), sources=("package table",)),
        )
        runner = make_target(
            target, options, with_environment=environment_factory is not None, cache=response_cache
        )
        before = response_cache.stats if response_cache is not None else None
        run = LocalRun(
            settings, source, runner, environment_factory, as_progress(progress), clock,
            inputs, FailFast(fail_fast, max_errors), max_cost,
        )  # fmt: skip
        if store is not None:
            run_store = store if isinstance(store, RunStore) else RunStore(store, clock=clock)
            _open_run(
                run, run_store, target, evaluator, runner.identity, fingerprint_extra,
                resume=resume, run_id=run_id, retry_errors=retry_errors, run_info=run_info,
                dataset_path=dataset_path,
            )  # fmt: skip
        else:
            run.run_id = run_id
        await run.execute()
        extra: dict[str, Any] = {
            **(run_info or {}),
            "evaluator": evaluator_name(evaluator),
            "target": runner.identity,
        }
        if len(settings.experiments) == 1:  # the second design's `config["experiment_name"]`
            extra["experiment_name"] = settings.experiments[0].name
        if response_cache is not None and before is not None:
            extra["cache"] = _stats_delta(before, response_cache.stats)
        return run.report(extra)
    finally:
        if owned and isinstance(response_cache, SQLiteResponseCache):
            response_cache.close()


def _open_run(
    run: LocalRun,
    store: RunStore,
    target: object,
    evaluator: object,
    identity: str,
    extra: Mapping[str, Any] | None,
    *,
    resume: str | None,
    run_id: str | None,
    retry_errors: bool,
    run_info: Mapping[str, Any] | None,
    dataset_path: str | Path | None,
) -> None:
    """Resume the stored run, or create it (its fingerprint completed later, see below)."""
    settings, source = run.settings, run.source
    resumed = resume is not None  # then the whole fingerprint now: it must match
    fingerprint = Fingerprint.build(
        dataset_sha256=source.sha256 or UNHASHED_STREAM, experiments=settings.experiments,
        evaluators=[evaluator], target=identity, epochs=settings.epochs, extra=extra,
        models=models_of(target, evaluator) if resumed else None,
        git_commit=git_commit(code_directory(target)) if resumed else None,
    )  # fmt: skip
    if resume is not None:
        run.attach(store, fingerprint, resume, retry_errors)
        return
    # A new run's models, git commit and provenance are looked up as its run.json is
    # written, once the first samples are under way (`DeferredManifest`); what the
    # fingerprint checks (`extra`, the experiments' flags) was checked above.
    manifest = DeferredManifest(
        fingerprint, target=target, evaluator=evaluator, dataset_sha256=source.sha256,
        dataset_path=None if dataset_path is None else str(dataset_path),
    )  # fmt: skip
    run.create(store, run_id, manifest, info=run_info)


def _one_of(name: str, value: Any, alias: str, alias_value: Any) -> Any:
    """The argument given as `name` or as the spec's `alias` (exactly one of them)."""
    if value is not None and alias_value is not None:
        raise TypeError(
            f"evaluate() got both {name}= and {alias}=: {alias} is the spec's name for "
            f"{name}; pass one of them"
        )
    if value is None and alias_value is None:
        raise TypeError(f"evaluate() missing required argument: {name!r} (or {alias!r})")
    return value if value is not None else alias_value


class _Keywords(TypedDict, total=False):
    """`evaluate`'s keyword-only arguments (`EvaluateOptions` without `prepare_messages`)."""

    experiments: Iterable[Experiment]
    epochs: int
    max_concurrent: int
    timeout: float | None
    max_samples: int | None
    budget: Budget | None
    store: RunStore | str | Path | None
    run_id: str | None
    resume: str | None
    retry_errors: bool
    cache: ResponseCache | str | Path | None
    environment_factory: EnvironmentFactory | None
    judge_concurrency: int | None
    progress: ProgressSink | Callable[[EvalResult], object] | None
    record_transcript: bool
    fingerprint_extra: Mapping[str, Any] | None
    dataset_sha256: str | None
    dataset_path: str | Path | None
    record_inputs: bool
    value_limit: int
    bundles: BundleScope | None
    fail_fast: int
    max_errors: int | None
    run_info: Mapping[str, Any] | None
    clock: Clock
    prices: PriceTable | None
    max_cost: float | None


class EvaluateOptions(_Keywords, total=False):
    """The keyword arguments of `evaluate` (and `run_eval`), as a typed dict."""

    prepare_messages: PrepareMessages | None


def run_eval(
    dataset: DatasetSource | EvalTarget,
    target: EvalTarget | DatasetSource,
    evaluator: Callable[..., Score],
    *,
    backend: str = "asyncio",
    **options: Unpack[EvaluateOptions],
) -> EvalReport:
    """Run `evaluate` to completion from synchronous code and return its report.

    Accepts the older draft's order too: `run_eval(loop, dataset, evaluator)`. Options
    are `evaluate`'s keyword arguments (see `EvaluateOptions`).

    Examples:
        >>> from weakincentives.evals import Sample, exact_match
        >>> report = run_eval([Sample(id="a", input="hi", expected="HI")], str.upper,
        ...                   exact_match)
        >>> report.pass_rate
        1.0

    Raises:
        ConfigurationError: called from inside a running event loop (await `evaluate`
            there), or any configuration error of `evaluate`.
    """
    if _is_target(dataset) and not _is_target(target):
        dataset, target = target, dataset
    try:
        anyio.get_current_task()
    except RuntimeError:
        pass  # no event loop in this thread: the normal case
    else:
        raise ConfigurationError(
            "run_eval() blocks, so it cannot run inside an event loop; use "
            "`await evaluate(...)` there"
        )
    data, fn = cast(DatasetSource, dataset), cast(EvalTarget, target)
    reports: list[EvalReport] = []

    async def main() -> None:
        # Handed out through a list, not as the task's result: Python 3.11's asyncio
        # runner formats the main task (result included) when it restores the SIGINT
        # handler, and the repr of a 100k-result report is hundreds of megabytes.
        reports.append(await evaluate(data, fn, evaluator, **options))

    anyio.run(main, backend=backend)
    return reports[0]


def _is_target(value: object) -> bool:
    return isinstance(value, AgentLoop) or (callable(value) and not isinstance(value, Iterable))


def _bundle_options(
    scope: BundleScope | None,
    store: RunStore | str | Path | None,
    run_id: str | None,
    resume: str | None,
    clock: Clock,
) -> tuple[BundleOptions | None, str | None]:
    """Where the run's bundles go (its directory's `bundles/`), and the run id, now fixed."""
    if scope is None:
        return None, run_id
    if scope not in ("all", "failed"):
        raise ConfigurationError(f"bundles must be 'all', 'failed' or None, got {scope!r}")
    if store is None:
        raise ConfigurationError("bundles= needs store= (bundles go into the run's directory)")
    root = store.root if isinstance(store, RunStore) else Path(store)
    if resume is None and run_id is None:
        run_id = new_run_id(clock.now())
    run_dir = root / (resume or cast(str, run_id))
    if resume is not None and Path(resume).is_dir():
        run_dir = Path(resume)
    return BundleOptions(DebugBundleConfig(directory=run_dir / "bundles"), scope), run_id


class _PackagePrices(Mapping[str, ModelPrice]):
    """The package's prices (`default_prices()`), read when a cost is first looked up.

    A run of a plain function never prices anything, and a model's first result comes
    after its first call: reading the table (a third of a millisecond in a fresh process)
    then waits for the samples, or never happens.
    """

    def __init__(self) -> None:
        self._prices: Mapping[str, ModelPrice] | None = None

    def _table(self) -> Mapping[str, ModelPrice]:
        prices = self._prices
        if prices is None:
            prices = self._prices = default_prices().prices
        return prices

    def __getitem__(self, model: str) -> ModelPrice:
        return self._table()[model]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


def _open_cache(
    cache: ResponseCache | str | Path | None, clock: Clock
) -> tuple[ResponseCache | None, bool]:
    if cache is None:
        return None, False
    if isinstance(cache, str | Path):
        return SQLiteResponseCache(cache, clock=clock), True
    return cache, False


def _stats_delta(before: CacheStats, after: CacheStats) -> dict[str, int]:
    return {
        "hits": after.hits - before.hits,
        "misses": after.misses - before.misses,
        "writes": after.writes - before.writes,
    }
