"""`AgentLoopWorker`: serve an `AgentLoop` from a mailbox.

Production traffic reaches the agent as `AgentLoopRequest`s in a mailbox. The worker
runs each through the loop under the request's experiment and replies an
`AgentLoopResult` to the message's `reply_to` (or to its `results` mailbox).
`AgentLoop.run(requests)` is the short form; hand the worker itself to a `LoopGroup` to
run it beside an `EvalLoop`.

Failures are data: an agent that raises, passes its deadline or its token budget is
answered with a result that carries the error and its kind. Only transient failures
(`TRANSIENT_ERRORS`: connection errors, provider timeouts, rate limits, 5xx) are
retried, through the worker's retry and dead-letter policies, and the last allowed
delivery answers with the error. A body that is not an `AgentLoopRequest` goes to the
dead-letter queue at once.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from weakincentives.errors import (
    AdapterConnectionError,
    AdapterTimeoutError,
    BudgetExceededError,
    ConfigurationError,
    DeadlineExceededError,
    MailboxConnectionError,
    MessageDecodeError,
    ProviderServerError,
    RateLimitError,
)
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.runtime.bundle import DebugBundleConfig, bundle_recorder
from weakincentives.runtime.dlq import DLQPolicy, RetryPolicy, failure_action
from weakincentives.runtime.lease import LeaseExtenderConfig, WorkerHeartbeat
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.mailbox import MAX_WAIT_SECONDS, Mailbox, Message
from weakincentives.runtime.session import TokenUsage
from weakincentives.runtime.worker import MailboxWorker

if TYPE_CHECKING:
    from collections.abc import Callable

    from weakincentives.adapters import Heartbeat, PromptResponse
    from weakincentives.clock import Clock
    from weakincentives.runtime.session import Session

__all__ = [
    "TRANSIENT_ERRORS",
    "AgentErrorKind",
    "AgentLoopRequest",
    "AgentLoopResult",
    "AgentLoopWorker",
    "reply_target",
    "should_retry",
    "with_decode_errors_dead_lettered",
]

RequestT = TypeVar("RequestT")
OutputT = TypeVar("OutputT")
T = TypeVar("T")

_log = logging.getLogger(__name__)

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    AdapterConnectionError,
    AdapterTimeoutError,
    RateLimitError,
    ProviderServerError,
    MailboxConnectionError,
)
"""Agent failures worth another delivery while the retry and dead-letter policies allow."""

AgentErrorKind = Literal["agent", "timeout", "budget"]
"""Why a request has no answer: the agent raised (`agent`), passed its deadline or a
provider timed out for good (`timeout`), or it used more tokens than its budget
(`budget`)."""


# No slots on generic values: `AgentLoopRequest[str](...)` sets __orig_class__, which
# slotted frozen dataclasses reject.
@dataclass(frozen=True)
class AgentLoopRequest(Generic[RequestT]):
    """One request for an `AgentLoopWorker`: what to answer, and under which experiment.

    Examples:
        >>> AgentLoopRequest("What is 2 + 2?").experiment.name
        'baseline'
    """

    request: RequestT
    """The request the loop answers (what `AgentLoop.execute` takes)."""
    experiment: Experiment = BASELINE
    """The variant to run under."""
    request_id: uuid.UUID = field(default_factory=uuid.uuid4)
    """Unique id, copied to the result so the sender can match answers to requests."""
    deadline_seconds: float | None = None
    """Seconds the run may take, counted from when a worker starts it (None: no limit)."""
    budget: Budget | None = None
    """Token limits for the run (None: unlimited)."""

    def __post_init__(self) -> None:
        if self.deadline_seconds is not None and not self.deadline_seconds > 0:
            raise ConfigurationError(
                f"deadline_seconds must be > 0 or None, got {self.deadline_seconds!r}",
            )


@dataclass(frozen=True, kw_only=True)
class AgentLoopResult(Generic[OutputT]):
    """The answer to one `AgentLoopRequest`: the output, or the error that replaced it."""

    request_id: uuid.UUID
    """Id of the request answered."""
    output: OutputT | None
    """Structured output (None for text prompts and errors)."""
    text: str | None
    """Final assistant text (None for errors)."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    """Tokens the run used."""
    error: str | None = None
    """`Type: message` of the error that ended the run, if any."""
    error_kind: AgentErrorKind | None = None
    """Which kind of failure (see `AgentErrorKind`); None when the run succeeded."""
    delivery_count: int = 1
    """Deliveries of the request before this answer (1 = first try)."""

    @property
    def ok(self) -> bool:
        """Whether the run succeeded."""
        return self.error is None


def should_retry(
    error: BaseException,
    delivery_count: int,
    *,
    transient: tuple[type[BaseException], ...],
    retry: RetryPolicy,
    dlq: DLQPolicy[Any] | None,
) -> bool:
    """Whether a handler should raise `error` for another delivery instead of answering.

    True when `error` is transient and the worker would retry it (`failure_action`
    says `retry`), so raising it never leads to a dead-lettered, unanswered message.
    """
    if not isinstance(error, transient):
        return False
    return failure_action(error, delivery_count, retry=retry, dlq=dlq) == "retry"


def with_decode_errors_dead_lettered(dlq: DLQPolicy[T] | None) -> DLQPolicy[T] | None:
    """Return `dlq` with `MessageDecodeError` among the errors dead-lettered at once.

    A body of the wrong type will not decode better on a second delivery.
    """
    if dlq is None or any(issubclass(MessageDecodeError, t) for t in dlq.dead_letter_on):
        return dlq
    return dataclasses.replace(dlq, dead_letter_on=(*dlq.dead_letter_on, MessageDecodeError))


def reply_target(
    message: Message[Any, Any], results: Mailbox[Any, Any] | None
) -> Mailbox[Any, Any] | None:
    """Where the answer to `message` goes: its `reply_to`, else `results`, else nowhere.

    Called before the work starts, so a reply-to name that cannot be resolved fails the
    delivery before any work is spent on it.

    Raises:
        MailboxResolutionError: The reply-to name cannot be resolved.
    """
    target = message.reply_to
    return target if target is not None else results


class _ServedLoop(Protocol):
    """What the worker needs of an `AgentLoop` (a Protocol: `agent_loop` imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def clock(self) -> Clock: ...

    def execute(
        self,
        request: Any,
        *,
        experiment: Experiment | None = None,
        deadline: Deadline | float | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
        on_prepared: Callable[[Session], None] | None = None,
    ) -> tuple[PromptResponse[Any], Session]: ...


class AgentLoopWorker(MailboxWorker[AgentLoopRequest[Any], AgentLoopResult[Any]]):
    """Answers `AgentLoopRequest`s from `requests` with `loop` (see the module docstring).

    Args:
        loop: The agent.
        requests: Mailbox of `AgentLoopRequest`s.
        results: Where answers go when a request has no `reply_to` (None: dropped with a
            warning).
        name: Name in logs and health reports (default: `<loop name>(<mailbox name>)`).
        clock: Clock for deadlines and heartbeats (default: the loop's).
        max_concurrent: Requests in flight at once.
        retry: Retry limit and backoff for transient failures.
        dlq: Dead-letter policy; with one, bodies that are not `AgentLoopRequest`s go there
            at once and transient failures are retried up to `dlq.max_deliveries`.
        lease: Heartbeat-driven visibility extension while a request runs.
        debug_bundle: Write one debug bundle (kind `agent`) per request.
        transient_errors: Agent exceptions retried before an error is answered.
        visibility_timeout: Visibility timeout of each receive.
        wait_time_seconds: Long poll of each receive.

    Examples:
        ```python
        worker = AgentLoopWorker(loop, requests=prod_requests)
        LoopGroup([worker, eval_loop], health_port=8080).run()
        ```
    """

    def __init__(
        self,
        loop: _ServedLoop,
        *,
        requests: Mailbox[AgentLoopRequest[Any], AgentLoopResult[Any]],
        results: Mailbox[AgentLoopResult[Any], Any] | None = None,
        name: str | None = None,
        clock: Clock | None = None,
        max_concurrent: int = 1,
        retry: RetryPolicy | None = None,
        dlq: DLQPolicy[AgentLoopRequest[Any]] | None = None,
        lease: LeaseExtenderConfig | None = None,
        debug_bundle: DebugBundleConfig | None = None,
        transient_errors: tuple[type[BaseException], ...] = TRANSIENT_ERRORS,
        visibility_timeout: float = 300.0,
        wait_time_seconds: float = MAX_WAIT_SECONDS,
    ) -> None:
        self._retry_policy = retry or RetryPolicy()
        self._dlq_policy = with_decode_errors_dead_lettered(dlq)
        super().__init__(
            requests=requests,
            name=name or f"{loop.name}({requests.name})",
            clock=clock or loop.clock,
            max_concurrent=max_concurrent,
            retry=self._retry_policy,
            dlq=self._dlq_policy,
            lease=lease,
            visibility_timeout=visibility_timeout,
            wait_time_seconds=wait_time_seconds,
        )
        self.loop = loop
        self.results = results
        self.debug_bundle = debug_bundle
        self.transient_errors = transient_errors

    def handle(
        self,
        message: Message[AgentLoopRequest[Any], AgentLoopResult[Any]],
        heartbeat: WorkerHeartbeat,
    ) -> None:
        """Answer one request (see the class docstring)."""
        request = _request_of(message)
        target = reply_target(message, self.results)
        result = self.serve(request, heartbeat=heartbeat, delivery_count=message.delivery_count)
        self._reply(target, request, result)

    @property
    def handles_async(self) -> bool:
        """True when the loop is async (`AgentLoop.is_async`): requests run as tasks."""
        return bool(getattr(self.loop, "is_async", False))

    async def handle_async(
        self,
        message: Message[AgentLoopRequest[Any], AgentLoopResult[Any]],
        heartbeat: WorkerHeartbeat,
    ) -> None:
        """`handle` for an async loop, awaited on the worker's event loop."""
        request = _request_of(message)
        target = reply_target(message, self.results)
        result = await self.aserve(request, delivery_count=message.delivery_count)
        self._reply(target, request, result)

    def _reply(
        self,
        target: Mailbox[AgentLoopResult[Any], Any] | None,
        request: AgentLoopRequest[Any],
        result: AgentLoopResult[Any],
    ) -> None:
        if target is not None:
            target.send(result)
        else:
            _log.warning(
                "%s: request %s has no reply_to and the worker has no results mailbox; "
                "its answer is dropped",
                self.name,
                request.request_id,
            )

    def serve(
        self,
        request: AgentLoopRequest[Any],
        *,
        heartbeat: Callable[[], None] | None = None,
        delivery_count: int = 1,
    ) -> AgentLoopResult[Any]:
        """Run one request and return its answer (no mailbox involved).

        Raises:
            Exception: A transient failure the retry policy allows to retry.
        """
        with self._recorder(request) as rec:
            rec.set_request(request)
            try:
                response, session = self.loop.execute(
                    request.request,
                    experiment=request.experiment,
                    deadline=self._deadline(request),
                    budget=request.budget,
                    heartbeat=heartbeat,
                    on_prepared=rec.set_session_before if rec.enabled else None,
                )
            except Exception as error:
                return self._failed(error, request, delivery_count, rec)
            rec.set_response(response)
            rec.set_session_after(session)
        return _answer(request, response, delivery_count)

    async def aserve(
        self, request: AgentLoopRequest[Any], *, delivery_count: int = 1
    ) -> AgentLoopResult[Any]:
        """`serve` for an async loop (`AgentLoop.aexecute`), on the running event loop.

        Raises:
            Exception: A transient failure the retry policy allows to retry.
        """
        loop: Any = self.loop  # an AgentLoop with is_async: has aexecute
        with self._recorder(request) as rec:
            rec.set_request(request)
            try:
                response, session = await loop.aexecute(
                    request.request,
                    experiment=request.experiment,
                    deadline=self._deadline(request),
                    budget=request.budget,
                    on_prepared=rec.set_session_before if rec.enabled else None,
                )
            except Exception as error:
                return self._failed(error, request, delivery_count, rec)
            rec.set_response(response)
            rec.set_session_after(session)
        return _answer(request, response, delivery_count)

    def _deadline(self, request: AgentLoopRequest[Any]) -> Deadline | None:
        if request.deadline_seconds is None:
            return None
        return Deadline.after(request.deadline_seconds, clock=self.loop.clock)

    def _recorder(self, request: AgentLoopRequest[Any]) -> Any:
        return bundle_recorder(
            self.debug_bundle,
            request_id=str(request.request_id),
            kind="agent",
            clock=self.loop.clock,
            experiment=request.experiment.name,
        )

    def _failed(
        self, error: Exception, request: AgentLoopRequest[Any], delivery_count: int, rec: Any
    ) -> AgentLoopResult[Any]:
        """The error answer of a run that raised (re-raises what may be retried)."""
        if should_retry(
            error,
            delivery_count,
            transient=self.transient_errors,
            retry=self._retry_policy,
            dlq=self._dlq_policy,
        ):
            raise error
        kind = _error_kind(error)
        rec.set_error(kind, error)
        return AgentLoopResult(
            request_id=request.request_id,
            output=None,
            text=None,
            error=f"{type(error).__name__}: {error}",
            error_kind=kind,
            delivery_count=delivery_count,
        )


def _request_of(
    message: Message[AgentLoopRequest[Any], AgentLoopResult[Any]],
) -> AgentLoopRequest[Any]:
    request = message.body
    if not isinstance(request, AgentLoopRequest):
        raise MessageDecodeError(
            f"expected an AgentLoopRequest, got {type(request).__name__}; send "
            "AgentLoopRequest(request, experiment=...) bodies to an agent loop's mailbox",
        )
    return request


def _answer(
    request: AgentLoopRequest[Any], response: PromptResponse[Any], delivery_count: int
) -> AgentLoopResult[Any]:
    return AgentLoopResult(
        request_id=request.request_id,
        output=response.output,
        text=response.text,
        usage=response.usage,
        delivery_count=delivery_count,
    )


def _error_kind(error: BaseException) -> AgentErrorKind:
    # A provider timeout that is not retried is a timeout too (as evals classify it).
    if isinstance(error, DeadlineExceededError | TimeoutError):
        return "timeout"
    if isinstance(error, BudgetExceededError):
        return "budget"
    return "agent"
