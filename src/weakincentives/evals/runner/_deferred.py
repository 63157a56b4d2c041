"""Scoring that waits for the next sample to start: the local runner's latency-bound path.

`LocalRun` uses it for a `DeferrableTarget` (see `LocalRun._run_tasks`).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel

from weakincentives.experiment import Experiment

from .._records import EvalRequest, EvalResult, Sample
from ._fail_fast import FailFast
from ._target import Finish

__all__ = ["DeferredScoring", "Work"]

_PER_TURN = 16
"""Runs the finisher scores between two yields: a model call that returns meanwhile waits
for at most this many scorings before its sample goes on."""


_QUIET = 0.0002
"""Seconds without a new run queued before the finisher scores, while samples remain to
start: when many model waits end together (a wave), every worker starts its next sample
before any scoring runs, so the wave's next calls are not spread out by the scoring."""


async def _checkpoint() -> None:
    """Let other tasks run, then stop here if the run was cancelled meanwhile.

    Trio resumes a task from `checkpoint` even when a cancel came while it waited (the
    yield is shielded); the finisher's scoring may have cancelled the run (an evaluator
    that cancels its scope), and the worker must not take more work then.
    """
    await anyio.lowlevel.checkpoint()
    await anyio.lowlevel.checkpoint_if_cancelled()


Work = tuple[Sample[Any, Any], Experiment, int]
"""What to run: sample, experiment, epoch."""


class DeferredScoring:
    """Worker tasks that start their next sample before scoring the last (`LocalRun._run_tasks`).

    Each worker runs a sample's agent (`DeferrableTarget.start`) and queues what scores
    it; one finisher task scores the queue in order and records it with one write, then
    yields, so workers woken at the same time start their next sample first. While
    samples remain to start, the finisher waits for a quiet moment (`_QUIET` without a
    new run queued) before it scores; once every sample has started, it scores as runs
    come in, alongside the last model calls. The queue
    holds at most one run per worker: a worker that finds it full scores and records it
    itself (then yields), so agents that never wait still make progress, in order, in
    O(concurrency) memory. While the first results decide whether the run stops early
    (`FailFast`), workers score their own runs as before.
    """

    def __init__(
        self,
        start: Callable[[EvalRequest[Any, Any]], Awaitable[Finish]],
        request: Callable[[Work], EvalRequest[Any, Any]],
        complete: Callable[[list[EvalResult]], None],
        fail_fast: FailFast,
        workers: int,
    ) -> None:
        self._start = start
        self._request = request
        self._complete = complete
        self._fail_fast = fail_fast
        self._bound = workers
        self._queue: collections.deque[Finish] = collections.deque()
        self._workers = workers  # still running (counted up front: tasks start in any order)
        self._wake = anyio.Event()
        self._queued = 0  # runs queued so far: the finisher waits while this moves
        self._started_all = anyio.Event()  # the work has ended: no start waits on scoring

    async def worker(self, work: Iterator[Work]) -> None:
        """Run samples from `work` until it ends (or the run stops early)."""
        queue, start, request, fail_fast = self._queue, self._start, self._request, self._fail_fast
        complete, bound, checkpoint = self._complete, self._bound, _checkpoint
        try:
            for item in work:
                if fail_fast.reason is not None:
                    return  # stopping early: take no more work
                finish = await start(request(item))
                if not fail_fast.idle:  # this result may decide to stop: score it now
                    complete([finish().result])
                    await checkpoint()
                elif len(queue) < bound:
                    queue.append(finish)
                    self._queued += 1
                    self._wake.set()
                else:  # full: score the queue here (in order, one write), then let others run
                    queue.append(finish)
                    complete(self._drain())
                    await checkpoint()
            self._started_all.set()
        finally:
            self._workers -= 1
            self._wake.set()

    async def finisher(self) -> None:
        """Score and record the queued runs, in order, until every worker has ended."""
        queue, complete, checkpoint = self._queue, self._complete, anyio.lowlevel.checkpoint
        seen = -1
        while True:
            if queue and self._queued != seen and not self._started_all.is_set():
                seen = self._queued  # workers are busy starting samples: let them go on
                with anyio.move_on_after(_QUIET):
                    await self._started_all.wait()
            elif queue:
                complete(self._drain(_PER_TURN))
                await checkpoint()  # workers woken meanwhile start their next sample first
            elif self._workers == 0:
                return
            else:
                await self._wake.wait()
                self._wake = anyio.Event()

    def _drain(self, most: int | None = None) -> list[EvalResult]:
        """Score the queued runs (the `most` oldest, or all), oldest first."""
        queue = self._queue
        if most is None or len(queue) <= most:
            finishes = list(queue)
            queue.clear()
        else:
            finishes = [queue.popleft() for _ in range(most)]
        return [finish().result for finish in finishes]
