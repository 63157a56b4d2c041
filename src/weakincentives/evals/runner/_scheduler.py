"""One `evaluate` call's state: the sample source, the work generator, workers, results.

`_evaluate.py` holds the public entry points; this module holds the machinery they drive
(see `_evaluate`'s docstring for the behaviour).
"""

from __future__ import annotations

import collections
import contextvars
import dataclasses
import functools
import itertools
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

import anyio
import anyio.to_thread

from weakincentives.clock import Clock
from weakincentives.errors import ConfigurationError
from weakincentives.runtime.threads import WorkerThreads

from .._records import (
    EvalRequest,
    EvalResult,
    RecordInputs,
    Score,
    build_request,
    error_message,
)
from ..report import EvalReport
from ..store import Fingerprint, RunHandle, RunStatus, RunStore, StoredResults
from ._deferred import DeferredScoring, Work
from ._environment import EnvironmentFactory, create_environment, serialize_environment
from ._fail_fast import FailFast
from ._fanout import fan_out
from ._outcomes import error_result, slim
from ._progress import NullProgress, ProgressSink
from ._publish import DeferredManifest
from ._sample import SampleOutcome
from ._settings import RunSettings
from ._slots import ResultBuffer, SlotPool
from ._source import UNHASHED_STREAM, SampleSource
from ._target import DeferrableTarget, SampleTarget

__all__ = ["LocalRun", "error_result", "slim"]

PROGRESS_INTERVAL = 0.1
"""Seconds between progress updates when samples run in long-lived threads."""

_UNBOUNDED = 2**20  # slot threads plus the abandoned ones (see `runtime.run_abandonable`)
_Work = Work  # what to run: sample, experiment, epoch


class LocalRun:
    """The state of one `evaluate` call: work generator, workers, store handle, results."""

    def __init__(
        self,
        settings: RunSettings,
        source: SampleSource,
        target: SampleTarget,
        environment_factory: EnvironmentFactory | None,
        progress: ProgressSink,
        clock: Clock,
        inputs: RecordInputs | None = None,
        fail_fast: FailFast | None = None,
        max_cost: float | None = None,
    ) -> None:
        self.settings = settings
        self.inputs = inputs or RecordInputs()
        self.fail_fast = fail_fast or FailFast()
        self.max_cost = max_cost
        self.spent = 0.0
        """Dollars the run's results cost so far (agent and judge, priced ones; a resumed
        run's earlier results included)."""
        self.cost_stopped = False
        """True when `max_cost` was reached and the run stopped taking new samples."""
        self._spend_lock = threading.Lock()
        self.source = source
        self.target = target
        self.environment_factory = environment_factory
        self.progress = progress
        self.run_id: str | None = None
        self.handle: RunHandle | None = None
        self._manifest: DeferredManifest | None = None  # a new run's (see `create`)
        self.resumed = False
        self.done: Collection[tuple[str, str, int]] = ()
        self.earlier: dict[tuple[str, str, int], EvalResult] = {}
        self.results: list[EvalResult] = []
        """This call's results, without a store; with one, they are appended to it and
        not kept: the report reads them back (`StoredResults`)."""
        self._appended = itertools.count()  # `next` is atomic: slot threads count here
        # The byte range of results.jsonl this call appended, and how many results it holds.
        self._offsets = (0, 0, 0)
        self._clock = clock
        self._stopped = False
        self._pull_lock = threading.Lock()
        self._order_lock = threading.Lock()
        self._failure: BaseException | None = None  # what broke a slot thread
        # Results for the progress sink, from slot threads to the event loop (drained
        # every `PROGRESS_INTERVAL`); None when there is no sink to feed.
        self._pending: collections.deque[EvalResult] | None = (
            None if isinstance(progress, NullProgress) else collections.deque()
        )
        # Slot threads' results on their way to `_write` (in the sink's order, if any).
        self._buffer = ResultBuffer[EvalResult](
            self._write, self._order_lock, ordered=self._pending is not None
        )

    @property
    def planned(self) -> int | None:
        """Results the whole run records, when the dataset's length is known."""
        n = self.source.length
        per_sample = len(self.settings.experiments) * self.settings.epochs
        return None if n is None else n * per_sample

    def create(
        self,
        store: RunStore,
        run_id: str | None,
        manifest: DeferredManifest,
        *,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        """Create the stored run: its directory and results file now, `run.json` later.

        A store that cannot be written fails here, before any sample starts; `run.json`
        is written once the first samples wait on their calls (`DeferredManifest`).
        """
        s = self.settings
        config = {**(info or {}), "max_concurrent": s.max_concurrent, "timeout": s.timeout}
        self._manifest = manifest
        self.handle = manifest.handle = store.create(
            manifest.fingerprint, run_id=run_id, config=config, expected_results=self.planned,
            provenance=manifest.provenance, defer_manifest=True,
        )  # fmt: skip
        self.handle.expect_unique_keys()  # see `attach`
        self.run_id = self.handle.run_id

    def attach(
        self, store: RunStore, fingerprint: Fingerprint, resume: str, retry_errors: bool
    ) -> None:
        """Resume a stored run, reading back what it already holds."""
        if self.source.sha256 is None:
            raise ConfigurationError(
                "resuming needs the dataset's hash: pass a Dataset or a list, or the "
                "hash of a streamed dataset as dataset_sha256=dataset_sha256(path, I, E)"
            )
        self.handle = store.resume(resume, fingerprint)
        self.resumed = True
        self.done = self.handle.completed_keys(include_errors=not retry_errors)
        for result in self.handle.iter_results():
            if result.key in self.done:
                self.earlier[result.key] = slim(result)
        # This call runs each key once (the work skips the done ones), so the handle need
        # not remember the keys it is given: its memory stays flat however long the run.
        self.handle.expect_unique_keys()
        start = self.handle.results_path.stat().st_size
        self._offsets = (start, start, 0)
        self.run_id = self.handle.run_id

    async def execute(self) -> None:
        """Run every planned key not done yet; finish the stored run either way."""
        status: RunStatus = "interrupted"
        if self.max_cost is not None:
            # The budget is the run's: what a resumed run spent before counts.
            for earlier in self.earlier.values():
                self._spend(earlier)
        try:
            self.progress.start(self.planned, done=len(self.earlier))
            blocking = self._blocking_call()
            try:
                if blocking is None:
                    await self._run_tasks()
                else:
                    await self._run_threads(blocking)
            except BaseExceptionGroup as group:
                # Samples never raise (failures are results), so this is one broken
                # piece of configuration (dataset, store, progress sink) or a cancel:
                # surface it as itself rather than wrapped in a group.
                if len(group.exceptions) == 1:
                    raise group.exceptions[0] from None
                raise
            stopped = self.fail_fast.reason is not None or self.cost_stopped
            status = "interrupted" if stopped else "complete"
        finally:
            self._stopped = True  # worker threads left behind by a cancel take no more work
            self.progress.finish()
            if self.handle is not None:
                self.handle.finish(status, **self._final_manifest(status))
                end = self.handle.results_path.stat().st_size
                self._offsets = (self._offsets[0], end, next(self._appended))

    async def _run_tasks(self) -> None:
        """`max_concurrent` worker tasks; each sample is one hop to a thread (or awaited).

        With a target whose scoring can wait (`DeferrableTarget`) and nothing deciding on
        each result before the next sample starts (no cost cap, timeout or environment),
        workers start their next sample first and a finisher task scores and records
        (`DeferredScoring`): when many model waits end at once, the next calls start
        without waiting behind all the scoring, which runs while they wait.
        """
        limiter = anyio.CapacityLimiter(self.settings.max_concurrent)
        work = self._work()
        slots = self._slots()
        target = self.target
        deferred = None
        if (
            isinstance(target, DeferrableTarget)
            and target.deferrable
            and self.max_cost is None
            and self.settings.timeout is None
            and self.environment_factory is None
        ):
            deferred = DeferredScoring(
                target.start, self._request, self._complete_all, self.fail_fast, slots
            )
        async with anyio.create_task_group() as tg:
            if self._manifest is not None:
                tg.start_soon(self._manifest.publish_soon)
            run = functools.partial(self._worker, work, limiter)
            if deferred is not None:
                tg.start_soon(deferred.finisher)
                run = functools.partial(deferred.worker, work)
            await fan_out(run, slots, tg)

    def _slots(self) -> int:
        """Workers to start: `max_concurrent`, or fewer when less work than that is left."""
        planned = self.planned
        if planned is None:  # a stream of unknown length
            return self.settings.max_concurrent
        return max(1, min(self.settings.max_concurrent, planned - len(self.done)))

    def _work(self) -> Iterator[_Work]:
        # One generator shared by every worker task. `next()` on it never awaits, so the
        # tasks cannot interleave inside it; the sample-major order keeps the experiments
        # and epochs of one sample together. It yields what to run, not the request:
        # slot threads pull under a lock, and building the request (its id, its clock
        # reading) need not hold it.
        experiments, epochs, done = self.settings.experiments, self.settings.epochs, self.done
        capped = self.max_cost is not None
        for sample in self.source:
            for experiment in experiments:
                for epoch in range(epochs):
                    if done and (sample.id, experiment.name, epoch) in done:
                        continue
                    if capped and self._over_budget():
                        return
                    yield sample, experiment, epoch

    def _spend(self, result: EvalResult) -> None:
        """Add what `result` cost to `spent` (only when a `max_cost` is watched)."""
        cost = (result.cost or 0.0) + (result.judge_cost or 0.0)
        if cost:
            with self._spend_lock:
                self.spent += cost

    def _over_budget(self) -> bool:
        # Samples already running finish (their cost is spent); no new one starts.
        assert self.max_cost is not None
        with self._spend_lock:
            if self.spent >= self.max_cost:
                self.cost_stopped = True
        return self.cost_stopped

    def _request(self, item: _Work) -> EvalRequest[Any, Any]:
        sample, experiment, epoch = item
        return build_request(sample, experiment, epoch=epoch, run_id=self.run_id)

    def _blocking_call(self) -> Callable[[EvalRequest[Any, Any]], SampleOutcome] | None:
        """The target's blocking call, when whole samples can run in long-lived threads.

        That needs a target that runs entirely in a thread and no environments (their
        factory may be async). A timed-out sample abandons its slot thread (`SlotPool`).
        """
        if self.environment_factory is not None:
            return None
        return self.target.blocking

    async def _run_threads(self, call: Callable[[EvalRequest[Any, Any]], SampleOutcome]) -> None:
        """Up to `max_concurrent` long-lived threads, each looping over the shared work.

        One thread start per slot, none per sample: the threads take requests, run and
        record them (`SlotPool`: one thread until a call is seen to wait, timeouts). The
        event loop only waits (in one helper thread, the pool's monitor) and, with a
        progress sink, hands it the new results every `PROGRESS_INTERVAL` s, in order.
        """
        work, count, timeout = self._work(), self._slots(), self.settings.timeout
        # With a timeout, room for the threads of calls given up besides the slots.
        pool = WorkerThreads(count if timeout is None else _UNBOUNDED, name="wink-eval")
        context = contextvars.copy_context()
        slots: SlotPool

        def slot() -> None:
            self._thread_loop(call, work, slots, context)

        slots = SlotPool(pool, slot, slots=count, timeout=timeout, on_timeout=self._timed_out)
        if self._manifest is not None:  # before the threads start: a sample may read it
            self._manifest.publish()
        slots.start()
        watch = functools.partial(slots.watch, lambda: self._stopped, self._buffer.flush)
        finished = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                if not isinstance(self.progress, NullProgress):
                    tg.start_soon(self._forward_progress, finished)
                try:
                    await anyio.to_thread.run_sync(watch, abandon_on_cancel=True)
                finally:
                    finished.set()
        finally:
            self._stopped = True  # on a cancel, the slots stop after their current sample
            pool.shutdown(wait=False)
            self._buffer.flush(final=True)  # what the narrow slot buffered is recorded
            self._advance_progress()
        if self._failure is not None:
            raise self._failure

    async def _forward_progress(self, finished: anyio.Event) -> None:
        while not finished.is_set():
            with anyio.move_on_after(PROGRESS_INTERVAL):
                await finished.wait()
            self._advance_progress()

    def _advance_progress(self) -> None:
        """Give the progress sink the results recorded since the last call."""
        pending = self._pending
        while pending:
            self.progress.advance(pending.popleft())

    def _thread_loop(
        self,
        call: Callable[[EvalRequest[Any, Any]], SampleOutcome],
        work: Iterator[_Work],
        slots: SlotPool,
        context: contextvars.Context,
    ) -> None:
        stop, capped, finished = self.fail_fast.see, self.max_cost is not None, slots.finished
        keep, monotonic, timed = self._buffer.keep, self._clock.monotonic, self.settings.timeout
        try:
            while not self._stopped:
                with self._pull_lock:  # a generator cannot be advanced by two threads at once
                    item = next(work, None)
                if item is None:
                    return
                request = self._request(item)
                ticket = None if timed is None else slots.begin((request, monotonic()))
                # Each sample in its own copy of the caller's context, like a to_thread call.
                result = context.copy().run(call, request).result
                if ticket is not None and not slots.end(ticket):
                    return  # timed out: recorded as such; this thread is given up
                finished()
                if self._stopped:
                    return  # cancelled meanwhile: the late result is discarded
                if capped:
                    self._spend(result)
                keep(result, slots.wide)
                if stop(result):
                    self._stopped = True  # the other slots stop after their current sample
        except BaseException as exc:  # the dataset or the store broke: end the run with it
            if self._failure is None:
                self._failure = exc
            self._stopped = True

    def _timed_out(self, call: tuple[EvalRequest[Any, Any], float]) -> None:
        """Record the timeout of a slot thread's call (on the slot pool's monitor)."""
        result = self._timeout_result(*call)
        self._buffer.keep(result, True)
        self._stopped = self.fail_fast.see(result) or self._stopped

    def _timeout_result(self, request: EvalRequest[Any, Any], start: float) -> EvalResult:
        latency, timeout = (self._clock.monotonic() - start) * 1000.0, self.settings.timeout
        message = f"TimeoutError: the sample did not finish within its timeout of {timeout:g}s"
        return error_result(request, message, "timeout", latency, self.inputs)

    def _write(self, results: list[EvalResult]) -> None:
        """Record `results` with one write; queue them for the progress sink."""
        self._append(results)
        pending = self._pending
        if pending is not None:
            pending.extend(map(slim, results) if self.handle is not None else results)

    def _append(self, results: list[EvalResult]) -> None:
        """Record `results`: one write to the run store, or kept in memory without one."""
        handle = self.handle
        if handle is None:
            self.results.extend(results)
        else:
            handle.extend(results)
            for _ in results:
                next(self._appended)

    async def _worker(self, work: Iterator[_Work], limiter: anyio.CapacityLimiter) -> None:
        handle, results, advance = self.handle, self.results, self.progress.advance
        plain = self.settings.timeout is None and self.environment_factory is None
        run, request, stop = self.target.run, self._request, self.fail_fast.see
        capped, record, forward = self.max_cost is not None, self._record, self._pending is not None
        for item in work:
            if self.fail_fast.reason is not None:
                return  # stopping early: take no more work
            if plain:  # `_run_one` would add two coroutines per sample around this
                result = (await run(request(item), None, limiter)).result
            else:
                result = await self._run_one(request(item), limiter)
            if capped:
                self._spend(result)
            kept = record(handle, results, result)
            if forward:
                advance(kept)
            stop(result)

    def _complete_all(self, results: list[EvalResult]) -> None:
        """Record, count and report finished samples' results, in order, with one write."""
        handle, pending, capped, see = (
            self.handle,
            self._pending,
            self.max_cost is not None,
            self.fail_fast.see,
        )
        self._append(results)
        for result in results:
            if capped:
                self._spend(result)
            if pending is not None:
                self.progress.advance(slim(result) if handle is not None else result)
            see(result)

    def _record(
        self, handle: RunHandle | None, results: list[EvalResult], result: EvalResult
    ) -> EvalResult:
        """Append `result` to the store (and count it), or keep it.

        Returns `result` as the report sees it: slim with a store (made only when a
        progress sink will read it).
        """
        if handle is None:
            results.append(result)
            return result
        handle.append(result)
        next(self._appended)
        return slim(result) if self._pending is not None else result

    async def _run_one(
        self, request: EvalRequest[Any, Any], limiter: anyio.CapacityLimiter
    ) -> EvalResult:
        timeout = self.settings.timeout
        if timeout is None:
            return await self._attempt(request, limiter)
        start = self._clock.monotonic()
        with anyio.move_on_after(timeout):
            return await self._attempt(request, limiter)
        return self._timeout_result(request, start)

    async def _attempt(
        self, request: EvalRequest[Any, Any], limiter: anyio.CapacityLimiter
    ) -> EvalResult:
        factory = self.environment_factory
        if factory is None:
            return (await self.target.run(request, None, limiter)).result
        try:
            env = await create_environment(factory, request.sample)
        except Exception as exc:
            return error_result(request, _describe(exc), "environment", 0.0, self.inputs)
        result = (await self.target.run(request, env, limiter)).result
        try:
            state = await serialize_environment(env)
        except Exception as exc:
            if result.error is not None:
                return result  # the run's own error says more than the lost state
            message = f"environment could not be serialized: {_describe(exc)}"
            score = Score(value=0.0, passed=False, reason=message)
            return dataclasses.replace(result, error=message, error_kind="environment", score=score)
        return dataclasses.replace(result, environment=state)

    def _final_manifest(self, status: RunStatus) -> dict[str, Any]:
        # A complete streamed run's hash is known only now: `finish` writes it (and the
        # final count) into the manifest with the status, so the run's fingerprint names
        # its dataset (one manifest write, not two).
        assert self.handle is not None
        final: dict[str, Any] = {}
        if self._manifest is not None:  # git's answer, if it did not reach run.json yet
            final.update(self._manifest.final())
        sha256 = self.source.hashed_as_read
        if status != "complete" or sha256 is None:
            return final
        manifest = self._manifest  # a new run's from its parts: no write of run.json here
        fingerprint = self.handle.fingerprint if manifest is None else manifest.fingerprint()
        if fingerprint.dataset_sha256 != UNHASHED_STREAM:
            return final
        final["fingerprint"] = dataclasses.replace(fingerprint, dataset_sha256=sha256)
        final["expected_results"] = self.expected_count()
        return final

    def expected_count(self) -> int:
        """Results the run should hold: planned, or (a stream) per sample read so far."""
        if self.planned is not None:  # also when a fail-fast stop left samples unread
            return self.planned
        return self.source.count * len(self.settings.experiments) * self.settings.epochs

    def report(self, extra: Mapping[str, Any]) -> EvalReport:
        """The report: earlier results (resume) first, then this call's, in arrival order."""
        s = self.settings
        config: dict[str, Any] = {
            "run_id": self.run_id,
            **extra,
            "experiments": [e.name for e in s.experiments],
            "epochs": s.epochs,
            "max_concurrent": s.max_concurrent,
            "timeout": s.timeout,
            "samples": self.source.count,
            "dataset_sha256": self.source.sha256 or self.source.hashed_as_read,
            "store": str(self.handle.path) if self.handle is not None else None,
            "resumed": self.resumed,
            "skipped": len(self.earlier),
        }
        if self.fail_fast.reason is not None:
            config["stopped"] = self.fail_fast.reason
        if self.max_cost is not None:
            config["max_cost"] = self.max_cost
            config["cost_stopped"] = self.cost_stopped
            if self.cost_stopped and "stopped" not in config:
                config["stopped"] = (
                    f"--max-cost: the results cost ${self.spent:.6f}, reaching ${self.max_cost:g}"
                )
        results: tuple[EvalResult, ...] | StoredResults
        if self.handle is None:
            results = (*self.earlier.values(), *self.results)
        else:
            start, end, count = self._offsets
            results = StoredResults(
                self.handle.results_path, start=start, end=end, count=count,
                earlier=tuple(self.earlier.values()), transform=slim, report_fields=True,
                unique_keys=True, streamed=len(s.experiments) == 1 and s.epochs == 1,
                compact=len(s.experiments) > 1 or s.epochs > 1,
            )  # fmt: skip
        return EvalReport(
            results=results, expected_count=self.expected_count(), run_id=self.run_id,
            config=config,
        )  # fmt: skip


def _describe(exc: BaseException) -> str:
    return error_message(exc)
