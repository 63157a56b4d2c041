"""Run one sample through an AgentLoop and score it: the unit of work of every runner.

`EvalLoop` (mailbox-driven) and `evaluate()` (local runner) both call `execute_sample`, so a
sample is executed, scored and recorded the same way wherever it runs. Failures are data:
each stage's exception becomes an `EvalResult` with an `error_kind`. That includes a
`SystemExit` (`sys.exit()`) or `KeyboardInterrupt` raised by the agent or the evaluator
(`SAMPLE_FAILURES`): in a worker thread neither is a request to stop the run (a real
Ctrl-C reaches the main thread only), so each ends its sample, not the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from weakincentives import serde
from weakincentives._frozen import quick_init
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.runtime.agent_loop import FunctionLoop
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.session import (
    ChatMessage,
    PromptExecuted,
    PromptFailed,
    PromptRendered,
    Session,
    TokenUsage,
    ToolInvoked,
)

from .._records import (
    ErrorKind,
    EvalRequest,
    EvalResult,
    RecordInputs,
    Score,
    ToolCallRecord,
    TurnUsage,
    error_message,
    result_of,
)
from ..scoring import (
    Trajectory,
    call_evaluator,
    classify_error,
    is_session_aware,
    is_trajectory_scorer,
    judge_cost_of,
)

if TYPE_CHECKING:
    from weakincentives.adapters import PromptResponse
    from weakincentives.adapters.pricing import PriceTable
    from weakincentives.runtime.agent_loop import AgentLoop

__all__ = [
    "NO_USAGE",
    "RECORD_INPUTS",
    "SAMPLE_FAILURES",
    "SampleOutcome",
    "describe_failure",
    "execute_function",
    "execute_sample",
    "score_finished",
    "score_output",
    "session_is_read",
]


SAMPLE_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit, KeyboardInterrupt)
"""What the code under test may raise and still end only its own sample (see the module)."""


@quick_init
@dataclass(frozen=True, slots=True)
class SampleOutcome:
    """An `EvalResult` plus the live objects a caller may want (bundles, environments)."""

    result: EvalResult
    """What gets recorded."""
    session: Session | None
    """The run's session (None when the agent raised before returning one, and from
    `execute_function`, which makes none)."""
    response: PromptResponse[Any] | None
    """The agent's response, if it returned (None from `execute_function`)."""
    exception: BaseException | None = None
    """The exception behind an error result, if any."""
    failed_stage: Literal["agent", "evaluator"] | None = None
    """Where `exception` was raised: running the agent or scoring its output (a
    transient agent failure may be retried; an evaluator failure is the answer)."""


def execute_sample(
    loop: AgentLoop[Any, Any],
    evaluator: Callable[..., Score],
    request: EvalRequest[Any, Any],
    *,
    timeout: float | None = None,
    budget: Budget | None = None,
    heartbeat: Callable[[], None] | None = None,
    record_transcript: bool = True,
    delivery_count: int = 1,
    on_prepared: Callable[[Session], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    inputs: RecordInputs | None = None,
    prices: PriceTable | None = None,
) -> SampleOutcome:
    """Execute `request.sample` through `loop` under its experiment, then score it.

    Never raises for a failing agent or evaluator: the returned result carries the error
    and its kind (`agent`, `no_output`, `evaluator`, `judge`, `timeout`, `budget`).

    `evaluator` may also be a trajectory scorer (`(trajectory, sample) -> Score`, see
    `is_trajectory_scorer`): it gets a `Trajectory` of the run, and since it judges the
    whole run it is called even when the agent finished without an output.
    """
    sample = request.sample
    deadline = Deadline.after(timeout, clock=clock) if timeout else None
    start = clock.monotonic()
    run: tuple[PromptResponse[Any], Session] | BaseException
    prepared: list[Session] = []  # the run's session, kept for a failure's evidence

    def keep(session: Session) -> None:
        prepared.append(session)
        if on_prepared is not None:
            on_prepared(session)

    try:
        response, session = loop.execute(
            sample.input, experiment=request.experiment, deadline=deadline, budget=budget,
            heartbeat=heartbeat, on_prepared=keep,
        )  # fmt: skip
        run = (response, session)
    except SAMPLE_FAILURES as exc:
        run = exc
    latency = (clock.monotonic() - start) * 1000.0
    return score_finished(
        run, evaluator, request, latency_ms=latency, record_transcript=record_transcript,
        delivery_count=delivery_count, inputs=inputs,
        failed_session=prepared[0] if prepared else None, prices=prices,
        session_read=on_prepared is not None or session_is_read(loop, evaluator),
    )  # fmt: skip


def session_is_read(loop: AgentLoop[Any, Any], evaluator: Callable[..., Score]) -> bool:
    """Whether anything reads the session of a run of `loop` scored by `evaluator`.

    Only a plain `FunctionLoop` (its function takes no `session`) scored by a plain
    evaluator runs unread: the fast paths skip making its session, and a result records
    no `session_id` for it on any path (a debug bundle or an environment reads it too:
    their callers say so with `on_prepared`).
    """
    return (
        type(loop) is not FunctionLoop
        or loop.takes_session
        or is_trajectory_scorer(evaluator)
        or is_session_aware(evaluator)
    )


def execute_function(
    loop: FunctionLoop[Any, Any],
    evaluator: Callable[..., Score],
    request: EvalRequest[Any, Any],
    *,
    timeout: float | None = None,
    record_transcript: bool = True,
    delivery_count: int = 1,
    clock: Clock = SYSTEM_CLOCK,
    inputs: RecordInputs | None = None,
    prices: PriceTable | None = None,
    session_read: bool | None = None,
) -> SampleOutcome:
    """`execute_sample` for a `FunctionLoop`, without a session when nothing reads it.

    When the function takes no `session` and `evaluator` is plain (neither session-aware
    nor a trajectory scorer), the function is called directly, without the session
    `FunctionLoop.execute` records the run in: the result is the one `execute_sample`
    gives (zero usage; as transcript, one assistant message holding a text output), and
    the outcome has no session nor response. That saves microseconds per sample, which
    a many-threaded run (every thread sharing the GIL) pays in throughput. Otherwise,
    or for a subclass of `FunctionLoop`, this is `execute_sample`. `session_read` is
    `session_is_read(loop, evaluator)` when the caller knows it already (it runs per
    sample).
    """
    if session_is_read(loop, evaluator) if session_read is None else session_read:
        return execute_sample(
            loop, evaluator, request, timeout=timeout, record_transcript=record_transcript,
            delivery_count=delivery_count, clock=clock, inputs=inputs, prices=prices,
        )  # fmt: skip
    sample = request.sample
    deadline = Deadline.after(timeout, clock=clock) if timeout else None
    start = clock.monotonic()
    try:
        output = loop.fn(sample.input)
        if deadline is not None:  # as FunctionLoop.execute: checked after the call
            deadline.check(f"function {loop.name}")
    except SAMPLE_FAILURES as exc:
        latency = (clock.monotonic() - start) * 1000.0
        return score_finished(exc, evaluator, request, latency_ms=latency,
                              delivery_count=delivery_count, inputs=inputs)  # fmt: skip
    latency = (clock.monotonic() - start) * 1000.0
    return score_output(
        output, evaluator, request, latency_ms=latency, record_transcript=record_transcript,
        delivery_count=delivery_count, inputs=inputs, prices=prices,
    )  # fmt: skip


def score_output(
    output: Any,
    evaluator: Callable[..., Score],
    request: EvalRequest[Any, Any],
    *,
    latency_ms: float,
    record_transcript: bool = True,
    delivery_count: int = 1,
    inputs: RecordInputs | None = None,
    prices: PriceTable | None = None,
) -> SampleOutcome:
    """Score the output of a function run without a session (see `execute_function`).

    `evaluator` must be plain (neither session-aware nor a trajectory scorer). The result
    is the one `execute_sample` gives a `FunctionLoop` that returned `output`.
    """
    if record_transcript and isinstance(output, str) and output:
        extras: _Extras = (
            NO_USAGE, (ChatMessage(role="assistant", content=output),), (), None, ()
        )  # fmt: skip
    else:
        extras = _NO_EXTRAS
    record = _Record(request, delivery_count, latency_ms, inputs or RECORD_INPUTS, prices)
    return _score(evaluator, record, extras, output, None, None)


def score_finished(
    run: tuple[PromptResponse[Any], Session] | BaseException,
    evaluator: Callable[..., Score],
    request: EvalRequest[Any, Any],
    *,
    latency_ms: float,
    record_transcript: bool = True,
    delivery_count: int = 1,
    inputs: RecordInputs | None = None,
    failed_session: Session | None = None,
    prices: PriceTable | None = None,
    session_read: bool = True,
) -> SampleOutcome:
    """`execute_sample` for a run that already happened: score and record it.

    `run` is what the agent returned (response and session) or the exception it raised;
    `latency_ms` is how long it took. The local runner awaits an `async def` task
    function on the event loop, then scores its run with this in a worker thread.
    `failed_session` is the session of a run that raised: its `PromptFailed` and
    `ToolInvoked` events give the error result its partial transcript, tool calls and
    usage, and tell an output that did not parse (`output_parsing`) from other failures.
    With `prices`, the result records what the agent's calls cost (a failed run's too).
    The result names the run's session (`session_id`) when `session_read` (see
    `session_is_read`): a session nothing reads is not named, as the fast paths make none.
    """
    session = failed_session if isinstance(run, BaseException) else run[1]
    record = _Record(
        request, delivery_count, latency_ms, inputs or RECORD_INPUTS, prices,
        None if session is None or not session_read else session.session_id,
    )  # fmt: skip
    if isinstance(run, BaseException):
        extras, stage = _failure_extras(failed_session, record_transcript, prices)
        kind = classify_error(run, stage)
        result = _error(record, kind, run, extras)
        return SampleOutcome(result, failed_session, None, run, "agent")
    response, session = run
    extras = _session_extras(session, response, record_transcript, prices)
    if response.output is None and _structured(session):
        msg = "the agent's prompt asks for structured output, but the run returned none"
        score = Score(value=0.0, passed=False, reason=msg)
        result = _result(record, score, extras, None, msg, "no_output")
        return SampleOutcome(result, session, response)
    output = response.output if response.output is not None else response.text
    return _score(evaluator, record, extras, output, session, response)


@quick_init
@dataclass(frozen=True, slots=True)
class _Record:
    """What every result of one sample is recorded with, besides its score."""

    request: EvalRequest[Any, Any]
    delivery_count: int
    latency: float
    inputs: RecordInputs
    prices: PriceTable | None = None
    session_id: str | None = None


RECORD_INPUTS = RecordInputs()
"""The default: results keep input and expected, up to `DEFAULT_VALUE_LIMIT` characters."""


def _score(
    evaluator: Callable[..., Score],
    record: _Record,
    extras: _Extras,
    output: Any,
    session: Session | None,
    response: PromptResponse[Any] | None,
) -> SampleOutcome:
    """Score a finished run's `output` and record it.

    `session` and `response` are None only from `score_output`, for a plain evaluator.
    """
    sample = record.request.sample
    plain = session is None  # no need to ask the evaluator's kind again
    by_trajectory = not plain and is_trajectory_scorer(evaluator)
    if output is None and not by_trajectory:
        msg = "the agent finished without an output to score"
        score = Score(value=0.0, passed=False, reason=msg)
        result = _result(record, score, extras, None, msg, "no_output")
        return SampleOutcome(result, session, response)
    try:
        if by_trajectory:
            trajectory = _trajectory(
                cast("PromptResponse[Any]", response), cast(Session, session), output, extras[0]
            )
            score = call_evaluator(evaluator, False, trajectory, sample, None)
        else:
            # What `run_evaluator` does, without a session view for a plain evaluator.
            aware = not plain and is_session_aware(evaluator)
            view = session.view() if aware and session is not None else None
            score = call_evaluator(evaluator, aware, output, sample.expected, view)
    except SAMPLE_FAILURES as exc:
        kind = classify_error(exc, "evaluator")
        result = _error(record, kind, exc, extras, output)
        return SampleOutcome(result, session, response, exc, "evaluator")
    prices = record.prices
    # A judge's cost is in its score's metrics: a score without any has none.
    judge_cost = None if prices is None or not score.metrics else judge_cost_of(score, prices)
    result = _result(record, score, extras, _jsonable(output), judge_cost=judge_cost)
    return SampleOutcome(result, session, response)


_Extras = tuple[
    TokenUsage, tuple[ChatMessage, ...], tuple[ToolCallRecord, ...], float | None,
    tuple[TurnUsage, ...],
]  # fmt: skip
"""What a finished run adds to its result: usage, messages, tool calls, cost, turns."""

NO_USAGE = TokenUsage()
"""The zero usage of a run that reported none, one shared object (`slim` looks for it)."""

_NO_EXTRAS: _Extras = (NO_USAGE, (), (), None, ())


def _result(
    record: _Record,
    score: Score,
    extras: _Extras,
    output: Any,
    error: str | None = None,
    error_kind: ErrorKind | None = None,
    judge_cost: float | None = None,
) -> EvalResult:
    # Built through its slots, its fields passed in order (see `result_of`): this runs
    # per sample.
    request = record.request
    sample = request.sample
    usage, messages, tool_calls, cost, turns = extras
    inputs = record.inputs
    return result_of(
        sample.id, request.experiment.name, score, round(record.latency), error, None,
        error_kind, request.epoch, str(request.request_id), request.run_id, usage,
        dict(sample.metadata), output, messages, tool_calls, record.delivery_count, None,
        inputs.value(sample.input), inputs.value(sample.expected), cost, judge_cost,
        record.session_id, turns,
    )  # fmt: skip


def _error(
    record: _Record,
    kind: ErrorKind,
    exc: BaseException,
    extras: _Extras,
    output: Any = None,
) -> EvalResult:
    message = describe_failure(exc)
    score = Score(value=0.0, passed=False, reason=message)
    return _result(record, score, extras, _jsonable(output), message, kind)


def _failure_extras(
    session: Session | None, record_transcript: bool, prices: PriceTable | None = None
) -> tuple[_Extras, ErrorKind]:
    """The evidence a failed run left in its session, and the stage it failed in."""
    if session is None:
        return _NO_EXTRAS, "agent"
    failures = session[PromptFailed].all()
    cost = None
    if prices is not None:
        calls = [(e.model, e.usage) for e in session[PromptExecuted].all()]
        calls += [(f.model, f.usage) for f in failures[-1:]]
        cost = _priced(calls, prices) if calls else None
    usage = NO_USAGE
    for event in session[PromptExecuted].all():
        usage = usage + event.usage
    messages: tuple[ChatMessage, ...] = ()
    stage: ErrorKind = "agent"
    if failures:
        failed = failures[-1]
        usage = usage + failed.usage
        messages = failed.messages
        if failed.stage == "output_parsing":
            stage = "output_parsing"
    turns = _turns([*session[PromptExecuted].all(), *failures[-1:]], prices)
    if not record_transcript:
        return (usage, (), (), cost, turns), stage
    invoked = session[ToolInvoked].all()
    return (usage, messages, tuple(_tool_record(t) for t in invoked), cost, turns), stage


def _structured(session: Session) -> bool:
    """Whether the run's (last) prompt asked for a structured output."""
    rendered = session[PromptRendered].latest()
    return rendered is not None and rendered.output_type is not None


def describe_failure(exc: BaseException) -> str:
    """The message of what ended a sample, as EVALS.md shows it (`error_message`).

    `sys.exit(code)` is said as such.
    """
    if isinstance(exc, SystemExit):
        return f"SystemExit: the code under test called sys.exit({exc.code!r})"
    return error_message(exc)


def _session_extras(
    session: Session,
    response: PromptResponse[Any],
    record_transcript: bool,
    prices: PriceTable | None = None,
) -> _Extras:
    executed = session[PromptExecuted].all()
    if len(executed) == 1:
        usage = executed[0].usage
    else:
        usage = TokenUsage()
        for event in executed:
            usage = usage + event.usage
    if usage.total_tokens == 0:
        usage = response.usage
    cost = None
    if prices is not None:
        calls = [(e.model, e.usage) for e in executed] or [(response.model, response.usage)]
        cost = _priced(calls, prices)
    turns = _turns(executed, prices)
    if not record_transcript:
        return (usage, (), (), cost, turns)
    messages = tuple(response.messages) or _fallback_messages(response)
    invoked = session[ToolInvoked].all()
    tools = tuple(_tool_record(t) for t in invoked) if invoked else ()
    return (usage, messages, tools, cost, turns)


def _turns(
    events: Iterable[PromptExecuted | PromptFailed], prices: PriceTable | None
) -> tuple[TurnUsage, ...]:
    """One `TurnUsage` per model call of `events`, priced at its prompt run's model."""
    out = []
    for event in events:
        for usage in event.turn_usage:
            cost = None if prices is None else prices.cost(event.model, usage)
            if cost is not None:  # to the pico-dollar: `1.395e-05`, not `1.3949999999999999e-05`
                cost = round(cost, 12)
            out.append(TurnUsage(usage.input_tokens, usage.output_tokens, cost))
    return tuple(out)


def _priced(calls: Iterable[tuple[str | None, TokenUsage]], prices: PriceTable) -> float | None:
    """What the calls cost, each at its model's price; None when any model is unpriced."""
    total = 0.0
    for model, usage in calls:
        cost = prices.cost(model, usage)
        if cost is None:
            return None
        total += cost
    return total


def _trajectory(
    response: PromptResponse[Any], session: Session, output: Any, usage: TokenUsage
) -> Trajectory:
    return Trajectory(
        messages=tuple(response.messages) or _fallback_messages(response),
        tool_calls=tuple(_tool_record(t) for t in session[ToolInvoked].all()),
        output=output, usage=usage, session=session.view(),
    )  # fmt: skip


def _fallback_messages(response: PromptResponse[Any]) -> tuple[ChatMessage, ...]:
    return (ChatMessage(role="assistant", content=response.text),) if response.text else ()


def _tool_record(event: ToolInvoked) -> ToolCallRecord:
    return ToolCallRecord(
        name=event.name, params=dict(event.params), message=event.result.message,
        success=event.success, duration_ms=event.duration_ms, error=event.error,
    )  # fmt: skip


def _jsonable(value: Any) -> Any:
    if value is None or type(value) is str:
        return value  # what serde.dump returns for them, without the call
    try:
        return serde.dump(value)
    except Exception:  # an output we cannot serialize is still worth showing
        return repr(value)
