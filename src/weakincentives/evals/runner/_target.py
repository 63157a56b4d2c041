"""How the local runner calls what it evaluates: an AgentLoop, a sync or an async function.

Every kind ends in `execute_sample`, so a sample is executed, scored and recorded the
same way whatever the target:

- an `AgentLoop` runs in a worker thread (`anyio.to_thread.run_sync` under the run's
  `CapacityLimiter`), its sync API unchanged;
- a sync function is wrapped in a `FunctionLoop` and runs the same way; when nothing
  reads the run's session (the function takes none, the evaluator is plain, no
  environment), `execute_function` calls it without making one;
- both also offer `blocking`, the whole sample as one blocking call: when a run has no
  environments, `LocalRun` starts up to `max_concurrent` long-lived threads that each
  loop over the shared work with it (one thread start per worker, no hop per sample;
  one thread until a call waits, timeouts: see `_slots`);
- an `AgentLoop` whose adapter is async (`loop.is_async`: `OpenAIAdapter`, a
  `FunctionAdapter` around an `async def` model) is awaited on the event loop through
  `loop.aexecute`: a sample in flight is a task, not a thread;
- an `async def` function is awaited on the event loop itself (no thread while it waits),
  recorded in a session with a `PromptExecuted` event like a `FunctionLoop` run, then
  scored by `score_finished` in a worker thread (evaluators are sync and may call a
  judge), or right there on the event loop when the evaluator is plain and marked
  `inline_evaluator` (it never blocks) and the sample has no environment: at high
  concurrency a thread hop per sample costs more than an exact match.

**Environments.** With an `environment_factory`, a task function gets the sample's
environment as its `env` argument; an `AgentLoop` finds it in the session, seeded under
its own type before the model runs (`session[MyEnv].latest()`, e.g. from a tool handler).

**Cancellation.** Worker threads are abandoned when their sample times out or the run is
cancelled: Python cannot stop a thread, so a stuck agent keeps its thread until it
returns, and its late result is discarded.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.lowlevel
import anyio.to_thread

from weakincentives.adapters import CacheableAdapter, PromptResponse, ResponseCache
from weakincentives.adapters.pricing import PriceTable
from weakincentives.clock import Clock
from weakincentives.errors import ConfigurationError
from weakincentives.runtime.agent_loop import AgentLoop, FunctionLoop, is_async_callable
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.session import PromptExecuted, Session
from weakincentives.runtime.threads import run_abandonable

from .._records import EvalRequest, RecordInputs, Score
from ..scoring import (
    is_session_aware,
    is_trajectory_scorer,
)
from ..store import qualified_name
from ._async_executor import scores_on_loop
from ._bundles import BundleOptions, keep_or_discard, open_bundle, record_bundle, with_bundle
from ._environment import Environment
from ._sample import (
    RECORD_INPUTS,
    SAMPLE_FAILURES,
    SampleOutcome,
    execute_function,
    execute_sample,
    score_finished,
    score_output,
    session_is_read,
)

__all__ = [
    "DeferrableTarget",
    "Finish",
    "SampleTarget",
    "TargetOptions",
    "make_target",
    "seed_environment",
]

# The environment of the sample a worker thread is running, for the `env=` argument of a
# sync task function. Each `to_thread.run_sync` call runs in its own copy of the context,
# so setting it in the thread is local to that one sample.
_CURRENT_ENV: ContextVar[Environment | None] = ContextVar("wink_sample_environment", default=None)


@dataclass(frozen=True, slots=True)
class TargetOptions:
    """Per-sample settings every target applies."""

    scorer: Callable[..., Score]
    """Evaluator or trajectory scorer (already wrapped by the runner)."""
    timeout: float | None
    """Per-sample deadline in seconds, handed to the agent as a `Deadline`."""
    budget: Budget | None
    """Token budget per sample."""
    record_transcript: bool
    """Keep messages and tool calls on each result."""
    clock: Clock
    """Clock for latencies and deadlines."""
    inputs: RecordInputs = RECORD_INPUTS
    """Whether results keep their sample's input and expected value, and how much."""
    bundles: BundleOptions | None = None
    """Write a debug bundle per sample (all, or the failed ones), if set."""
    prices: PriceTable | None = None
    """Prices for each result's cost (None: costs are not recorded)."""


Finish = Callable[[], SampleOutcome]
"""Scores and records a sample whose agent has run (see `DeferrableTarget.start`)."""


class SampleTarget(Protocol):
    """One way of running a sample; `run` never raises for a failing agent or evaluator."""

    @property
    def identity(self) -> str:
        """Qualified name of what is evaluated (part of the run fingerprint)."""
        ...

    async def run(
        self,
        request: EvalRequest[Any, Any],
        env: Environment | None,
        limiter: anyio.CapacityLimiter,
    ) -> SampleOutcome:
        """Execute and score `request`, with `env` when the run has environments."""
        ...

    @property
    def blocking(self) -> Callable[[EvalRequest[Any, Any]], SampleOutcome] | None:
        """The whole sample as one blocking call without environment, or None.

        None when part of the sample runs on the event loop (an async function).
        """
        ...


@runtime_checkable
class DeferrableTarget(SampleTarget, Protocol):
    """A target whose scoring can wait: `start` runs the agent, the scoring comes later.

    The local runner starts a latency-bound sample's successor before it scores the
    sample (see `LocalRun`): the scoring then overlaps the next model calls' waiting.
    """

    @property
    def deferrable(self) -> bool:
        """Whether `start` may be used (an inline scorer, no environment, no bundles)."""
        ...

    async def start(self, request: EvalRequest[Any, Any]) -> Finish:
        """Run the agent of `request` (no environment); return what scores it.

        The returned function never raises for a failing agent or evaluator, and does not
        block (the scorer is inline): call it on the event loop.
        """
        ...


def make_target(
    target: object,
    options: TargetOptions,
    *,
    with_environment: bool,
    cache: ResponseCache | None = None,
) -> SampleTarget:
    """Adapt `target` (an `AgentLoop` or a function) to the runner.

    Raises:
        ConfigurationError: `target` is neither; it needs an environment the run does not
            provide; or `cache` is given for a target whose adapter cannot take one.
    """
    if type(target) is FunctionLoop and target.is_async and cache is None:
        # An async function wrapped for EvalLoop: awaited on the event loop, like the
        # bare function (a thread per sample running its own event loop would not be).
        return _AsyncFunctionTarget(
            target.fn, options, qualified_name(target), target.takes_session, False
        )
    if isinstance(target, AgentLoop):
        loop = _with_cache(target, cache) if cache is not None else target
        if loop.is_async:
            return _AsyncLoopTarget(loop, options, qualified_name(target))
        return _LoopTarget(loop, options, qualified_name(target))
    if not callable(target):
        raise ConfigurationError(
            f"target must be an AgentLoop or a function of the sample input, "
            f"got {type(target).__name__}"
        )
    name = qualified_name(target)
    if cache is not None:
        raise ConfigurationError(
            f"cache= applies to an AgentLoop's adapter; target {name} is a plain function "
            "(give its model client a cache yourself, or leave cache= unset)"
        )
    params = _parameters(target)
    wants_env = "env" in params
    if wants_env and params["env"].default is inspect.Parameter.empty and not with_environment:
        raise ConfigurationError(
            f"target {name} takes an `env` argument but the run has no environment_factory; "
            "pass environment_factory=... (one environment per sample)"
        )
    wants_env = wants_env and with_environment
    if is_async_callable(target):
        return _AsyncFunctionTarget(target, options, name, "session" in params, wants_env)
    fn = _env_bound(target, "session" in params) if wants_env else target
    return _FunctionTarget(FunctionLoop(fn, name=name, clock=options.clock), options, name)


class _LoopTarget:
    """An `AgentLoop` (or a sync function's `FunctionLoop`) run in a worker thread."""

    def __init__(self, loop: AgentLoop[Any, Any], options: TargetOptions, identity: str) -> None:
        self._loop = loop
        self._options = options
        self._identity = identity

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def blocking(self) -> Callable[[EvalRequest[Any, Any]], SampleOutcome]:
        return functools.partial(self._execute, env=None)

    async def run(
        self,
        request: EvalRequest[Any, Any],
        env: Environment | None,
        limiter: anyio.CapacityLimiter,
    ) -> SampleOutcome:
        call = functools.partial(self._execute, request, env)
        if self._options.timeout is not None:  # a stuck sample must not hold the process
            return await run_abandonable(call, limiter)
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True, limiter=limiter)

    def _execute(self, request: EvalRequest[Any, Any], env: Environment | None) -> SampleOutcome:
        opts = self._options
        seed = None
        if env is not None:
            _CURRENT_ENV.set(env)
            seed = functools.partial(seed_environment, env)
        if opts.bundles is not None:
            return record_bundle(
                opts.bundles, request, opts.clock,
                lambda before: self._sample(request, _both(seed, before)),
            )  # fmt: skip
        return self._sample(request, seed)

    def _sample(
        self, request: EvalRequest[Any, Any], on_prepared: Callable[[Session], None] | None
    ) -> SampleOutcome:
        opts = self._options
        return execute_sample(
            self._loop, opts.scorer, request, timeout=opts.timeout, budget=opts.budget,
            record_transcript=opts.record_transcript, on_prepared=on_prepared, clock=opts.clock,
            inputs=opts.inputs,
            prices=opts.prices,
        )  # fmt: skip


class _FunctionTarget(_LoopTarget):
    """A sync task function: run by `execute_function` (no session when none is read).

    With an environment, the sample runs as a `_LoopTarget`'s does: its session holds it.
    """

    def __init__(self, loop: FunctionLoop[Any, Any], options: TargetOptions, identity: str) -> None:
        super().__init__(loop, options, identity)
        self._function_loop = loop
        self._session_read = session_is_read(loop, options.scorer)  # decided once

    def _execute(self, request: EvalRequest[Any, Any], env: Environment | None) -> SampleOutcome:
        if env is not None or self._options.bundles is not None:
            return super()._execute(request, env)
        opts = self._options
        return execute_function(
            self._function_loop, opts.scorer, request, timeout=opts.timeout,
            record_transcript=opts.record_transcript, clock=opts.clock, inputs=opts.inputs,
            prices=opts.prices, session_read=self._session_read,
        )  # fmt: skip


class _AsyncFunctionTarget:
    """An `async def` task function, awaited on the event loop, scored in a worker thread.

    A plain inline evaluator (see `inline_evaluator`) scores a sample without an
    environment on the event loop instead: same `score_finished`, no thread hop.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        options: TargetOptions,
        identity: str,
        wants_session: bool,
        wants_env: bool,
    ) -> None:
        self._fn = fn
        self._options = options
        self._identity = identity
        self._wants_session = wants_session
        self._wants_env = wants_env
        self._score_inline = scores_on_loop(options.scorer)
        scorer = options.scorer
        self._scorer_reads_session = is_trajectory_scorer(scorer) or is_session_aware(scorer)

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def blocking(self) -> None:
        return None  # the function is awaited on the event loop

    def run(
        self,
        request: EvalRequest[Any, Any],
        env: Environment | None,
        limiter: anyio.CapacityLimiter,
    ) -> Coroutine[Any, Any, SampleOutcome]:
        # Not itself a coroutine: it hands over the one that runs the sample (one
        # coroutine less per sample, which instant samples on the event loop notice).
        if self._options.bundles is not None:
            return self._run_with_bundle(request, env, limiter)
        if env is None and self._score_inline and not self._wants_session:
            return self._run_plain(request)
        return self._run_in_session(request, env, limiter)

    @property
    def deferrable(self) -> bool:
        return self._options.bundles is None and self._score_inline

    async def start(self, request: EvalRequest[Any, Any]) -> Finish:
        if not self._wants_session:
            return await self._start_plain(request)
        return await self._start_in_session(request, None, None)

    async def _run_with_bundle(
        self,
        request: EvalRequest[Any, Any],
        env: Environment | None,
        limiter: anyio.CapacityLimiter,
    ) -> SampleOutcome:
        options = self._options.bundles
        assert options is not None
        recorder = open_bundle(options, request, self._options.clock)
        with recorder as rec:
            rec.set_request(request)
            outcome = await self._run_in_session(request, env, limiter, rec.set_session_before)
            keep_or_discard(options, rec, outcome)
        return with_bundle(outcome, recorder)

    async def _run_in_session(
        self,
        request: EvalRequest[Any, Any],
        env: Environment | None,
        limiter: anyio.CapacityLimiter,
        on_prepared: Callable[[Session], None] | None = None,
    ) -> SampleOutcome:
        call = await self._start_in_session(request, env, on_prepared)
        if env is None and self._score_inline:
            outcome = call()
            # The thread hop was a checkpoint: keep one, so a function that never awaits
            # still lets other tasks run and a cancellation (or timeout) reach this one.
            await anyio.lowlevel.checkpoint()
            return outcome
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True, limiter=limiter)

    async def _start_in_session(
        self,
        request: EvalRequest[Any, Any],
        env: Environment | None,
        on_prepared: Callable[[Session], None] | None,
    ) -> Finish:
        opts = self._options
        session = Session(clock=opts.clock)
        session.dispatch(request.experiment)
        kwargs: dict[str, Any] = {}
        if env is not None:
            seed_environment(env, session)
            if self._wants_env:
                kwargs["env"] = env
        if on_prepared is not None:
            on_prepared(session)
        if self._wants_session:
            kwargs["session"] = session
        deadline = Deadline.after(opts.timeout, clock=opts.clock) if opts.timeout else None
        start = opts.clock.monotonic()
        run: tuple[PromptResponse[Any], Session] | BaseException
        try:
            output = await self._fn(request.sample.input, **kwargs)
            if deadline is not None:  # like FunctionLoop: a deadline on the run's clock
                deadline.check(f"function {self._identity}")
        except SAMPLE_FAILURES as exc:
            run = exc
        else:
            duration = (opts.clock.monotonic() - start) * 1000.0
            run = (_record_run(session, self._identity, output, duration), session)
        latency = (opts.clock.monotonic() - start) * 1000.0
        return functools.partial(
            score_finished, run, opts.scorer, request, latency_ms=latency,
            record_transcript=opts.record_transcript, inputs=opts.inputs,
            failed_session=session, prices=opts.prices,
            # Named only when something reads it (as `session_is_read` decides for sync runs).
            session_read=self._wants_session or self._scorer_reads_session
            or env is not None or on_prepared is not None,
        )  # fmt: skip

    async def _run_plain(self, request: EvalRequest[Any, Any]) -> SampleOutcome:
        outcome = (await self._start_plain(request))()
        await anyio.lowlevel.checkpoint()  # see `_run_in_session`: a cancel must reach it
        return outcome

    async def _start_plain(self, request: EvalRequest[Any, Any]) -> Finish:
        # Nothing reads a session (the function takes none, the scorer is plain and
        # inline, no environment): skip making one, as `execute_function` does.
        opts = self._options
        clock = opts.clock
        deadline = Deadline.after(opts.timeout, clock=clock) if opts.timeout else None
        start = clock.monotonic()
        try:
            output = await self._fn(request.sample.input)
            if deadline is not None:
                deadline.check(f"function {self._identity}")
        except SAMPLE_FAILURES as exc:
            latency = (clock.monotonic() - start) * 1000.0
            return functools.partial(
                score_finished, exc, opts.scorer, request, latency_ms=latency,
                record_transcript=opts.record_transcript, inputs=opts.inputs,
                prices=opts.prices,
            )  # fmt: skip
        latency = (clock.monotonic() - start) * 1000.0
        return functools.partial(
            score_output, output, opts.scorer, request, latency_ms=latency,
            record_transcript=opts.record_transcript, inputs=opts.inputs, prices=opts.prices,
        )  # fmt: skip


class _AsyncLoopTarget:
    """An `AgentLoop` on an async adapter: `aexecute` awaited on the event loop.

    Scored like `_AsyncFunctionTarget`: on the event loop for a plain inline evaluator
    without an environment, else in a worker thread under the run's limiter.
    """

    def __init__(self, loop: AgentLoop[Any, Any], options: TargetOptions, identity: str) -> None:
        self._loop = loop
        self._options = options
        self._identity = identity
        self._score_inline = scores_on_loop(options.scorer)

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def blocking(self) -> None:
        return None  # the agent is awaited on the event loop

    async def run(
        self,
        request: EvalRequest[Any, Any],
        env: Environment | None,
        limiter: anyio.CapacityLimiter,
    ) -> SampleOutcome:
        call = await self._start(request, env)
        if env is None and self._score_inline:
            outcome = call()
            await anyio.lowlevel.checkpoint()  # as `_AsyncFunctionTarget`: let others run
            return outcome
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True, limiter=limiter)

    @property
    def deferrable(self) -> bool:
        return self._score_inline and self._options.bundles is None

    def start(self, request: EvalRequest[Any, Any]) -> Coroutine[Any, Any, Finish]:
        return self._start(request, None)

    async def _start(self, request: EvalRequest[Any, Any], env: Environment | None) -> Finish:
        opts = self._options
        clock = opts.clock
        deadline = Deadline.after(opts.timeout, clock=clock) if opts.timeout else None
        prepared: list[Session] = []  # the run's session, kept for a failure's evidence

        def keep(session: Session) -> None:
            prepared.append(session)
            if env is not None:
                seed_environment(env, session)

        start = clock.monotonic()
        run: tuple[PromptResponse[Any], Session] | Exception
        try:
            run = await self._loop.aexecute(
                request.sample.input, experiment=request.experiment, deadline=deadline,
                budget=opts.budget, on_prepared=keep,
            )  # fmt: skip
        except Exception as exc:
            run = exc
        latency = (clock.monotonic() - start) * 1000.0
        return functools.partial(
            score_finished, run, opts.scorer, request, latency_ms=latency,
            record_transcript=opts.record_transcript, inputs=opts.inputs,
            failed_session=prepared[0] if prepared else None, prices=opts.prices,
        )  # fmt: skip


def seed_environment(env: Environment, session: Session) -> None:
    """Put `env` into `session` under its own type (`session[type(env)].latest()`)."""
    session[type(env)].seed((env,))


def _record_run(
    session: Session, name: str, output: Any, duration_ms: float
) -> PromptResponse[Any]:
    text = output if isinstance(output, str) else None
    session.dispatch(
        PromptExecuted(
            prompt_ns="function", prompt_key=name, prompt_name=name, text=text, output=output,
            duration_ms=duration_ms,
        )
    )  # fmt: skip
    return PromptResponse(prompt_name=name, text=text, output=output)


def _env_bound(fn: Callable[..., Any], wants_session: bool) -> Callable[..., Any]:
    """`fn` with `env=` filled from the worker thread's current sample."""

    def call(request: Any, session: Session) -> Any:
        kwargs: dict[str, Any] = {"env": _CURRENT_ENV.get()}
        if wants_session:
            kwargs["session"] = session
        return fn(request, **kwargs)

    return call


def _with_cache(loop: AgentLoop[Any, Any], cache: ResponseCache) -> AgentLoop[Any, Any]:
    """A shallow copy of `loop` whose adapter uses `cache` (the caller's loop is untouched)."""
    adapter = loop.adapter
    if not isinstance(adapter, CacheableAdapter):
        raise ConfigurationError(
            f"cache= cannot be applied: the adapter {type(adapter).__name__} of "
            f"{type(loop).__name__} has no `with_cache(cache)` method (see "
            "weakincentives.adapters.CacheableAdapter); configure caching on the adapter "
            "itself, or leave cache= unset"
        )
    clone = copy.copy(loop)
    clone.adapter = adapter.with_cache(cache)
    return clone


def _parameters(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}


def _both(
    first: Callable[[Session], None] | None, second: Callable[[Session], None]
) -> Callable[[Session], None]:
    if first is None:
        return second

    def both(session: Session) -> None:
        first(session)
        second(session)

    return both
