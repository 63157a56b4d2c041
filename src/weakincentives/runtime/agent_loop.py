"""`AgentLoop`: the production agent, and the thing `EvalLoop` evaluates.

Subclass it and implement `create_prompt` (and `create_session` if your sessions need
reducers or seeded state). `execute` prepares the prompt under an experiment, runs it
through the adapter, and returns the response with the session that recorded the run.
`aexecute` does the same on the running event loop: with an async adapter
(`is_async_adapter`: `OpenAIAdapter`, a `FunctionAdapter` around an `async def`) it awaits
`adapter.aevaluate`, so the local runner and `EvalLoop` run each sample as a task, not a
thread (`is_async` tells them); with a sync adapter it runs `execute` in a worker thread.
`run(requests)` serves a mailbox of `AgentLoopRequest`s (see `agent_worker`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from weakincentives import serde
from weakincentives.adapters import Heartbeat, PromptResponse, ProviderAdapter, is_async_adapter
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.prompt import Prompt, PromptOverridesStore
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.session import PromptExecuted, Session

if TYPE_CHECKING:
    from weakincentives.runtime.agent_worker import AgentLoopRequest, AgentLoopResult
    from weakincentives.runtime.bundle import DebugBundleConfig
    from weakincentives.runtime.dlq import DLQPolicy, RetryPolicy
    from weakincentives.runtime.lease import LeaseExtenderConfig
    from weakincentives.runtime.mailbox import Mailbox
    from weakincentives.runtime.worker import WorkerStats

__all__ = ["AgentLoop", "FunctionLoop", "MainLoop", "is_async_callable"]

RequestT = TypeVar("RequestT")
OutputT = TypeVar("OutputT")


class AgentLoop(Generic[RequestT, OutputT]):
    """Runs one request through a prompt and an adapter.

    Args:
        adapter: The provider adapter that runs prompts.
        overrides_store: Where experiments' prompt overrides come from (None: none).
        clock: Clock for sessions and deadlines.
        name: Name used in reports and run fingerprints (default: the class name).
        bus: Accepted and ignored, for loops written against the older `MainLoop` draft.
        requests: The mailbox `run()` serves when it is given none (the reference
            implementation's `AgentLoop(requests=...)`).
    """

    def __init__(
        self,
        *,
        adapter: ProviderAdapter,
        overrides_store: PromptOverridesStore | None = None,
        clock: Clock = SYSTEM_CLOCK,
        name: str | None = None,
        bus: object | None = None,
        requests: Mailbox[AgentLoopRequest[RequestT], AgentLoopResult[OutputT]] | None = None,
    ) -> None:
        del bus  # the older draft's event bus: sessions record events now
        self.requests = requests
        self.adapter = adapter
        self.overrides_store = overrides_store
        self.clock = clock
        self.name = name or type(self).__name__
        if not isinstance(adapter, _NoAdapter):  # an agent with prompts, not a FunctionLoop
            # The prompts' output and tool types (noted by each `PromptTemplate`) get their
            # validators and schemas now, not on the first sample of the first run.
            serde.prepare_pending()

    def create_prompt(self, request: RequestT) -> Prompt[OutputT]:
        """Build the bound prompt for `request`. Subclasses implement this."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement create_prompt(request) or override prepare()",
        )

    def create_session(self) -> Session:
        """Return a fresh session for one run (override to register reducers or seed)."""
        return Session(clock=self.clock)

    def prepare(
        self, request: RequestT, *, experiment: Experiment
    ) -> tuple[Prompt[OutputT], Session]:
        """Build the prompt and session for `request` under `experiment`.

        The experiment's `overrides_tag` is applied through `overrides_store`, and the
        experiment is dispatched into the session so tools can read its flags.
        """
        prompt = self.create_prompt(request)
        if self.overrides_store is not None:
            prompt = prompt.with_overrides(self.overrides_store, experiment.overrides_tag)
        session = self.create_session()
        session.dispatch(experiment)
        return prompt, session

    def finalize(
        self, prompt: Prompt[OutputT], session: Session, response: PromptResponse[OutputT]
    ) -> PromptResponse[OutputT]:
        """Post-process a finished run (default: return `response` unchanged)."""
        del prompt, session
        return response

    def execute(
        self,
        request: RequestT,
        *,
        experiment: Experiment | None = None,
        deadline: Deadline | float | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
        on_prepared: Callable[[Session], None] | None = None,
    ) -> tuple[PromptResponse[OutputT], Session]:
        """Run `request` and return the response and the session that recorded it.

        Args:
            request: The request to answer.
            experiment: Variant to run under (default `BASELINE`).
            deadline: A `Deadline`, or seconds from now.
            budget: Token limits for the run.
            heartbeat: Called between turns and tool calls.
            on_prepared: Called with the session once it is prepared, before the model
                runs (debug bundles snapshot "session before" here).

        Raises:
            DeadlineExceededError: the run passed its deadline.
            BudgetExceededError: the run used more tokens than `budget` allows.
            AdapterError: the provider failed for good.
        """
        exp = experiment or BASELINE
        if isinstance(deadline, int | float):
            deadline = Deadline.after(float(deadline), clock=self.clock)
        prompt, session = self.prepare(request, experiment=exp)
        if on_prepared is not None:
            on_prepared(session)
        response = self.adapter.evaluate(
            prompt, session=session, deadline=deadline, budget=budget, heartbeat=heartbeat
        )
        return self.finalize(prompt, session, response), session

    @property
    def is_async(self) -> bool:
        """Whether `aexecute` runs on the event loop without a thread.

        True when the adapter is async (`is_async_adapter`) and `execute` is not
        overridden (an override is user code `aexecute` would skip), or when a subclass
        overrides `aexecute` itself.
        """
        return type(self).aexecute is not AgentLoop.aexecute or self._awaits_adapter()

    def _awaits_adapter(self) -> bool:
        return type(self).execute is AgentLoop.execute and is_async_adapter(self.adapter)

    async def aexecute(
        self,
        request: RequestT,
        *,
        experiment: Experiment | None = None,
        deadline: Deadline | float | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
        on_prepared: Callable[[Session], None] | None = None,
    ) -> tuple[PromptResponse[OutputT], Session]:
        """`execute` from async code (same arguments, result and errors).

        With an async adapter the prompt runs on the running event loop through
        `adapter.aevaluate`; otherwise `execute` runs in a worker thread.
        """
        adapter: Any = self.adapter  # an AsyncProviderAdapter when the check below passes
        # `_awaits_adapter`, inlined: asked once per sample.
        if type(self).execute is not _EXECUTE or not is_async_adapter(adapter):
            call = functools.partial(
                self.execute, request, experiment=experiment, deadline=deadline,
                budget=budget, heartbeat=heartbeat, on_prepared=on_prepared,
            )  # fmt: skip
            import anyio.to_thread  # here: the sync API never pays for anyio's import

            return await anyio.to_thread.run_sync(call)
        if deadline is not None and isinstance(deadline, _SECONDS):
            deadline = Deadline.after(float(deadline), clock=self.clock)
        prompt, session = self.prepare(request, experiment=experiment or BASELINE)
        if on_prepared is not None:
            on_prepared(session)
        response = await adapter.aevaluate(
            prompt, session=session, deadline=deadline, budget=budget, heartbeat=heartbeat
        )
        return self.finalize(prompt, session, response), session

    def run(
        self,
        requests: Mailbox[AgentLoopRequest[RequestT], AgentLoopResult[OutputT]] | None = None,
        *,
        results: Mailbox[AgentLoopResult[OutputT], Any] | None = None,
        max_iterations: int | None = None,
        until_drained: bool = False,
        wait_time_seconds: float | None = None,
        visibility_timeout: float | None = None,
        max_concurrent: int = 1,
        retry: RetryPolicy | None = None,
        dlq: DLQPolicy[AgentLoopRequest[RequestT]] | None = None,
        lease: LeaseExtenderConfig | None = None,
        debug_bundle: DebugBundleConfig | None = None,
    ) -> WorkerStats:
        """Serve `requests` as a mailbox worker: answer each `AgentLoopRequest` (blocks).

        Each request runs through `execute` under its experiment, deadline and budget;
        the `AgentLoopResult` goes to the message's `reply_to` (or to `results`). To stop
        the worker from another thread, or to run it in a `LoopGroup`, build the
        `AgentLoopWorker` yourself: `AgentLoopWorker(loop, requests=...)`.

        Args:
            requests: Mailbox of `AgentLoopRequest`s (default: the loop's `requests=`).
            results: Where answers go when a request has no `reply_to`.
            max_iterations: Receives to make (None: no limit).
            until_drained: Stop once the mailbox is empty and no request runs.
            wait_time_seconds: Long poll of each receive (default 20 s).
            visibility_timeout: Visibility timeout of each receive (default 300 s).
            max_concurrent: Requests in flight at once.
            retry: Retry limit and backoff for transient failures.
            dlq: Dead-letter policy (undecodable bodies go there at once).
            lease: Heartbeat-driven visibility extension.
            debug_bundle: Write one debug bundle per request.

        Returns:
            What the worker did (received, succeeded, retried, dead-lettered...).

        Raises:
            ConfigurationError: no mailbox here and none given to the constructor.
        """
        requests = requests if requests is not None else self.requests
        if requests is None:
            raise ConfigurationError(
                f"{type(self).__name__}.run() has no mailbox to serve: pass run(requests) "
                f"or build the loop with requests=",
            )
        # The mailbox worker machinery is imported by a loop that serves a mailbox, not by
        # every program that runs an agent (or evaluates one) in-process.
        from weakincentives.runtime.agent_worker import AgentLoopWorker

        worker = AgentLoopWorker(
            self,
            requests=requests,
            results=results,
            max_concurrent=max_concurrent,
            retry=retry,
            dlq=dlq,
            lease=lease,
            debug_bundle=debug_bundle,
        )
        worker.run(
            max_iterations=max_iterations,
            until_drained=until_drained,
            wait_time_seconds=wait_time_seconds,
            visibility_timeout=visibility_timeout,
        )
        return worker.stats


MainLoop = AgentLoop
"""The older draft's name for `AgentLoop`; same class, same hooks."""

_EXECUTE = AgentLoop.execute
_SECONDS = (int, float)  # a deadline given as seconds from now (a tuple: no union per call)


class FunctionLoop(AgentLoop[RequestT, OutputT]):
    """An `AgentLoop` around a plain callable, for targets that are not prompt-based.

    `fn(request)` returns the output; if `fn` takes a `session` keyword it gets the run's
    session too (to dispatch its own events). A `PromptExecuted` event records the run.

    `fn` may be an `async def` (or an object with an `async def __call__`): `aexecute`
    awaits it, and `EvalLoop` then runs its samples as tasks on one event loop instead
    of one thread each. `execute` runs an async `fn` to completion in a fresh event loop
    (it refuses inside a running one: await `aexecute` there).

    Examples:
        >>> loop = FunctionLoop(lambda q: q.upper())
        >>> loop.execute("hi")[0].output
        'HI'
        >>> async def shout(q: str) -> str:
        ...     return q.upper() + "!"
        >>> FunctionLoop(shout).execute("hi")[0].output
        'HI!'
    """

    def __init__(
        self,
        fn: Callable[..., OutputT] | Callable[..., Awaitable[OutputT]],
        *,
        name: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(adapter=_NoAdapter(), clock=clock, name=name or _fn_name(fn))
        self.fn: Callable[..., Any] = fn
        try:
            parameters = inspect.signature(fn).parameters
        except (TypeError, ValueError):  # builtins such as `str` have none: called fn(request)
            parameters = MappingProxyType({})
        self._wants_session = "session" in parameters
        self._is_async = is_async_callable(fn)

    @property
    def takes_session(self) -> bool:
        """Whether `fn` takes the run's session (it has a `session` parameter)."""
        return self._wants_session

    @property
    def is_async(self) -> bool:
        """Whether `fn` is an `async def` (awaited by `aexecute`)."""
        return self._is_async

    def execute(
        self,
        request: RequestT,
        *,
        experiment: Experiment | None = None,
        deadline: Deadline | float | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
        on_prepared: Callable[[Session], None] | None = None,
    ) -> tuple[PromptResponse[OutputT], Session]:
        """Call the function under `experiment` (deadline is checked after the call).

        Raises:
            ConfigurationError: `fn` is async and an event loop runs in this thread.
        """
        del budget, heartbeat
        if self._is_async:
            _no_running_loop(self.name)
            return asyncio.run(
                self.aexecute(
                    request, experiment=experiment, deadline=deadline, on_prepared=on_prepared
                )
            )
        deadline = self._deadline(deadline)
        session = self._start(experiment, on_prepared)
        start = self.clock.monotonic()
        output = self.fn(request, session=session) if self._wants_session else self.fn(request)
        return self._finish(session, output, start, deadline), session

    async def aexecute(
        self,
        request: RequestT,
        *,
        experiment: Experiment | None = None,
        deadline: Deadline | float | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
        on_prepared: Callable[[Session], None] | None = None,
    ) -> tuple[PromptResponse[OutputT], Session]:
        """`execute` on the running event loop: an async `fn` is awaited, a sync one called."""
        del budget, heartbeat
        deadline = self._deadline(deadline)
        session = self._start(experiment, on_prepared)
        start = self.clock.monotonic()
        output = self.fn(request, session=session) if self._wants_session else self.fn(request)
        if self._is_async:
            output = await output
        return self._finish(session, output, start, deadline), session

    def _deadline(self, deadline: Deadline | float | None) -> Deadline | None:
        if isinstance(deadline, int | float):
            return Deadline.after(float(deadline), clock=self.clock)
        return deadline

    def _start(
        self, experiment: Experiment | None, on_prepared: Callable[[Session], None] | None
    ) -> Session:
        session = self.create_session()
        session.dispatch(experiment or BASELINE)
        if on_prepared is not None:
            on_prepared(session)
        return session

    def _finish(
        self, session: Session, output: Any, start: float, deadline: Deadline | None
    ) -> PromptResponse[OutputT]:
        name = self.name
        if deadline is not None:
            deadline.check(f"function {name}")
        text = output if isinstance(output, str) else None
        session.dispatch(
            PromptExecuted(
                prompt_ns="function",
                prompt_key=name,
                prompt_name=name,
                text=text,
                output=output,
                duration_ms=(self.clock.monotonic() - start) * 1000.0,
            ),
        )
        return PromptResponse(prompt_name=name, text=text, output=output)


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` returns a coroutine (an `async def`, or an async `__call__`)."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _no_running_loop(name: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise ConfigurationError(
        f"FunctionLoop {name}: the function is async and an event loop is already running "
        "in this thread; use `await loop.aexecute(...)` there"
    )


class _NoAdapter:
    def evaluate(self, prompt: Prompt[OutputT], **_: Any) -> PromptResponse[OutputT]:
        raise NotImplementedError("FunctionLoop does not use an adapter")


def _fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__
