"""`wink eval run|report|compare`: run an evaluation, read a run, compare two experiments.

Exit codes of `wink eval run`: 0 done, 1 a pass rate is below `--fail-under`, 2 a usage
or configuration error (bad TARGET, a dataset error with its file:line, a run that cannot
be resumed), 130 interrupted (Ctrl-C: the run is marked interrupted; `--resume RUN`
continues it without re-running what was recorded). `report` and `compare` exit 2 when
the run cannot be read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, cast

import typer

from weakincentives.adapters import CacheableAdapter, CacheStats
from weakincentives.errors import ConfigurationError, WinkError
from weakincentives.evals import (
    DEFAULT_VALUE_LIMIT,
    EvalReport,
    RunStore,
    new_run_id,
    run_eval,
)
from weakincentives.runtime import AgentLoop

from ._hints import Hints
from ._list import register_list
from ._pairing import across, experiments_in_order, within
from ._plan import (
    ModelOptions,
    RunPlan,
    build_plan,
    header_lines,
    plan_args,
    run_info_of,
)
from ._provenance import provenance_lines, run_provenance
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
from ._targets import BUILTIN_EVALUATORS

# rich (and `._progress`, built on it) is imported by the functions that print, so that
# `wink` and `wink worker` start without it.
if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["register"]

EXIT_BELOW_THRESHOLD = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
CACHE_FILE = "response-cache.sqlite"
"""The default response cache, a file in the runs directory."""


def _fail(error: object, code: int = EXIT_USAGE) -> NoReturn:
    from rich.console import Console

    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {error}", highlight=False)
    raise typer.Exit(code)


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
    concurrency: Annotated[int, typer.Option(min=1, help="Samples in flight at once.")] = 16,
    timeout: Annotated[float | None, typer.Option(help="Seconds per sample.")] = None,
    runs_dir: Annotated[Path, typer.Option(help="Directory of run directories.")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="Id of the new run.")] = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue this run (id or path); done keys are skipped.")
    ] = None,
    retry_errors: Annotated[
        bool, typer.Option("--retry-errors", help="On resume, re-run errored results.")
    ] = False,
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
) -> None:
    """Run TARGET over a dataset under one or more experiments, and report."""
    from rich.console import Console

    from ._progress import progress_for

    if run_id is not None and resume is not None:
        _fail("--run-id names a new run and --resume an existing one; give one of them")
    if bundles not in (None, "all", "failed"):
        _fail(f"--bundles takes 'all' or 'failed', got {bundles!r}")
    try:
        source = source_of(fmt, field or (), split, allow_extra_fields)
        selection = selection_of(limit, sample_id or (), where, shuffle, seed)
        models = ModelOptions(
            model=model, model_args=tuple(model_arg or ()), judge_model=judge_model
        )
        plan = build_plan(
            target, dataset=dataset, evaluators=evaluator or (), experiments=experiment or (),
            input_type=input_type, expected_type=expected_type, source=source,
            selection=selection, models=models,
        )  # fmt: skip
        info = plan.run_info(tags=tag or (), note=note)
    except (WinkError, ValueError) as exc:
        _fail(exc)
    the_id = resume or run_id or new_run_id(datetime.now(UTC))
    hints = Hints(
        target=target, dataset=dataset, evaluators=evaluator or (), experiments=experiment or (),
        epochs=epochs, runs_dir=runs_dir, input_type=input_type, expected_type=expected_type,
        plan_args=plan_args(source, selection, models),
    )  # fmt: skip
    err = Console(stderr=True, soft_wrap=True)
    try:
        if redis is not None:
            report = _run_on_redis(
                plan, redis_url=redis, requests=requests, namespace=namespace,
                runs_dir=runs_dir, run_id=the_id, resume=resume, epochs=epochs,
                timeout=run_timeout, progress=None if as_json else progress_for(err), info=info,
            )  # fmt: skip
            _print_run(report, plan, hints, as_json=as_json)
            _check_threshold(report, fail_under)
            return
        report = run_eval(
            plan.dataset, plan.target, plan.evaluator,
            experiments=plan.experiments, epochs=epochs, max_concurrent=concurrency,
            timeout=timeout, store=RunStore(runs_dir),
            run_id=None if resume else the_id, resume=resume, retry_errors=retry_errors,
            cache=_cache_path(plan.target, runs_dir, no_cache),
            progress=None if as_json else progress_for(err), dataset_path=dataset,
            bundles=cast("Literal['all', 'failed'] | None", bundles),
            record_inputs=record_inputs, value_limit=value_limit,
            dataset_sha256=plan.dataset_sha256, fingerprint_extra=plan.fingerprint_extra(),
            run_info=info,
        )  # fmt: skip
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted:[/] run {Path(the_id).name} is saved as interrupted.")
        err.print(hints.text(Path(the_id).name), highlight=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except (WinkError, ValueError) as exc:
        _fail(exc)
    _print_run(report, plan, hints, as_json=as_json)
    _check_threshold(report, fail_under)


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
) -> EvalReport:
    """Submit the plan to Redis workers and collect the results into the run store."""
    from weakincentives.contrib.distributed import run_distributed
    from weakincentives.evals import Fingerprint, RunProvenance

    provenance = RunProvenance.collect(
        target=plan.target, evaluator=plan.evaluator, dataset_sha256=plan.dataset_sha256
    )
    fingerprint = Fingerprint.build(
        dataset_sha256=plan.dataset_sha256, experiments=plan.experiments,
        evaluators=[plan.evaluator], target=plan.target, epochs=epochs,
        models=provenance.models(), extra=plan.fingerprint_extra(),
    )  # fmt: skip
    store = RunStore(runs_dir)
    if resume is None:
        return run_distributed(
            plan.dataset, plan.experiments, redis_url=redis_url, requests=requests,
            namespace=namespace, run_store=store, fingerprint=fingerprint, run_id=run_id,
            epochs=epochs, timeout=timeout, progress=progress, config=info,
        )  # fmt: skip
    with store.resume(resume, fingerprint) as handle:
        return run_distributed(
            plan.dataset, plan.experiments, redis_url=redis_url, requests=requests,
            namespace=namespace, run_store=handle, fingerprint=fingerprint, epochs=epochs,
            timeout=timeout, progress=progress, config=info,
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


# -- wink eval report / compare -------------------------------------------------------------------


def _first_experiment(loaded: EvalReport) -> str | None:
    """The run's first experiment as configured (results arrive in any order), if known."""
    names = experiments_in_order(loaded)
    return names[0] if names else None


def _load(run: str, runs_dir: Path) -> EvalReport:
    """A report from a run id (under `runs_dir`), a run directory or a saved report file."""
    try:
        path = Path(run)
        if not path.exists():
            path = RunStore(runs_dir).open(run).path
        return EvalReport.load(path)
    except (WinkError, ValueError, OSError) as exc:
        _fail(exc)


RunArg = Annotated[
    str,
    typer.Argument(metavar="RUN", help="Run id (under --runs-dir), run directory or report file."),
]
RunsDirOption = Annotated[Path, typer.Option(help="Directory of run directories.")]


def _report(
    run: RunArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    html: Annotated[Path | None, typer.Option(help="Also write an HTML report here.")] = None,
    slice_key: Annotated[
        str | None, typer.Option("--slice", help="Metadata key to break results down by.")
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="Experiment to compare against (default: the run's first).")
    ] = None,
    runs_dir: RunsDirOption = Path("runs"),
) -> None:
    """Print the report of a run (rates with intervals, comparisons, slices)."""
    from rich.console import Console

    loaded = _load(run, runs_dir)
    provenance = run_provenance(run, runs_dir)
    if baseline is None and len(loaded.experiment_names) > 1:
        baseline = _first_experiment(loaded)
    info = run_info_of(loaded.config)
    try:
        if slice_key is not None:
            _check_slice_key(loaded, slice_key)
        if html is not None:
            from weakincentives.debug import write_html_report

            write_html_report(loaded, html, baseline=baseline, slice_key=slice_key)
        if as_json:
            data = {**loaded.to_dict(baseline=baseline), "provenance": provenance}
            data["run"] = info
            if slice_key is not None:
                data["slices"] = _slices_json(loaded, slice_key)
            typer.echo(json.dumps(data, indent=2))
        else:
            console = Console()
            for line in provenance_lines(provenance) if provenance else ():
                console.print(line, highlight=False, markup=False)
            for line in header_lines(info):
                console.print(line, highlight=False, soft_wrap=True, markup=False)
            loaded.render(console, baseline=baseline)
            if slice_key is not None:
                console.print(_slice_table(loaded, slice_key))
    except (WinkError, ValueError, OSError) as exc:
        _fail(exc)
    if html is not None:
        Console(stderr=True).print(f"HTML report written to {html}", highlight=False)


def _check_slice_key(loaded: EvalReport, key: str) -> None:
    keys: set[str] = set()
    for result in loaded.results:
        keys.update(result.metadata)
    if key not in keys:
        listed = ", ".join(sorted(keys)) or "none: the samples have no metadata"
        _raise_config(f"--slice {key!r}: no result has this metadata key; the keys are {listed}")


def _slices_json(loaded: EvalReport, key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in loaded.experiment_names:
        for value, s in loaded.experiment(name).slice_by(key).items():
            out.setdefault(str(value), {})[name] = {
                "n": s.n, "passed": s.passed, "errors": s.errors, "pass_rate": s.pass_rate,
                "pass_rate_ci": [s.pass_rate_low, s.pass_rate_high], "mean_score": s.mean,
            }  # fmt: skip
    return out


def _slice_table(loaded: EvalReport, key: str) -> Table:
    from rich.table import Table

    table = Table(title=f"Pass rate by {key}")
    table.add_column(key)
    names = loaded.experiment_names
    for name in names:
        table.add_column(name, justify="right")
    rows = _slices_json(loaded, key)
    for value, cells in rows.items():
        texts = []
        for name in names:
            cell = cells.get(name)
            if cell is None:
                texts.append("-")
                continue
            low, high = cell["pass_rate_ci"]
            texts.append(f"{cell['pass_rate']:.1%} [{low:.0%}, {high:.0%}] n={cell['n']}")
        table.add_row(value, *texts)
    return table


def _compare(
    run_a: RunArg,
    run_b: Annotated[
        str | None,
        typer.Argument(metavar="RUN_B", help="A second run to compare RUN with."),
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="Baseline experiment (in RUN_A).", show_default=False)
    ] = None,
    treatment: Annotated[
        str | None,
        typer.Option(help="Treatment experiment (in RUN_B, else RUN_A).", show_default=False),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    runs_dir: RunsDirOption = Path("runs"),
) -> None:
    """Paired comparison of two runs (RUN RUN_B), or of two experiments of one RUN."""
    first = _load(run_a, runs_dir)
    try:
        if run_b is None:
            pairs = [within(first, baseline, treatment)]
        else:
            pairs = across(first, _load(run_b, runs_dir), baseline, treatment)
        if as_json:
            blocks = [merged.to_dict(baseline=base) for merged, base in pairs]
            data = blocks[0] if len(blocks) == 1 else {"pairs": blocks}
            typer.echo(json.dumps(data, indent=2))
        else:
            from rich.console import Console

            console = Console()
            for merged, base in pairs:
                merged.render(console, baseline=base)
    except (WinkError, ValueError) as exc:
        _fail(exc)


def register(app: typer.Typer) -> None:
    """Add `wink eval` to `app`."""
    group = typer.Typer(
        name="eval", help="Run evaluations and read their results.", no_args_is_help=True
    )
    group.command("run")(_run)
    group.command("report")(_report)
    group.command("compare")(_compare)
    register_list(group)
    app.add_typer(group)
