"""`wink eval run`: run an evaluation (`report` and `compare` are in `_report`).

Exit codes of `wink eval run`: 0 done, 1 a pass rate is below `--fail-under`, 2 a usage
or configuration error (bad TARGET, a dataset error with its file:line, a run that cannot
be resumed), 3 stopped by `--max-cost` (the run is incomplete and saved as interrupted;
`--resume RUN` with a higher `--max-cost` continues it), 130 interrupted (Ctrl-C: the run
is marked interrupted; `--resume RUN` continues it without re-running what was recorded).
`report` and `compare` exit 2 when the run cannot be read.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, cast
from urllib.parse import urlsplit, urlunsplit

import typer

from weakincentives.adapters import CacheableAdapter, CacheStats
from weakincentives.adapters.pricing import load_prices
from weakincentives.errors import ConfigurationError, WinkError
from weakincentives.evals import (
    DEFAULT_FAIL_FAST,
    DEFAULT_VALUE_LIMIT,
    EvalReport,
    RunStore,
    new_run_id,
)
from weakincentives.runtime import AgentLoop

from ._console import (
    EXIT_BELOW_THRESHOLD,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    error_console,
    fail,
    interrupts_as_keyboard_interrupt,
    print_error,
)
from ._cost import MaxCostOption, PriceFileOption, PriceOption, stop_at_cost_limit
from ._hints import Hints
from ._plan import ModelOptions, RunPlan, build_plan, plan_args
from ._provenance import header_lines, run_info_of
from ._run_options import (
    ExtraFieldsOption,
    FieldOption,
    FormatOption,
    JudgeModelOption,
    LimitOption,
    ModelArgOption,
    ModelOption,
    NoteOption,
    SampleIdOption,
    SeedOption,
    ShuffleOption,
    SplitOption,
    TagOption,
    WhereOption,
    selection_of,
    source_of,
)
from ._targets import (
    BUILTIN_EVALUATORS,
)

# rich (and `._progress`, built on it) is imported by the functions that print, so that
# `wink` and `wink worker` start without it.
if TYPE_CHECKING:
    pass

__all__ = ["register"]

DEFAULT_TIMEOUT = 600.0
"""Seconds per sample when `--timeout` is not given (`--timeout 0`: no limit)."""
DEFAULT_CONCURRENCY = 16
"""Samples in flight when `--concurrency` is not given."""
DEFAULT_REQUEST_DEADLINE = 300.0
"""`--request-deadline`'s default: `contrib.distributed.DEFAULT_REQUEST_DEADLINE` (not
imported from there: that would load redis at start-up; a test keeps the two equal)."""
CACHE_FILE = "response-cache.sqlite"
"""The default response cache, a file in the runs directory."""


def _fail(error: object, code: int = EXIT_USAGE) -> NoReturn:
    fail(error, code)


# -- planning a run ----------------------------------------------------------------------------


def _raise_config(message: str) -> NoReturn:
    """Raise a `ConfigurationError` (a helper that type checkers see never returns)."""
    raise ConfigurationError(message)


def _cache_path(target: Any, runs_dir: Path, no_cache: bool) -> Path | None:
    """The response cache for an `AgentLoop` whose adapter takes one, else None."""
    if no_cache or not isinstance(target, AgentLoop):
        return None
    if not isinstance(target.adapter, CacheableAdapter):
        return None
    runs_dir.mkdir(parents=True, exist_ok=True)
    return runs_dir / CACHE_FILE


# -- wink eval run -------------------------------------------------------------------------------

TargetArg = Annotated[
    str,
    typer.Argument(
        metavar="TARGET",
        help="path.py:object or module:object: an AgentLoop (or factory), a task function, "
        "or a suite (target + evaluator + dataset/types/experiments).",
        show_default=False,
    ),
]


def _run(
    target: TargetArg,
    dataset: Annotated[
        Path | None,
        typer.Option(
            help="Dataset: a .jsonl, .json (array), .csv or .parquet file, or a Hugging Face "
            "dataset (a directory, or --format hf with a name). Rows hold id, input, expected "
            "and metadata unless --field maps them."
        ),
    ] = None,
    fmt: FormatOption = None,
    field: FieldOption = None,
    split: SplitOption = None,
    allow_extra_fields: ExtraFieldsOption = False,
    limit: LimitOption = None,
    sample_id: SampleIdOption = None,
    where: WhereOption = None,
    shuffle: ShuffleOption = False,
    seed: SeedOption = 0,
    model: ModelOption = None,
    model_arg: ModelArgOption = None,
    judge_model: JudgeModelOption = None,
    tag: TagOption = None,
    note: NoteOption = None,
    evaluator: Annotated[
        list[str] | None,
        typer.Option(
            help=f"Evaluator (repeatable): {', '.join(BUILTIN_EVALUATORS)}, or module:object."
        ),
    ] = None,
    experiment: Annotated[
        list[str] | None,
        typer.Option(
            help="Experiment NAME[:TAG][,FLAG=VALUE] (repeatable; replaces a suite's; the "
            "first is the baseline of comparisons)."
        ),
    ] = None,
    epochs: Annotated[int, typer.Option(min=1, help="Runs per sample and experiment.")] = 1,
    concurrency: Annotated[
        int | None,
        typer.Option(min=1, help=f"Samples in flight at once [default: {DEFAULT_CONCURRENCY}]."),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help=f"Seconds per sample, then an error of kind timeout (a stuck agent's thread "
            f"is abandoned) [default: {DEFAULT_TIMEOUT:g}; 0: no limit].",
        ),
    ] = None,
    runs_dir: Annotated[Path, typer.Option(help="Directory of run directories.")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="Id of the new run.")] = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue this run (id or path); done keys are skipped.")
    ] = None,
    retry_errors: Annotated[
        bool, typer.Option("--retry-errors", help="On resume, re-run errored results.")
    ] = False,
    max_errors: Annotated[
        int | None,
        typer.Option(min=1, help="Stop the run once this many results are errors."),
    ] = None,
    fail_fast: Annotated[
        int,
        typer.Option(
            min=0,
            help="Stop the run when its first N results all fail with the same error "
            "(a broken configuration); 0: never.",
        ),
    ] = DEFAULT_FAIL_FAST,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Do not use the response cache.")
    ] = False,
    fail_under: Annotated[
        float | None,
        typer.Option(min=0.0, max=1.0, help="Exit 1 when an experiment's pass rate is lower."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    input_type: Annotated[
        str | None, typer.Option(help="module:Type the dataset inputs are loaded as.")
    ] = None,
    expected_type: Annotated[
        str | None, typer.Option(help="module:Type the expected values are loaded as.")
    ] = None,
    redis: Annotated[
        str | None,
        typer.Option(
            help="Submit to `wink worker`s on this Redis (redis://...) instead of running "
            "locally; results are collected into the run store as they arrive."
        ),
    ] = None,
    requests: Annotated[
        str, typer.Option(help="With --redis: the workers' requests mailbox.")
    ] = "eval-requests",
    namespace: Annotated[str, typer.Option(help="With --redis: key namespace.")] = "wink",
    run_timeout: Annotated[
        float | None, typer.Option(help="With --redis: seconds to wait for every result.")
    ] = None,
    request_deadline: Annotated[
        float,
        typer.Option(
            min=0,
            help="With --redis: seconds a request may go unanswered before the client checks "
            "that it is still queued or held by a worker; one that is neither is sent again, "
            "then recorded as an error of kind 'lost' (0: never).",
        ),
    ] = DEFAULT_REQUEST_DEADLINE,
    bundles: Annotated[
        str | None,
        typer.Option(
            help="Write a debug bundle per sample into RUN/bundles/: 'all', or 'failed' for "
            "the samples that did not pass."
        ),
    ] = None,
    record_inputs: Annotated[
        bool,
        typer.Option(
            "--record-inputs/--no-record-inputs",
            help="Keep each sample's input and expected value on its result.",
        ),
    ] = True,
    value_limit: Annotated[
        int, typer.Option(min=1, help="Characters of input and expected kept per result.")
    ] = DEFAULT_VALUE_LIMIT,
    price: PriceOption = None,
    prices: PriceFileOption = None,
    max_cost: MaxCostOption = None,
) -> None:
    """Run TARGET over a dataset under one or more experiments, and report."""
    if run_id is not None and resume is not None:
        _fail("--run-id names a new run and --resume an existing one; give one of them")
    if bundles not in (None, "all", "failed"):
        _fail(f"--bundles takes 'all' or 'failed', got {bundles!r}")
    if redis is not None:
        _refuse_local_flags(
            evaluator=evaluator, timeout=timeout, concurrency=concurrency,
            max_cost=max_cost, price=price, prices=prices,
        )  # fmt: skip
    try:
        price_table = load_prices(prices, price or ())
        source = source_of(fmt, field or (), split, allow_extra_fields)
        selection = selection_of(limit, sample_id or (), where, shuffle, seed)
    except (WinkError, ValueError) as exc:
        _fail(exc)
    models = ModelOptions(model=model, model_args=tuple(model_arg or ()), judge_model=judge_model)
    the_id = resume or run_id or new_run_id(datetime.now(UTC))
    hints = Hints(
        target=target, dataset=dataset, evaluators=evaluator or (), experiments=experiment or (),
        epochs=epochs, runs_dir=_runs_dir_of(resume, runs_dir), input_type=input_type,
        expected_type=expected_type, distributed=_redis_args(redis, requests, namespace),
        plan_args=plan_args(source, selection, models),
    )  # fmt: skip
    with interrupts_as_keyboard_interrupt() as signals:
        try:
            plan = _plan(
                target, dataset=dataset, evaluators=evaluator or (),
                experiments=experiment or (), input_type=input_type,
                expected_type=expected_type, distributed=redis is not None, source=source,
                selection=selection, models=models,
            )  # fmt: skip
            info = plan.run_info(tags=tag or (), note=note)
        except KeyboardInterrupt:
            _stopped(signals, "before the run started; nothing was recorded")
        from ._progress import LineProgress, progress_for  # rich loads here, not at start

        err = error_console()
        progress = LineProgress(err) if as_json else progress_for(err)
        try:
            if redis is not None:
                report = _run_on_redis(
                    plan, redis_url=redis, requests=requests, namespace=namespace,
                    runs_dir=runs_dir, run_id=the_id, resume=resume, epochs=epochs,
                    timeout=run_timeout, progress=progress, info=info,
                    request_deadline=request_deadline or None,
                )  # fmt: skip
            else:
                from weakincentives.evals import run_eval  # the runner loads anyio's backend

                report = run_eval(
                    plan.dataset, plan.target, plan.evaluator,
                    experiments=plan.experiments, epochs=epochs,
                    max_concurrent=concurrency or DEFAULT_CONCURRENCY,
                    timeout=_sample_timeout(timeout), store=RunStore(runs_dir),
                    run_id=None if resume else the_id, resume=resume, retry_errors=retry_errors,
                    cache=_cache_path(plan.target, runs_dir, no_cache), progress=progress,
                    fail_fast=fail_fast, max_errors=max_errors, dataset_path=dataset,
                    bundles=cast("Literal['all', 'failed'] | None", bundles),
                    record_inputs=record_inputs, value_limit=value_limit,
                    dataset_sha256=plan.dataset_sha256, fingerprint_extra=plan.fingerprint_extra(),
                    run_info=info, prices=price_table, max_cost=max_cost,
                )  # fmt: skip
        except KeyboardInterrupt:
            name = Path(the_id).name
            _stopped(signals, f"run {name} is saved as interrupted", hints.text(name))
        except (WinkError, ValueError) as exc:
            _fail(exc)
    _print_run(report, plan, hints, as_json=as_json)
    stop_at_cost_limit(report, max_cost, Path(the_id).name, error_console())
    _check_complete(report, hints)
    _check_threshold(report, fail_under)


def _plan(target: str, *, distributed: bool, **options: Any) -> RunPlan:
    """`build_plan`, failing with exit 2 on a bad option and exit 3 on an empty dataset."""
    try:
        plan = build_plan(target, needs_evaluator=not distributed, **options)
    except (WinkError, ValueError) as exc:
        _fail(exc)
    if len(plan.dataset) == 0:
        _fail("the dataset holds no samples; nothing to evaluate", EXIT_INCOMPLETE)
    return plan


def _runs_dir_of(resume: str | None, runs_dir: Path) -> Path:
    """Where the run lives: `--runs-dir`, or the parent of a run resumed by its path."""
    if resume is not None and ("/" in resume or "\\" in resume) and Path(resume).is_dir():
        return Path(resume).parent
    return runs_dir


def _redis_args(url: str | None, requests: str, namespace: str) -> tuple[str, ...]:
    """The flags that point a resumed run at the same workers (no password shown)."""
    if url is None:
        return ()
    parts = urlsplit(url)
    if parts.password:
        user = parts.username or ""
        url = urlunsplit(parts._replace(netloc=f"{user}:****@{parts.netloc.rpartition('@')[2]}"))
    args = ["--redis", url]
    if requests != "eval-requests":
        args += ["--requests", requests]
    if namespace != "wink":
        args += ["--namespace", namespace]
    return tuple(args)


def _sample_timeout(timeout: float | None) -> float | None:
    """The per-sample timeout to run with: the default, the given seconds, or none (0)."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    return timeout or None


def _refuse_local_flags(
    *, evaluator: Any, timeout: Any, concurrency: Any, max_cost: Any, price: Any, prices: Any
) -> None:
    """With `--redis`, the workers decide these: refuse them rather than ignore them."""
    priced = "the workers price results with their own table: EvalLoopConfig(prices=...)"
    where = {
        "--evaluator": "the workers score with their WorkerSpec's evaluator",
        "--timeout": "set it on the workers: WorkerSpec(config=EvalLoopConfig(timeout=...))",
        "--concurrency": "give each worker `wink worker --concurrency N`",
        "--max-cost": "a spending limit applies to local runs",
        "--price": priced,
        "--prices": priced,
    }
    flags = {
        "--evaluator": evaluator, "--timeout": timeout, "--concurrency": concurrency,
        "--max-cost": max_cost, "--price": price, "--prices": prices,
    }  # fmt: skip
    given = [flag for flag, value in flags.items() if value is not None and value != []]
    if given:
        reasons = "; ".join(f"{flag}: {where[flag]}" for flag in given)
        _fail(f"{', '.join(given)} cannot be used with --redis ({reasons})")


def _stopped(signals: list[int], what: str, hint: str | None = None) -> NoReturn:
    """Report a Ctrl-C or SIGTERM and exit 130 or 143."""
    from rich.text import Text

    terminated = signal.SIGTERM in signals
    console = error_console()
    label = "terminated" if terminated else "interrupted"
    console.print(Text.assemble((f"{label}:", "yellow"), f" {what}."))
    if hint is not None:
        console.print(hint, markup=False)
    raise typer.Exit(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)


def _check_complete(report: EvalReport, hints: Hints) -> None:
    """Exit 3 when results are missing (a run timeout, lost requests, a fail-fast stop)."""
    reason = report.config.get("stopped")
    if report.complete and reason is None:
        return
    run_id = report.run_id or ""
    queued = report.config.get("queued_requests")
    detail = f": {reason}" if isinstance(reason, str) else ""
    if isinstance(queued, int) and queued:
        detail += (
            f"; {queued} requests still wait in the requests mailbox (is a `wink worker` "
            "serving it?)"
        )
    command = hints.resume_command(run_id)
    if isinstance(reason, str):  # stopped early: its errors are recorded, run them again
        command += " --retry-errors"
    print_error(
        f"the run is incomplete, {report.missing} of {report.expected_count} results "
        f"missing{detail}; finish it with: {command}",
        label="incomplete",
        style="bold yellow",
    )
    raise typer.Exit(EXIT_INCOMPLETE)


def _run_on_redis(
    plan: RunPlan,
    *,
    redis_url: str,
    requests: str,
    namespace: str,
    runs_dir: Path,
    run_id: str,
    resume: str | None,
    epochs: int,
    timeout: float | None,
    progress: Any,
    info: Mapping[str, Any],
    request_deadline: float | None,
) -> EvalReport:
    """Submit the plan to Redis workers and collect the results into the run store."""
    from weakincentives import serde
    from weakincentives.contrib.distributed import run_distributed
    from weakincentives.evals import Fingerprint, RunProvenance
    from weakincentives.evals.store import code_directory, git_commit

    provenance = RunProvenance.collect(
        target=plan.target, evaluator=plan.evaluator, dataset_sha256=plan.dataset_sha256,
        git_commit=git_commit(code_directory(plan.target)),
    )  # fmt: skip
    # The workers run their own WorkerSpec (agent, evaluator, per-sample timeout): the
    # fingerprint names the mailbox they serve, not an evaluator this process would pick.
    fingerprint = Fingerprint.build(
        dataset_sha256=plan.dataset_sha256, experiments=plan.experiments, evaluators=(),
        target=plan.target, epochs=epochs, models=provenance.models(),
        extra={
            **plan.fingerprint_extra(),
            "workers": f"redis:{namespace}/{requests}",
            "evaluator": "the workers'",
        },
    )  # fmt: skip
    store = RunStore(runs_dir)
    if resume is None:
        return run_distributed(
            plan.dataset, plan.experiments, redis_url=redis_url, requests=requests,
            namespace=namespace, run_store=store, fingerprint=fingerprint, run_id=run_id,
            epochs=epochs, timeout=timeout, progress=progress, config=info,
            request_deadline=request_deadline,
            provenance=serde.dump(provenance),
        )  # fmt: skip
    with store.resume(resume, fingerprint) as handle:
        return run_distributed(
            plan.dataset, plan.experiments, redis_url=redis_url, requests=requests,
            namespace=namespace, run_store=handle, fingerprint=fingerprint, epochs=epochs,
            timeout=timeout, progress=progress, config=info, request_deadline=request_deadline,
        )  # fmt: skip


def _print_run(report: EvalReport, plan: RunPlan, hints: Hints, *, as_json: bool) -> None:
    run_id = report.run_id or ""
    baseline = plan.experiments[0].name if len(plan.experiments) > 1 else None
    info = run_info_of(report.config)
    if as_json:
        data = report.to_dict(baseline=baseline)
        data["run_dir"] = str(hints.runs_dir / run_id)
        data["run"] = info
        typer.echo(json.dumps(data, indent=2))
        return
    from rich.console import Console

    console = Console()
    for line in header_lines(info):
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    report.render(console, baseline=baseline)
    cache = report.config.get("cache")
    if isinstance(cache, Mapping):
        console.print(_cache_summary(cache), highlight=False, soft_wrap=True)
    console.print(hints.text(run_id), highlight=False, soft_wrap=True)


def _cache_summary(stats: Mapping[str, int]) -> str:
    """One line on the response cache of a run: hits, misses, writes, or why it was idle."""
    s = CacheStats(**stats)
    if not s.hits + s.misses:
        return (
            "Response cache: no lookups (nothing reached the model, or the model samples: "
            "temperature unset or above 0 is not cached without cache_nondeterministic=True)"
        )
    return (
        f"Response cache: {s.hits} hits, {s.misses} misses ({s.hit_rate:.0%} hit rate), "
        f"{s.writes} stored"
    )


def _check_threshold(report: EvalReport, fail_under: float | None) -> None:
    if fail_under is None:
        return
    below = {
        name: rate for name, rate in report.pass_rate_by_experiment().items() if rate < fail_under
    }
    if below or not report.total:
        listed = ", ".join(f"{name} {rate:.1%}" for name, rate in below.items()) or "no results"
        _fail(f"pass rate below --fail-under {fail_under:.1%}: {listed}", EXIT_BELOW_THRESHOLD)


def register(app: typer.Typer) -> None:
    """Add `run` to `app` (the `wink eval` group)."""
    app.command("run")(_run)
