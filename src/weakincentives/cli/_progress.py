"""A rich progress bar for `wink eval run`: done/total, rate, ETA, pass rate, errors.

`RichProgress` implements the local runner's `ProgressSink` (`start(total, done=0)`,
`advance(result)`, `finish()`); the runner calls it from one thread, one call at a time.
The pass rate and error count cover the results recorded by this invocation (a resumed
run starts them from zero; the bar starts at the results already done).
`progress_for(console)` returns None when the console is not a terminal, so piped and CI
output stays quiet.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

if TYPE_CHECKING:
    from weakincentives.evals import EvalResult

__all__ = ["RichProgress", "progress_for"]


class _RateColumn(ProgressColumn):
    """Results per second over the last half minute (rich keeps the window)."""

    def render(self, task: Task) -> Text:
        speed = task.speed
        return Text(f"{speed:.1f}/s" if speed else "", style="cyan")


class RichProgress:
    """A live progress bar for an evaluation run.

    Args:
        console: Where the bar is drawn (stderr by default, so stdout stays the report's).
        description: The label left of the bar.
    """

    def __init__(self, console: Console | None = None, *, description: str = "eval") -> None:
        self._console = console or Console(stderr=True)
        self._description = description
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self.done = 0
        """Results recorded since `start`."""
        self.passed = 0
        """Of those, passed."""
        self.errors = 0
        """Of those, errored."""

    def start(self, total: int | None, *, done: int = 0) -> None:
        """Show the bar for `total` results (None: unknown), `done` of them already there."""
        if self._progress is not None:
            return
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            _RateColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
            console=self._console,
        )
        self._task = self._progress.add_task(
            self._description, total=total, completed=done, stats=self._stats_text()
        )
        self._progress.start()

    def advance(self, result: EvalResult) -> None:
        """Count one recorded result."""
        self.done += 1
        self.passed += 1 if result.passed else 0
        self.errors += 1 if result.is_error else 0
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, stats=self._stats_text())

    def finish(self) -> None:
        """Stop the bar, leaving its last state on screen."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _stats_text(self) -> str:
        if not self.done:
            return "pass -  errors 0"
        style = "red" if self.errors else "green"
        return f"pass {self.passed / self.done:.1%}  [{style}]errors {self.errors}[/]"

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.finish()


def progress_for(console: Console) -> RichProgress | None:
    """A progress bar on `console` when it is a terminal; None (quiet) otherwise."""
    return RichProgress(console) if console.is_terminal else None
