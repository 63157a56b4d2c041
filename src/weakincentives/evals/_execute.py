"""Run one sample through an AgentLoop and score it: the unit of work of every runner.

`EvalLoop` (mailbox-driven) and `evaluate()` (local runner) both call `execute_sample`, so a
sample is executed, scored and recorded the same way wherever it runs. Failures are data:
each stage's exception becomes an `EvalResult` with an `error_kind`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from weakincentives import serde
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.session import (
    ChatMessage,
    PromptExecuted,
    Session,
    TokenUsage,
    ToolInvoked,
)

from ._evaluator_core import call_evaluator, classify_error, run_evaluator
from ._trajectory import Trajectory, is_trajectory_scorer
from ._types import ErrorKind, EvalRequest, EvalResult, Score, ToolCallRecord

if TYPE_CHECKING:
    from weakincentives.adapters import PromptResponse
    from weakincentives.runtime.agent_loop import AgentLoop

__all__ = ["SampleOutcome", "execute_sample"]


@dataclass(frozen=True, slots=True)
class SampleOutcome:
    """An `EvalResult` plus the live objects a caller may want (bundles, environments)."""

    result: EvalResult
    """What gets recorded."""
    session: Session | None
    """The run's session (None when the agent raised before returning one)."""
    response: PromptResponse[Any] | None
    """The agent's response, if it returned."""
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
) -> SampleOutcome:
    """Execute `request.sample` through `loop` under its experiment, then score it.

    Never raises for a failing agent or evaluator: the returned result carries the error
    and its kind (`agent`, `no_output`, `evaluator`, `judge`, `timeout`, `budget`).

    `evaluator` may also be a trajectory scorer (`(trajectory, sample) -> Score`, see
    `is_trajectory_scorer`): it gets a `Trajectory` of the run, and since it judges the
    whole run it is called even when the agent finished without an output.
    """
    sample = request.sample
    base: dict[str, Any] = {
        "sample_id": sample.id,
        "experiment_name": request.experiment.name,
        "epoch": request.epoch,
        "request_id": str(request.request_id),
        "run_id": request.run_id,
        "metadata": dict(sample.metadata),
        "delivery_count": delivery_count,
    }
    deadline = Deadline.after(timeout, clock=clock) if timeout else None
    start = clock.monotonic()
    try:
        response, session = loop.execute(
            sample.input, experiment=request.experiment, deadline=deadline, budget=budget,
            heartbeat=heartbeat, on_prepared=on_prepared,
        )  # fmt: skip
    except Exception as exc:
        latency = (clock.monotonic() - start) * 1000.0
        kind = classify_error(exc, "agent")
        return SampleOutcome(_error(base, latency, kind, exc), None, None, exc, "agent")
    latency = (clock.monotonic() - start) * 1000.0
    extras = _session_extras(session, response, record_transcript)
    output = response.output if response.output is not None else response.text
    by_trajectory = is_trajectory_scorer(evaluator)
    if output is None and not by_trajectory:
        msg = "the agent finished without an output to score"
        result = EvalResult(
            **base, **extras, latency_ms=latency, error=msg, error_kind="no_output",
            score=Score(value=0.0, passed=False, reason=msg),
        )  # fmt: skip
        return SampleOutcome(result, session, response)
    try:
        if by_trajectory:
            trajectory = _trajectory(response, session, output, extras["usage"])
            score = call_evaluator(evaluator, False, trajectory, sample, None)
        else:
            score = run_evaluator(evaluator, output, sample.expected, session.view())
    except Exception as exc:
        kind = classify_error(exc, "evaluator")
        result = _error(base, latency, kind, exc, extras=extras, output=output)
        return SampleOutcome(result, session, response, exc, "evaluator")
    result = EvalResult(**base, **extras, latency_ms=latency, score=score, output=_jsonable(output))
    return SampleOutcome(result, session, response)


def _error(
    base: Mapping[str, Any],
    latency: float,
    kind: ErrorKind,
    exc: BaseException,
    *,
    extras: Mapping[str, Any] | None = None,
    output: Any = None,
) -> EvalResult:
    message = f"{type(exc).__name__}: {exc}"
    return EvalResult(
        **base, **(extras or {}), latency_ms=latency, error=message, error_kind=kind,
        score=Score(value=0.0, passed=False, reason=message), output=_jsonable(output),
    )  # fmt: skip


def _session_extras(
    session: Session, response: PromptResponse[Any], record_transcript: bool
) -> dict[str, Any]:
    usage = TokenUsage()
    for executed in session[PromptExecuted].all():
        usage = usage + executed.usage
    if usage.total_tokens == 0:
        usage = response.usage
    extras: dict[str, Any] = {"usage": usage}
    if record_transcript:
        extras["messages"] = tuple(response.messages) or _fallback_messages(response)
        extras["tool_calls"] = tuple(_tool_record(t) for t in session[ToolInvoked].all())
    return extras


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
    try:
        return serde.dump(value)
    except Exception:  # an output we cannot serialize is still worth showing
        return repr(value)
