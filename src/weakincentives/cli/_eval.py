"""`wink eval run|report|compare`: run an evaluation, read a run, compare two experiments.

Exit codes of `wink eval run`: 0 done, 1 a pass rate is below `--fail-under`, 2 a usage
or configuration error (bad TARGET, a dataset error with its file:line, a run that cannot
be resumed), 130 interrupted (Ctrl-C: the run is marked interrupted; `--resume RUN`
continues it without re-running what was recorded). `report` and `compare` exit 2 when
the run cannot be read.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import typer

from weakincentives.adapters import CacheableAdapter, CacheStats
from weakincentives.errors import ConfigurationError, WinkError
from weakincentives.evals import (
    BASELINE,
    Dataset,
    EvalReport,
    Experiment,
    RunStore,
    new_run_id,
    run_eval,
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
from ._experiments import parse_experiments
from ._targets import (
    BUILTIN_EVALUATORS,
    combine_evaluators,
    load_type,
    resolve_evaluator,
    resolve_target,
)

# rich (and `._progress`, built on it) is imported by the functions that print, so that
# `wink` and `wink worker` start without it.
if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["RunPlan", "build_plan", "register"]

DEFAULT_TIMEOUT = 600.0
"""Seconds per sample when `--timeout` is not given (`--timeout 0`: no limit)."""
DEFAULT_CONCURRENCY = 16
"""Samples in flight when `--concurrency` is not given."""
CACHE_FILE = "response-cache.sqlite"
"""The default response cache, a file in the runs directory."""

_QUERY_EXAMPLE = (
    "SELECT experiment, round(avg(passed), 3) AS pass_rate, count(*) AS n "
    "FROM results GROUP BY experiment"
)


def _fail(error: object, code: int = EXIT_USAGE) -> NoReturn:
    fail(error, code)


# -- planning a run ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPlan:
    """Everything `wink eval run` resolved before running."""

    target: Any
    """`AgentLoop` or task function."""
    dataset: Dataset[Any, Any]
    """The samples."""
    evaluator: Any
    """The (combined) evaluator (None for `--redis`: the workers' is used)."""
    experiments: tuple[Experiment, ...]
    """Experiments to run, the first one the baseline of comparisons."""


def build_plan(
    target: str,
    *,
    dataset: Path | None,
    evaluators: Sequence[str],
    experiments: Sequence[str],
    input_type: str | None = None,
    expected_type: str | None = None,
    needs_evaluator: bool = True,
) -> RunPlan:
    """Resolve TARGET, types, dataset, evaluators and experiments.

    With `needs_evaluator=False` (a run on Redis workers, which score with their own
    evaluator) no evaluator is required nor resolved.

    Raises:
        ConfigurationError: any reference or option is wrong.
        InvalidDatasetError: the dataset does not load (the message names file and line).
    """
    resolved = resolve_target(target)
    in_type = load_type(input_type, what="--input-type") if input_type else resolved.input_type
    exp_type = (
        load_type(expected_type, what="--expected-type")
        if expected_type
        else resolved.expected_type
    )
    source = dataset if dataset is not None else resolved.dataset
    if source is None:
        _raise_config("no dataset: pass --dataset FILE.jsonl (or use a suite that has one)")
    samples = source if isinstance(source, Dataset) else Dataset.load(source, in_type, exp_type)
    chosen = [resolve_evaluator(s) for s in evaluators] or list(resolved.evaluators)
    return RunPlan(
        target=resolved.target,
        dataset=samples,
        evaluator=combine_evaluators(chosen) if needs_evaluator else None,
        experiments=parse_experiments(experiments, resolved.experiments or (BASELINE,)),
    )


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
        Path | None, typer.Option(help="JSONL dataset (id, input, expected, metadata).")
    ] = None,
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
) -> None:
    """Run TARGET over a dataset under one or more experiments, and report."""
    if run_id is not None and resume is not None:
        _fail("--run-id names a new run and --resume an existing one; give one of them")
    if redis is not None:
        _refuse_local_flags(evaluator=evaluator, timeout=timeout, concurrency=concurrency)
    the_id = resume or run_id or new_run_id(datetime.now(UTC))
    hints = _Hints(
        target=target, dataset=dataset, evaluators=evaluator or (), experiments=experiment or (),
        epochs=epochs, runs_dir=_runs_dir_of(resume, runs_dir), input_type=input_type,
        expected_type=expected_type, distributed=_redis_args(redis, requests, namespace),
    )  # fmt: skip
    with interrupts_as_keyboard_interrupt() as signals:
        try:
            plan = _plan(
                target, dataset=dataset, evaluators=evaluator or (),
                experiments=experiment or (), input_type=input_type,
                expected_type=expected_type, distributed=redis is not None,
            )  # fmt: skip
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
                    timeout=run_timeout, progress=progress,
                )  # fmt: skip
            else:
                report = run_eval(
                    plan.dataset, plan.target, plan.evaluator,
                    experiments=plan.experiments, epochs=epochs,
                    max_concurrent=concurrency or DEFAULT_CONCURRENCY,
                    timeout=_sample_timeout(timeout), store=RunStore(runs_dir),
                    run_id=None if resume else the_id, resume=resume, retry_errors=retry_errors,
                    cache=_cache_path(plan.target, runs_dir, no_cache), progress=progress,
                )  # fmt: skip
        except KeyboardInterrupt:
            name = Path(the_id).name
            _stopped(signals, f"run {name} is saved as interrupted", hints.text(name))
        except (WinkError, ValueError) as exc:
            _fail(exc)
    _print_run(report, plan, hints, as_json=as_json)
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


def _refuse_local_flags(*, evaluator: Any, timeout: Any, concurrency: Any) -> None:
    """With `--redis`, the workers decide these: refuse them rather than ignore them."""
    where = {
        "--evaluator": "the workers score with their WorkerSpec's evaluator",
        "--timeout": "set it on the workers: WorkerSpec(config=EvalLoopConfig(timeout=...))",
        "--concurrency": "give each worker `wink worker --concurrency N`",
    }
    flags = {"--evaluator": evaluator, "--timeout": timeout, "--concurrency": concurrency}
    given = [flag for flag, value in flags.items() if value]
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


def _check_complete(report: EvalReport, hints: _Hints) -> None:
    """Exit 3 when results are missing (a run timeout, lost requests, a fail-fast stop)."""
    if report.complete:
        return
    run_id = report.run_id or ""
    reason = report.config.get("stopped")
    queued = report.config.get("queued_requests")
    detail = f": {reason}" if isinstance(reason, str) else ""
    if isinstance(queued, int) and queued:
        detail += (
            f"; {queued} requests still wait in the requests mailbox (is a `wink worker` "
            "serving it?)"
        )
    print_error(
        f"the run is incomplete, {report.missing} of {report.expected_count} results "
        f"missing{detail}; finish it with: {hints.resume_command(run_id)}",
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
) -> EvalReport:
    """Submit the plan to Redis workers and collect the results into the run store."""
    from weakincentives.contrib.distributed import run_distributed
    from weakincentives.evals import Fingerprint

    # The workers run their own WorkerSpec (agent, evaluator, per-sample timeout): the
    # fingerprint names the mailbox they serve, not an evaluator this process would pick.
    fingerprint = Fingerprint.build(
        dataset_sha256=plan.dataset.sha256, experiments=plan.experiments, evaluators=(),
        target=plan.target, epochs=epochs,
        extra={"workers": f"redis:{namespace}/{requests}", "evaluator": "the workers'"},
    )  # fmt: skip
    store = RunStore(runs_dir)
    if resume is None:
        return run_distributed(
            plan.dataset, plan.experiments, redis_url=redis_url, requests=requests,
            namespace=namespace, run_store=store, fingerprint=fingerprint, run_id=run_id,
            epochs=epochs, timeout=timeout, progress=progress,
        )  # fmt: skip
    with store.resume(resume, fingerprint) as handle:
        return run_distributed(
            plan.dataset, plan.experiments, redis_url=redis_url, requests=requests,
            namespace=namespace, run_store=handle, fingerprint=fingerprint, epochs=epochs,
            timeout=timeout, progress=progress,
        )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class _Hints:
    """What the next commands need to name the same run."""

    target: str
    dataset: Path | None
    evaluators: Sequence[str]
    experiments: Sequence[str]
    epochs: int
    runs_dir: Path
    input_type: str | None
    expected_type: str | None
    distributed: tuple[str, ...] = ()
    """`--redis URL` and its companions (the URL without its password)."""

    def resume_command(self, run_id: str) -> str:
        args = ["wink", "eval", "run", self.target]
        if self.dataset is not None:
            args += ["--dataset", str(self.dataset)]
        for flag, values in (("--evaluator", self.evaluators), ("--experiment", self.experiments)):
            for value in values:
                args += [flag, value]
        for flag, option in (
            ("--input-type", self.input_type),
            ("--expected-type", self.expected_type),
        ):
            if option:
                args += [flag, option]
        if self.epochs != 1:
            args += ["--epochs", str(self.epochs)]
        if self.runs_dir != Path("runs"):
            args += ["--runs-dir", str(self.runs_dir)]
        return shlex.join([*args, *self.distributed, "--resume", run_id])

    def text(self, run_id: str) -> str:
        run_dir = shlex.quote(str(self.runs_dir / run_id))
        return "\n".join(
            [
                f"Run directory: {self.runs_dir / run_id}",
                f"  report:  wink eval report {run_dir}",
                f"  query:   wink query {run_dir} {shlex.quote(_QUERY_EXAMPLE)}",
                f"  view:    wink debug {run_dir}",
                f"  resume:  {self.resume_command(run_id)}",
            ]
        )


def _print_run(report: EvalReport, plan: RunPlan, hints: _Hints, *, as_json: bool) -> None:
    run_id = report.run_id or ""
    baseline = plan.experiments[0].name if len(plan.experiments) > 1 else None
    if as_json:
        data = report.to_dict(baseline=baseline)
        data["run_dir"] = str(hints.runs_dir / run_id)
        typer.echo(json.dumps(data, indent=2))
        return
    from rich.console import Console

    console = Console()
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
    fingerprint = loaded.config.get("fingerprint")
    experiments = fingerprint.get("experiments") if isinstance(fingerprint, dict) else None
    names = loaded.experiment_names
    for entry in experiments if isinstance(experiments, list) else ():
        name = entry.get("name") if isinstance(entry, dict) else None
        if name in names:
            return str(name)
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
    if baseline is None and len(loaded.experiment_names) > 1:
        baseline = _first_experiment(loaded)
    try:
        if html is not None:
            from weakincentives.debug import write_html_report

            write_html_report(loaded, html, baseline=baseline, slice_key=slice_key)
        if as_json:
            data = loaded.to_dict(baseline=baseline)
            if slice_key is not None:
                data["slices"] = _slices_json(loaded, slice_key)
            typer.echo(json.dumps(data, indent=2))
        else:
            console = Console()
            loaded.render(console, baseline=baseline)
            if slice_key is not None:
                console.print(_slice_table(loaded, slice_key))
    except (WinkError, ValueError, OSError) as exc:
        _fail(exc)
    if html is not None:
        Console(stderr=True).print(f"HTML report written to {html}", highlight=False)


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
            merged, base = _within(first, baseline, treatment)
        else:
            merged, base = _across(first, _load(run_b, runs_dir), baseline, treatment)
        if as_json:
            typer.echo(json.dumps(merged.to_dict(baseline=base), indent=2))
        else:
            from rich.console import Console

            merged.render(Console(), baseline=base)
    except (WinkError, ValueError) as exc:
        _fail(exc)


def _within(
    loaded: EvalReport, baseline: str | None, treatment: str | None
) -> tuple[EvalReport, str]:
    names = loaded.experiment_names
    if len(names) < 2:
        _raise_config(
            f"run {loaded.run_id} has one experiment ({', '.join(names) or 'none'}); "
            "pass a second run to compare with: wink eval compare RUN_A RUN_B"
        )
    base = baseline or _first_experiment(loaded) or names[0]
    for name in (base, treatment):
        if name is not None:
            loaded.experiment(name)  # raises, listing the experiments, when absent
    keep = {base, treatment} if treatment else set(names)
    return loaded.filter(lambda r: r.experiment_name in keep), base


def _across(
    a: EvalReport, b: EvalReport, baseline: str | None, treatment: str | None
) -> tuple[EvalReport, str]:
    base = _single(a, baseline, "--baseline")
    treat = _single(b, treatment, "--treatment")
    label_a, label_b = f"{a.run_id or 'A'}/{base}", f"{b.run_id or 'B'}/{treat}"
    if label_a == label_b:
        label_a, label_b = f"A/{base}", f"B/{treat}"
    results = [
        *(dataclasses.replace(r, experiment_name=label_a) for r in a.experiment(base).results),
        *(dataclasses.replace(r, experiment_name=label_b) for r in b.experiment(treat).results),
    ]
    return EvalReport(results=tuple(results)), label_a


def _single(loaded: EvalReport, chosen: str | None, flag: str) -> str:
    names = loaded.experiment_names
    if chosen is not None:
        loaded.experiment(chosen)  # raises, listing the experiments, when absent
        return chosen
    if len(names) != 1:
        _raise_config(
            f"run {loaded.run_id} has experiments {', '.join(names) or 'none'}; "
            f"pick one with {flag} NAME"
        )
    return names[0]


def register(app: typer.Typer) -> None:
    """Add `wink eval` to `app`."""
    group = typer.Typer(
        name="eval", help="Run evaluations and read their results.", no_args_is_help=True
    )
    group.command("run")(_run)
    group.command("report")(_report)
    group.command("compare")(_compare)
    app.add_typer(group)
