"""`wink eval report|compare`: read a run's report, compare two experiments or runs.

Both exit 2 when a run cannot be read or an option names something the run does not
hold (an experiment, a `--slice` key no result has).
"""

from __future__ import annotations

import functools
import gc
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, ParamSpec

import typer

from weakincentives.errors import ConfigurationError, WinkError
from weakincentives.evals import EvalReport, RunStore

from ._console import fail
from ._pairing import across, experiments_in_order, read_prefixes, within
from ._provenance import header_lines, provenance_lines, run_info_of, run_provenance

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["compare_command", "register", "report_command"]


_P = ParamSpec("_P")


def _paused_collector(command: Callable[_P, None]) -> Callable[_P, None]:
    """Run `command` with the cyclic garbage collector paused, then switch it back on.

    A report holds a few objects per result (100,000 results: about 700,000), none in a
    cycle; while the statistics are computed, every collection of the oldest generation
    would walk all of them again (about a sixth of the report's time at 100,000
    results). Garbage made meanwhile is collected once the collector is back on.
    """

    @functools.wraps(command)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> None:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            command(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused


def _fail(error: object) -> NoReturn:
    fail(error)


def _raise_config(message: str) -> NoReturn:
    """Raise a `ConfigurationError` (a helper that type checkers see never returns)."""
    raise ConfigurationError(message)


def _first_experiment(loaded: EvalReport) -> str | None:
    """The run's first experiment as configured (results arrive in any order), if known."""
    names = experiments_in_order(loaded)
    return names[0] if names else None


def _path_of(run: str, runs_dir: Path) -> Path:
    """The path of a run id (under `runs_dir`), a run directory or a saved report file."""
    try:
        path = Path(run)
        return path if path.exists() else RunStore(runs_dir).locate(run)
    except (WinkError, ValueError, OSError) as exc:
        _fail(exc)


def _read(path: Path, experiment_prefix: str = "", *, hold: bool = False) -> EvalReport:
    # The manifest is read (and its format version checked) by `EvalReport.load`. A
    # report streams a run's file (`hold`: every result is read into memory, for the
    # HTML report and `compare`, which use them all).
    try:
        return EvalReport.load(path, slim=True, experiment_prefix=experiment_prefix, hold=hold)
    except (WinkError, ValueError, OSError) as exc:
        _fail(exc)


RunArg = Annotated[
    str,
    typer.Argument(metavar="RUN", help="Run id (under --runs-dir), run directory or report file."),
]
RunsDirOption = Annotated[Path, typer.Option(help="Directory of run directories.")]


@_paused_collector
def report_command(
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

    path = _path_of(run, runs_dir)
    loaded = _read(path, hold=html is not None)
    provenance = run_provenance(path, loaded.config)
    info = run_info_of(loaded.config)
    if slice_key is not None:
        loaded.slice_by(slice_key)  # first: a stored run counts it in its one pass
        _check_slice_key(loaded, slice_key)
    if baseline is None and len(loaded.experiment_names) > 1:
        baseline = _first_experiment(loaded)
    try:
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
    """Fail when no result has `key` in its metadata (the table would be one "None" row)."""
    keys = loaded.metadata_keys()
    if key not in keys:
        listed = ", ".join(sorted(keys)) or "none (the samples have no metadata)"
        _fail(f"--slice {key}: no result has that metadata key; the run's keys: {listed}")


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


@_paused_collector
def compare_command(
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
    path_a = _path_of(run_a, runs_dir)
    if run_b is None:
        first, second, prefixes = _read(path_a, hold=True), None, ("", "")
    else:
        # Two runs are read with their experiments named as the comparison labels them.
        path_b = _path_of(run_b, runs_dir)
        prefixes = read_prefixes(EvalReport.read_run_id(path_a), EvalReport.read_run_id(path_b))
        first = _read(path_a, prefixes[0])
        second = _read(path_b, prefixes[1])
    try:
        if second is None:
            pairs = [within(first, baseline, treatment)]
        else:
            pairs = across(first, second, baseline, treatment, prefixes=prefixes)
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
    """Add `report` and `compare` to `app` (the `wink eval` group)."""
    app.command("report")(report_command)
    app.command("compare")(compare_command)
