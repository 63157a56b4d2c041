"""The cost options of `wink eval run`: prices, a price file and a spending limit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from weakincentives.evals import EvalReport
from weakincentives.evals.report import format_usd

from ._console import EXIT_INCOMPLETE

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EXIT_COST_LIMIT",
    "MaxCostOption",
    "PriceFileOption",
    "PriceOption",
    "stop_at_cost_limit",
]

EXIT_COST_LIMIT = EXIT_INCOMPLETE
"""`--max-cost` was reached: the run is incomplete (saved as interrupted, resumable)."""

PriceOption = Annotated[
    list[str] | None,
    typer.Option(
        help="MODEL=IN,OUT[,CACHED[,WRITE]]: dollars per million tokens (repeatable); "
        "overrides the package's price table."
    ),
]
PriceFileOption = Annotated[
    Path | None,
    typer.Option("--prices", help="A JSON or TOML price file laid over the package's."),
]
MaxCostOption = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        help="Stop starting samples once the run's results cost this many dollars (the "
        "run is saved as interrupted; --resume with a higher --max-cost continues).",
    ),
]


def stop_at_cost_limit(
    report: EvalReport, max_cost: float | None, run_name: str, err: Console
) -> None:
    """Exit with `EXIT_COST_LIMIT` and say how to go on, when `--max-cost` stopped the run."""
    if not report.config.get("cost_stopped"):
        return
    spent = report.cost_summary().total_usd
    err.print(
        f"[yellow]stopped:[/] the run's results cost {format_usd(spent)}, reaching --max-cost "
        f"{format_usd(max_cost or 0.0)}; run {run_name} is saved as interrupted. Continue it "
        "with --resume and a higher --max-cost.",
        highlight=False,
    )
    raise typer.Exit(EXIT_COST_LIMIT)
