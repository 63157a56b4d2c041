"""The offline demo (`make demo`): evaluate an agent under two experiments and compare them.

What happens:

1. A dataset of arithmetic and unit-conversion questions (with metadata) is written to
   `runs/calc-questions.jsonl`.
2. The example agent (`calc_agent.py`: a prompt, two tools, structured output, on a
   `FunctionAdapter` model) runs every question under two experiments: `baseline`, and
   `careful`, whose prompt override adds "Double-check..." to the instructions.
3. Each answer is scored by output checks, session checks and an LLM judge
   (`calc_suite.py`), 16 samples at a time, and appended to a run directory as it completes.
4. The report prints pass rates with intervals and the paired comparison of the two
   experiments, what the run would have cost (the offline models are priced like
   gpt-4o-mini, with `--price`-style overrides), then the commands to resume, query and
   view the run.

No API key or network is needed. Options: `--n N` (or `WINK_DEMO_N`) questions (default
240), `--runs-dir DIR` (default `runs`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from calc_agent import Expected, Question, write_dataset
from calc_suite import EXPERIMENTS, make_agent, suite
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from weakincentives.adapters.pricing import load_prices
from weakincentives.evals import (
    CallbackProgress,
    Dataset,
    EvalReport,
    RunStore,
    cost_summary,
    new_run_id,
    run_eval,
)

QUERY = (
    "SELECT experiment, json_extract(metadata, '$.category') AS category, "
    "round(avg(passed), 3) AS pass_rate, count(*) AS n FROM results GROUP BY 1, 2"
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=int(os.environ.get("WINK_DEMO_N", "240")))
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"))
    parser.add_argument("--concurrency", type=int, default=16)
    return parser.parse_args(argv)


def progress_bar(console: Console) -> CallbackProgress | None:
    """A rich progress bar on a terminal, else None (the CLI's bar shows more)."""
    if not console.is_terminal:
        return None
    progress = Progress(console=console, transient=True)
    task = progress.add_task("evaluating", total=None)

    def on_start(total: int | None, done: int) -> None:
        progress.update(task, total=total, completed=done)
        progress.start()

    return CallbackProgress(
        lambda result: progress.advance(task), on_start=on_start, on_finish=progress.stop
    )


def slice_table(report: EvalReport, key: str) -> Table:
    """Pass rate per metadata value and experiment."""
    table = Table(title=f"Pass rate by {key}")
    table.add_column(key)
    for name in report.experiment_names:
        table.add_column(name, justify="right")
    groups = {name: report.experiment(name).slice_by(key) for name in report.experiment_names}
    for value in groups[report.experiment_names[0]]:
        cells = []
        for name in report.experiment_names:
            s = groups[name].get(value)
            cells.append("-" if s is None else f"{s.pass_rate:.0%} (n={s.n})")
        table.add_row(str(value), *cells)
    return table


def next_steps(runs_dir: Path, run_id: str, dataset: Path) -> str:
    run_dir = shlex.quote(str(runs_dir / run_id))
    resume = ["wink", "eval", "run", "examples/calc_suite.py:suite", "--dataset", str(dataset)]
    if runs_dir != Path("runs"):
        resume += ["--runs-dir", str(runs_dir)]
    return "\n".join(
        [
            f"Run directory: {runs_dir / run_id}",
            f"  report:  .venv/bin/wink eval report {run_dir} --slice difficulty",
            f'  query:   .venv/bin/wink query {run_dir} "{QUERY}"',
            f"  view:    .venv/bin/wink debug {run_dir}",
            f"  resume:  .venv/bin/{shlex.join([*resume, '--resume', run_id])}",
            "           (after an interruption: only the missing results run)",
        ]
    )


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    console = Console()
    dataset_path = write_dataset(args.runs_dir / "calc-questions.jsonl", args.n)
    dataset = Dataset.load(dataset_path, Question, Expected)
    console.print(
        f"[bold]weakincentives demo[/]: {len(dataset)} questions from {dataset_path}, "
        f"experiments {', '.join(e.name for e in EXPERIMENTS)}, concurrency {args.concurrency}"
    )
    run_id = new_run_id(datetime.now(UTC))
    try:
        report = run_eval(
            dataset, make_agent(), suite.evaluator,
            experiments=EXPERIMENTS, max_concurrent=args.concurrency,
            store=RunStore(args.runs_dir), run_id=run_id, progress=progress_bar(console),
            prices=DEMO_PRICES,
        )  # fmt: skip
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: what finished is saved.")
        console.print(
            next_steps(args.runs_dir, run_id, dataset_path), highlight=False, soft_wrap=True
        )
        return 130
    report.render(console, baseline="baseline")
    console.print(slice_table(report, "category"))
    console.print(cost_line(report), highlight=False, soft_wrap=True)
    console.print(next_steps(args.runs_dir, run_id, dataset_path), highlight=False, soft_wrap=True)
    return 0


DEMO_PRICES = load_prices(
    overrides=["offline-calc-model=0.15,0.60,0.075", "offline-judge-model=0.15,0.60,0.075"]
)
"""The package's price table, with the offline models priced like gpt-4o-mini."""


def cost_line(report: EvalReport) -> str:
    """The run's cost, agent and judge, as if the offline models were gpt-4o-mini."""
    return (
        f"Cost: {cost_summary(report.results).describe()} "
        "(offline models priced like gpt-4o-mini: $0.15 in, $0.60 out per million tokens)"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
