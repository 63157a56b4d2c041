"""Progress reporting for the local runner: a small sink protocol and two sinks.

`evaluate(..., progress=...)` calls `start` once, `advance` after each result is recorded
and `finish` once at the end, also when the run is interrupted. Calls come from the event
loop's thread, one at a time, so a sink needs no locking; keep them cheap, they sit on the
runner's hot path. The CLI plugs a rich progress bar in; scripts can pass a plain callback.

Examples:
    >>> seen = []
    >>> sink = as_progress(seen.append)
    >>> sink.start(2)
    >>> isinstance(sink, ProgressSink), seen
    (True, [])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from .._records import EvalResult

__all__ = ["CallbackProgress", "NullProgress", "ProgressSink", "as_progress"]


@runtime_checkable
class ProgressSink(Protocol):
    """Receives a run's progress."""

    def start(self, total: int | None, *, done: int = 0) -> None:
        """The run starts.

        Args:
            total: Results the whole run records (samples x experiments x epochs), or
                None when the dataset is streamed and its length unknown.
            done: Results already recorded by an earlier attempt (a resumed run).
        """
        ...

    def advance(self, result: EvalResult) -> None:
        """One more result was recorded."""
        ...

    def finish(self) -> None:
        """The run ended (complete, failed or interrupted)."""
        ...


class NullProgress:
    """A sink that ignores everything (the default)."""

    def start(self, total: int | None, *, done: int = 0) -> None:
        """Do nothing."""

    def advance(self, result: EvalResult) -> None:
        """Do nothing."""

    def finish(self) -> None:
        """Do nothing."""


class CallbackProgress:
    """A sink made of callbacks: `on_result(result)` per result, optional start/finish.

    Args:
        on_result: Called with each recorded result.
        on_start: Called with `(total, done)` when the run starts.
        on_finish: Called when the run ends.
    """

    def __init__(
        self,
        on_result: Callable[[EvalResult], object],
        *,
        on_start: Callable[[int | None, int], object] | None = None,
        on_finish: Callable[[], object] | None = None,
    ) -> None:
        self._on_result = on_result
        self._on_start = on_start
        self._on_finish = on_finish

    def start(self, total: int | None, *, done: int = 0) -> None:
        """Call `on_start(total, done)`, if given."""
        if self._on_start is not None:
            self._on_start(total, done)

    def advance(self, result: EvalResult) -> None:
        """Call `on_result(result)`."""
        self._on_result(result)

    def finish(self) -> None:
        """Call `on_finish()`, if given."""
        if self._on_finish is not None:
            self._on_finish()


def as_progress(progress: ProgressSink | Callable[[EvalResult], object] | None) -> ProgressSink:
    """Return `progress` as a sink: None -> `NullProgress`, a callable -> `CallbackProgress`."""
    if progress is None:
        return NullProgress()
    if isinstance(progress, ProgressSink):
        return progress
    return CallbackProgress(progress)
