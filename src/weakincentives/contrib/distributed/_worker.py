"""The worker side: serve an `EvalLoop` (and the production `AgentLoop`) from Redis.

`wink worker module:factory --redis URL` is a thin shell around `DistributedWorker`.
The factory returns a `WorkerSpec` (the agent, its evaluator, the sample types); the
worker decodes requests as `EvalRequest[input_type, expected_type]` from a shared
`RedisMailbox`, replies each result to the request's `reply_to` (a run-specific
mailbox, resolved by name through a `RedisMailboxFactory`), dead-letters what cannot be
decoded or keeps failing, serves `/health/live` and `/health/ready`, and stops
gracefully on SIGTERM: samples in flight finish (or, after `shutdown_timeout`, are
returned to the queue), so another worker takes them.

A worker killed outright (SIGKILL, a lost machine) loses nothing either: its messages
come back when their visibility timeout passes, and the duplicate results that may
follow are dropped by request id on the collecting side.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.contrib.mailbox import RedisMailbox, RedisMailboxFactory
from weakincentives.errors import ConfigurationError, MailboxConnectionError
from weakincentives.evals import EvalLoop, EvalLoopConfig, EvalRequest, Score
from weakincentives.runtime import (
    AgentLoopRequest,
    AgentLoopWorker,
    DLQPolicy,
    LoopGroup,
    MailboxWorker,
    RetryPolicy,
)
from weakincentives.runtime.mailbox import MAX_WAIT_SECONDS, CompositeResolver, check_timeout

if TYPE_CHECKING:
    from weakincentives.runtime import AgentLoop

__all__ = [
    "DistributedWorker",
    "WorkerContext",
    "WorkerOptions",
    "WorkerSpec",
    "resolve_worker_spec",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSpec:
    """What a worker serves: the production agent, how to score it, the data types.

    A worker factory (the `module:factory` of `wink worker`) returns one.

    Examples:
        ```python
        def worker(context: WorkerContext) -> WorkerSpec:
            adapter = OpenAIAdapter(model="gpt-4o", cache=RedisResponseCache(context.client))
            return WorkerSpec(loop=MyAgent(adapter=adapter), evaluator=exact_match,
                              input_type=Question, expected_type=str)
        ```
    """

    loop: AgentLoop[Any, Any]
    """The agent under evaluation: the same loop production runs."""
    evaluator: Callable[..., Score]
    """`(output, expected) -> Score`, or session-aware `(output, expected, session)`."""
    input_type: Any = Any
    """Type of `Sample.input`; requests decode as `EvalRequest[input_type, expected_type]`
    (`Any`: plain JSON values)."""
    expected_type: Any = Any
    """Type of `Sample.expected`."""
    request_type: Any = None
    """Type of production requests, served as `AgentLoopRequest[request_type]` with
    `--agent` (None: `input_type`)."""
    config: EvalLoopConfig | None = None
    """Per-sample settings: timeout, token budget, debug bundles, lease extension."""
    retry: RetryPolicy | None = None
    """Retry limit and backoff for transient agent failures (default `RetryPolicy()`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerContext:
    """What a worker factory gets to build its `WorkerSpec` (when it takes an argument)."""

    client: Any
    """The worker's redis-py client: share it, e.g. `RedisResponseCache(context.client)`."""
    namespace: str = "wink"
    """Key prefix of the worker's mailboxes."""
    redis_url: str | None = None
    """The URL the client was made from, if any."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerOptions:
    """Where a `DistributedWorker` gets its work and how it runs (the `wink worker` flags)."""

    requests: str = "eval-requests"
    """Name of the mailbox of `EvalRequest`s."""
    namespace: str = "wink"
    """Key prefix of every mailbox (clients must use the same)."""
    concurrency: int = 1
    """Samples evaluated at once (threads; the agent waits on its model most of the time)."""
    dlq: str | None = None
    """Dead-letter mailbox (None: `<requests>-dlq`)."""
    max_deliveries: int = 5
    """Deliveries after which a failing message is dead-lettered."""
    visibility_timeout: float = 300.0
    """Seconds a received message stays hidden; a killed worker's messages come back
    after it. Keep it above the longest sample, or configure lease extension."""
    wait_time_seconds: float = MAX_WAIT_SECONDS
    """Long poll of each receive."""
    agent_requests: str | None = None
    """Also serve the `AgentLoop` on this mailbox of `AgentLoopRequest`s (None: don't)."""
    health_port: int | None = None
    """Port of `/health/live` and `/health/ready` (0: any free port; None: no server)."""
    health_host: str = "127.0.0.1"
    """Interface of the health server."""
    shutdown_timeout: float = 30.0
    """Seconds samples in flight get to finish on SIGTERM before they are returned."""
    watchdog_timeout: float = 60.0
    """A loop without a heartbeat for this long is reported stalled (not ready)."""

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.max_deliveries < 1:
            raise ConfigurationError(
                f"concurrency and max_deliveries must be >= 1, got {self.concurrency} and "
                f"{self.max_deliveries}",
            )
        if not self.requests or self.requests == self.agent_requests:
            raise ConfigurationError(
                f"the requests mailbox needs a name of its own, got {self.requests!r} "
                f"(agent requests: {self.agent_requests!r})",
            )
        check_timeout("visibility_timeout", self.visibility_timeout)
        check_timeout("wait_time_seconds", self.wait_time_seconds, maximum=MAX_WAIT_SECONDS)
        if self.shutdown_timeout < 0:
            raise ConfigurationError(f"shutdown_timeout must be >= 0, got {self.shutdown_timeout}")

    @property
    def dlq_name(self) -> str:
        """The dead-letter mailbox's name."""
        return self.dlq or f"{self.requests}-dlq"


def resolve_worker_spec(obj: object, context: WorkerContext) -> WorkerSpec:
    """Turn what a `wink worker` reference names into a `WorkerSpec`.

    `obj` may be a `WorkerSpec`, or a factory returning one that takes no argument or
    one (the `WorkerContext`).

    Raises:
        ConfigurationError: `obj` is neither, or the factory returned something else.
    """
    if isinstance(obj, WorkerSpec):
        return obj
    if not callable(obj):
        raise ConfigurationError(
            f"a worker target must be a WorkerSpec or a factory returning one, got a "
            f"{type(obj).__name__}",
        )
    try:
        required = [
            p
            for p in inspect.signature(obj).parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):  # a builtin without a signature: try without args
        required = []
    name = getattr(obj, "__qualname__", repr(obj))
    if len(required) > 1 or (required and not _takes_context(required[0])):
        listed = ", ".join(p.name for p in required)
        count = f"{len(required)} argument{'s' if len(required) > 1 else ''}"
        raise ConfigurationError(
            f"worker target {name} takes {count} ({listed}), so it is not a worker factory: "
            "a factory takes no "
            "argument or one WorkerContext and returns a WorkerSpec; to serve a task "
            "function, write `def worker() -> WorkerSpec: return WorkerSpec("
            f"loop=FunctionLoop({name}), evaluator=exact_match)` and name that",
        )
    try:
        spec = obj(context) if required else obj()
    except Exception as exc:
        raise ConfigurationError(
            f"worker factory {name} raised {type(exc).__name__}: {exc}",
        ) from exc
    if not isinstance(spec, WorkerSpec):
        raise ConfigurationError(
            f"worker factory {name} returned a {type(spec).__name__}, not a WorkerSpec; "
            "return WorkerSpec(loop=..., evaluator=..., input_type=..., expected_type=...)",
        )
    return spec


def _takes_context(parameter: inspect.Parameter) -> bool:
    """Whether a factory's one parameter can be the `WorkerContext` (by its annotation)."""
    annotation = parameter.annotation
    if annotation is parameter.empty:
        return True  # unannotated: take the factory at its word
    if isinstance(annotation, str):  # `from __future__ import annotations`
        return annotation.rsplit(".", 1)[-1] in {"WorkerContext", "Any", "object"}
    return annotation in (WorkerContext, Any, object)


class DistributedWorker:
    """An `EvalLoop` (and optionally an `AgentLoopWorker`) over Redis, in a `LoopGroup`.

    Args:
        spec: What to serve.
        client: A redis-py client (`redis_client(url)` makes one that reconnects).
        options: Mailbox names, concurrency, timeouts, health port.
        clock: Clock of the loops and the watchdog.

    Examples:
        ```python
        worker = DistributedWorker(spec, client=redis_client(url))
        worker.run()  # until SIGTERM
        ```
    """

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        client: Any,
        options: WorkerOptions | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.options = options = options or WorkerOptions()
        self.spec = spec
        self._client = client
        self._resolver: CompositeResolver[Any] = CompositeResolver(
            registry={}, factory=RedisMailboxFactory(client=client, namespace=options.namespace)
        )
        self.requests = self._mailbox(
            options.requests, _parametrize(EvalRequest, spec.input_type, spec.expected_type)
        )
        self.dead_letters = self._mailbox(options.dlq_name)
        self.eval_loop = EvalLoop(
            loop=spec.loop,
            evaluator=spec.evaluator,
            requests=self.requests,
            config=spec.config,
            dlq=self._dlq_policy(),
            max_concurrent=options.concurrency,
            retry=spec.retry,
            clock=clock,
        )
        self._mailboxes = [self.requests, self.dead_letters]
        loops = [_ReceivingLoop(self.eval_loop, options)]
        self.agent_worker: AgentLoopWorker | None = None
        if options.agent_requests is not None:
            self.agent_worker = self._agent_worker(options.agent_requests, clock)
            loops.append(_ReceivingLoop(self.agent_worker, options))
        self.group = LoopGroup(
            loops,
            health_port=options.health_port,
            health_host=options.health_host,
            watchdog_timeout=options.watchdog_timeout,
            shutdown_timeout=options.shutdown_timeout,
            clock=clock,
        )

    def _mailbox(self, name: str, body_type: Any = None) -> RedisMailbox[Any, Any]:
        return RedisMailbox(
            name,
            client=self._client,
            namespace=self.options.namespace,
            body_type=body_type,
            reply_resolver=self._resolver,
        )

    def _agent_worker(self, name: str, clock: Clock) -> AgentLoopWorker:
        spec = self.spec
        request_type = spec.input_type if spec.request_type is None else spec.request_type
        requests = self._mailbox(name, _parametrize(AgentLoopRequest, request_type))
        self._mailboxes.append(requests)
        return AgentLoopWorker(
            spec.loop,
            requests=requests,
            clock=clock,
            max_concurrent=self.options.concurrency,
            retry=spec.retry,
            dlq=self._dlq_policy(),
            lease=spec.config.lease_extender if spec.config else None,
            visibility_timeout=self.options.visibility_timeout,
            wait_time_seconds=self.options.wait_time_seconds,
        )

    def _dlq_policy(self) -> DLQPolicy[Any]:
        # A connection error says nothing about the message: retry it however long the
        # outage lasts instead of dead-lettering work that never ran.
        return DLQPolicy(
            self.dead_letters,
            max_deliveries=self.options.max_deliveries,
            never_dead_letter=(MailboxConnectionError,),
        )

    @property
    def health_address(self) -> tuple[str, int] | None:
        """(host, port) of the health server once started (None: no server)."""
        return self.group.health_address

    def start(self) -> None:
        """Start the loops, the health server and the watchdog in threads."""
        self._announce()
        self.group.start()

    def run(self) -> bool:
        """Serve until SIGTERM or SIGINT (on the main thread), then stop gracefully.

        Returns:
            True when no loop ended with an error.
        """
        self._announce()
        try:
            self.group.run()
        finally:
            self._close()
        for name, error in self.group.errors.items():
            _log.error("loop %s failed: %r", name, error)
        return not self.group.errors

    def _announce(self) -> None:
        _log.info(
            "serving %s (%s) from mailbox %r with %d slot(s)%s",
            self.spec.loop.name,
            getattr(self.spec.evaluator, "__name__", "evaluator"),
            self.options.requests,
            self.options.concurrency,
            f" and agent requests from {self.options.agent_requests!r}"
            if self.options.agent_requests
            else "",
        )

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop receiving, let samples in flight finish (up to `timeout`), stop.

        Returns:
            True if every loop stopped cleanly within `timeout`.
        """
        try:
            return self.group.shutdown(timeout)
        finally:
            self._close()

    def _close(self) -> None:
        for mailbox in self._mailboxes:
            mailbox.close()


class _ReceivingLoop:
    """A `Loop` for `LoopGroup` that runs a worker with the options' receive settings.

    (`EvalLoop` takes its visibility timeout and long poll per `run()` call only.)
    """

    def __init__(self, worker: MailboxWorker[Any, Any], options: WorkerOptions) -> None:
        self._worker = worker
        self._options = options

    @property
    def name(self) -> str:
        return self._worker.name

    @property
    def running(self) -> bool:
        return self._worker.running

    @property
    def last_heartbeat(self) -> float | None:
        return self._worker.last_heartbeat

    def run(self) -> None:
        self._worker.run(
            visibility_timeout=self._options.visibility_timeout,
            wait_time_seconds=self._options.wait_time_seconds,
        )

    def shutdown(self, timeout: float = 30.0) -> bool:
        return self._worker.shutdown(timeout)


def _parametrize(generic: Any, *args: Any) -> Any:
    """`generic[args]`, built at run time from type arguments held in variables."""
    return generic[args if len(args) > 1 else args[0]]
