"""`wink eval list`: the runs in a runs directory, newest first.

One row per run: id, status, date, model, pass rate per experiment, tags (and the note
with `--json`). The pass rates are read from each run's results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from weakincentives.errors import WinkError
from weakincentives.evals import EvalReport, RunStore

from ._provenance import run_info_of

__all__ = ["list_runs", "register"]


def list_runs(runs_dir: Path) -> list[dict[str, Any]]:
    """Describe every run under `runs_dir`, newest first (as `wink eval list --json` prints).

    A run whose results cannot be read is listed with its status and no pass rates.
    """
    rows = []
    for handle in RunStore(runs_dir).list_runs():
        manifest = handle.manifest
        info = run_info_of({"fingerprint": True, "config": manifest.config})
        try:
            report = EvalReport.load(handle.path, slim=True)
            rates: dict[str, float] | None = report.pass_rate_by_experiment()
            counts = {name: report.experiment(name).total for name in report.experiment_names}
        except (WinkError, ValueError, OSError):
            rates, counts = None, {}
        rows.append(
            {
                "run_id": manifest.run_id,
                "status": manifest.status,
                "created_at": manifest.created_at.isoformat(),
                "model": info.get("model"),
                "pass_rate": rates,
                "results": counts,
                "tags": list(info.get("tags", ())),
                "note": info.get("note"),
                "path": str(handle.path),
            }
        )
    rows.sort(key=lambda row: (row["created_at"], row["run_id"]), reverse=True)
    return rows


def _rates(row: dict[str, Any]) -> str:
    rates = row["pass_rate"]
    if rates is None:
        return "unreadable"
    if not rates:
        return "no results"
    return ", ".join(
        f"{name} {rate:.1%} (n={row['results'].get(name, 0)})" for name, rate in rates.items()
    )


def _list(
    runs_dir: Annotated[Path, typer.Option(help="Directory of run directories.")] = Path("runs"),
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Only runs with this tag (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List runs: status, date, model, pass rate per experiment, tags."""
    rows = [r for r in list_runs(runs_dir) if all(t in r["tags"] for t in tag or ())]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not rows:
        console.print(f"No runs in {runs_dir}.", highlight=False, soft_wrap=True)
        return
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("run", "status", "created", "model", "pass rate", "tags"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row["run_id"], row["status"], row["created_at"][:19].replace("T", " "),
            row["model"] or "-", _rates(row), ", ".join(row["tags"]) or "-",
        )  # fmt: skip
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add `list` to `app` (the `wink eval` group)."""
    app.command("list")(_list)
