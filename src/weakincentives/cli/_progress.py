"""A rich progress bar for `wink eval run`: done/total, rate, ETA, pass rate, errors.

`RichProgress` implements the local runner's `ProgressSink` (`start(total, done=0)`,
`advance(result)`, `finish()`); the runner calls it from one thread, one call at a time.
The pass rate and error count cover the results recorded by this invocation (a resumed
run starts them from zero; the bar starts at the results already done).
`progress_for(console)` returns it on a terminal; elsewhere (piped output, CI logs) a
`LineProgress`, which prints one plain line every `LINE_INTERVAL` seconds (done, rate,
pass rate, errors), so a long run in CI is not silent and its log stays readable.
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

from weakincentives.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from weakincentives.evals import EvalResult

__all__ = ["LINE_INTERVAL", "LineProgress", "RichProgress", "progress_for"]

LINE_INTERVAL = 10.0
"""Seconds between two progress lines when stderr is not a terminal."""


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


class LineProgress:
    """Progress as a plain line every `interval` seconds, for output that is not a terminal.

    Prints nothing for a run shorter than `interval`; after a longer one, a last line
    when it finishes.

    Args:
        console: Where the lines go (stderr).
        interval: Seconds between two lines.
        clock: Measures the interval and the rate.
    """

    def __init__(
        self, console: Console, *, interval: float = LINE_INTERVAL, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self._console = console
        self._interval = interval
        self._clock = clock
        self._total: int | None = None
        self._already = 0
        self._start = self._last = clock.monotonic()
        self._printed = False
        self.done = 0
        """Results recorded since `start`."""
        self.passed = 0
        """Of those, passed."""
        self.errors = 0
        """Of those, errored."""

    def start(self, total: int | None, *, done: int = 0) -> None:
        """Start timing a run of `total` results (None: unknown), `done` already there."""
        self._total, self._already = total, done
        self._start = self._last = self._clock.monotonic()

    def advance(self, result: EvalResult) -> None:
        """Count one recorded result; print a line when `interval` has passed."""
        self.done += 1
        self.passed += 1 if result.passed else 0
        self.errors += 1 if result.is_error else 0
        now = self._clock.monotonic()
        if now - self._last >= self._interval:
            self._last = now
            self._print(now)

    def finish(self) -> None:
        """Print the last line (only when an earlier one was printed)."""
        if self._printed:
            self._print(self._clock.monotonic())
            self._printed = False

    def line(self, now: float) -> str:
        """The progress line at monotonic time `now`."""
        done = self._already + self.done
        total = f"/{self._total}" if self._total is not None else ""
        share = f" ({done / self._total:.0%})" if self._total else ""
        elapsed = max(now - self._start, 1e-9)
        pass_rate = f"{self.passed / self.done:.1%}" if self.done else "-"
        return (
            f"eval: {done}{total} done{share}, {self.done / elapsed:.1f}/s, "
            f"pass {pass_rate}, errors {self.errors}"
        )

    def _print(self, now: float) -> None:
        self._printed = True
        self._console.print(self.line(now), markup=False, highlight=False)

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.finish()


def progress_for(console: Console) -> RichProgress | LineProgress:
    """A progress bar on `console` when it is a terminal; a line every few seconds otherwise."""
    return RichProgress(console) if console.is_terminal else LineProgress(console)
