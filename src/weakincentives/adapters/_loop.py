"""The model/tool loop shared by every adapter, sync and async.

`_RunState.steps` is the loop itself as a generator that yields each `ModelRequest` and is
sent back the `ModelTurn` that answers it, so the loop does no I/O: `run_prompt` drives it
with a blocking model call, `arun_prompt` with an awaited one, and the two cannot drift
apart. Tools run where the loop runs (on the event loop for `arun_prompt`): tool handlers
are synchronous and expected to be quick.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar, cast

from weakincentives import serde
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import (
    AdapterResponseError,
    BudgetExceededError,
    DeadlineExceededError,
    SerdeError,
    TurnLimitExceededError,
)
from weakincentives.prompt import Prompt, RenderedPrompt, Tool, ToolContext
from weakincentives.runtime.limits import Budget, BudgetTracker, Deadline
from weakincentives.runtime.session import (
    ChatMessage,
    FailureStage,
    PromptExecuted,
    PromptFailed,
    PromptRendered,
    Session,
    TokenUsage,
    ToolCall,
    ToolInvoked,
    ToolResult,
)

from ._types import Heartbeat, ModelRequest, ModelTurn, PromptResponse

__all__ = ["arun_prompt", "parse_output", "run_prompt"]

OutputT = TypeVar("OutputT")
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def run_prompt(
    prompt: Prompt[OutputT],
    *,
    session: Session,
    call_model: Callable[[ModelRequest], ModelTurn],
    deadline: Deadline | None,
    budget: Budget | None,
    heartbeat: Heartbeat | None,
    max_turns: int,
    output_retries: int = 1,
    clock: Clock = SYSTEM_CLOCK,
) -> PromptResponse[OutputT]:
    """Render `prompt`, call the model until it answers without tool calls, record events.

    A final answer that does not parse into the output type is sent back to the model
    with the parse error, up to `output_retries` times (each retry is in the transcript,
    and does not count against `max_turns`). When the run raises, a `PromptFailed` event
    with the conversation, usage and counts so far is published before the exception
    propagates.
    """
    state = _begin(prompt, session, clock, budget)
    steps = state.steps(deadline, heartbeat, max_turns, output_retries)
    try:
        request = next(steps)
        while True:
            turn = call_model(request)  # outside the inner try: its StopIteration is an error
            try:
                request = steps.send(turn)
            except StopIteration as stop:
                response: PromptResponse[OutputT] = stop.value
                return response
    except Exception as exc:
        state.fail(exc)
        raise


async def arun_prompt(
    prompt: Prompt[OutputT],
    *,
    session: Session,
    call_model: Callable[[ModelRequest], Awaitable[ModelTurn]],
    deadline: Deadline | None,
    budget: Budget | None,
    heartbeat: Heartbeat | None,
    max_turns: int,
    output_retries: int = 1,
    clock: Clock = SYSTEM_CLOCK,
) -> PromptResponse[OutputT]:
    """`run_prompt` with an awaited model call: the same loop, on the running event loop."""
    state = _begin(prompt, session, clock, budget)
    steps = state.steps(deadline, heartbeat, max_turns, output_retries)
    try:
        request = next(steps)
        while True:
            turn = await call_model(request)
            try:
                request = steps.send(turn)
            except StopIteration as stop:
                response: PromptResponse[OutputT] = stop.value
                return response
    except Exception as exc:
        state.fail(exc)
        raise


def _begin(prompt: Prompt[Any], session: Session, clock: Clock, budget: Budget | None) -> _RunState:
    """Render `prompt`, record `PromptRendered`, and start the run's state."""
    rendered = prompt.render()
    session.dispatch(
        PromptRendered(
            prompt_ns=prompt.template.ns,
            prompt_key=prompt.template.key,
            prompt_name=prompt.name,
            messages=rendered.messages,
            tools=tuple(t.name for t in rendered.tools) if rendered.tools else (),
            overrides_tag=prompt.overrides_tag if prompt.overrides_store else None,
            applied_overrides=rendered.applied_overrides,
            rendered_at=clock.now(),
            output_type=_type_name(rendered.output_type),
        ),
    )
    return _RunState(prompt, rendered, session, clock, BudgetTracker(budget))


class _RunState:
    """What one prompt run has gathered so far: kept for the result or the failure."""

    def __init__(
        self,
        prompt: Prompt[Any],
        rendered: RenderedPrompt,
        session: Session,
        clock: Clock,
        tracker: BudgetTracker,
    ) -> None:
        self.prompt = prompt
        self.name = prompt.name  # read for every event and request: looked up once
        self.rendered = rendered
        self.session = session
        self.clock = clock
        self.tracker = tracker
        self.started = clock.monotonic()
        self.messages = list(rendered.messages)
        self.tool_calls = 0
        self.turn_usage: list[TokenUsage] = []
        self.model_requests = 0
        self.model: str | None = None
        self.parsing = False

    def steps(
        self,
        deadline: Deadline | None,
        heartbeat: Heartbeat | None,
        max_turns: int,
        output_retries: int,
    ) -> Generator[ModelRequest, ModelTurn, PromptResponse[Any]]:
        """The loop without I/O: yields each model request, is sent the turn answering it."""
        prompt, rendered = self.prompt, self.rendered
        offered = rendered.tools
        tools = {t.name: t for t in offered} if offered else {}
        specs = tuple(t.spec() for t in offered) if offered else ()
        # Shared, not copied: `ModelRequest.output_schema` is read-only (a Mapping).
        output_type = rendered.output_type
        schema = serde.json_schema(output_type, copy=False) if output_type else None
        retries_left = output_retries
        turn_index = 0
        while turn_index < max_turns:
            if deadline is not None:
                deadline.check(f"prompt {prompt.name}")
            if heartbeat is not None:
                heartbeat()
            turn = yield (
                ModelRequest(
                    messages=tuple(self.messages),
                    tools=specs,
                    output_type=rendered.output_type,
                    output_schema=schema,
                    prompt_name=self.name,
                    turn=self.model_requests,
                    timeout=deadline.remaining() if deadline is not None else None,
                )
            )
            self.model_requests += 1
            self.model = turn.model or self.model
            self.messages.append(turn.message)
            # Before the budget check: a call that passed the budget was still paid for.
            self.turn_usage.append(turn.usage)
            self.tracker.record(turn.usage)
            if deadline is not None:
                # A late answer is a timeout, whatever it says: checked after the call too.
                deadline.check(f"prompt {prompt.name}")
            if turn.message.tool_calls:
                self._call_tools(tools, turn.message.tool_calls, heartbeat)
                turn_index += 1
                continue
            try:
                return self._finish()
            except AdapterResponseError as exc:
                if retries_left <= 0:
                    raise
                retries_left -= 1
                self.parsing = False
                self.messages.append(ChatMessage(role="user", content=_retry_text(exc)))
        raise TurnLimitExceededError(
            f"prompt {prompt.name}: the model was still calling tools after {max_turns} turns; "
            "raise max_turns or check the tools' answers",
        )

    def _call_tools(
        self, tools: dict[str, Tool[Any]], calls: tuple[ToolCall, ...], heartbeat: Heartbeat | None
    ) -> None:
        for call in calls:
            event = _invoke(tools, call, self.session, self.prompt.name, heartbeat)
            self.session.dispatch(event)
            self.tool_calls += 1
            self.messages.append(
                ChatMessage(
                    role="tool",
                    content=event.result.message,
                    tool_call_id=call.id,
                    name=call.name,
                    is_error=not event.success,
                ),
            )

    def _finish(self) -> PromptResponse[Any]:
        template, name = self.prompt.template, self.name
        text = self.messages[-1].content
        # A plain-text prompt's output is its text, so `response.output` is the answer
        # whichever kind of prompt ran (the spec's `run_eval` reads `response.output`).
        output: Any = text
        output_type = self.rendered.output_type
        if output_type is not None:
            self.parsing = True
            output = parse_output(output_type, text, name)
            self.parsing = False
        usage = self.tracker.usage
        self.session.dispatch(
            PromptExecuted(
                prompt_ns=template.ns,
                prompt_key=template.key,
                prompt_name=name,
                text=text,
                output=output,
                usage=usage,
                model=self.model,
                model_requests=self.model_requests,
                tool_calls=self.tool_calls,
                duration_ms=(self.clock.monotonic() - self.started) * 1000.0,
                turn_usage=tuple(self.turn_usage),
            ),
        )
        return PromptResponse(
            prompt_name=name,
            text=text,
            output=output,
            usage=usage,
            messages=tuple(self.messages),
            model=self.model,
            model_requests=self.model_requests,
            tool_calls=self.tool_calls,
        )

    def fail(self, exc: Exception) -> None:
        """Publish `PromptFailed` with what the run gathered before `exc`."""
        prompt = self.prompt
        self.session.dispatch(
            PromptFailed(
                prompt_ns=prompt.template.ns,
                prompt_key=prompt.template.key,
                prompt_name=prompt.name,
                messages=tuple(self.messages),
                usage=self.tracker.usage,
                model=self.model,
                model_requests=self.model_requests,
                tool_calls=self.tool_calls,
                stage=self._stage(exc),
                error_type=type(exc).__name__,
                error=str(exc),
                duration_ms=(self.clock.monotonic() - self.started) * 1000.0,
                turn_usage=tuple(self.turn_usage),
            ),
        )

    def _stage(self, exc: Exception) -> FailureStage:
        if isinstance(exc, DeadlineExceededError):
            return "timeout"
        if isinstance(exc, BudgetExceededError):
            return "budget"
        return "output_parsing" if self.parsing else "agent"


def _type_name(tp: type[Any] | None) -> str | None:
    return None if tp is None else _qualified(cast(Any, tp))


@functools.lru_cache(maxsize=256)
def _qualified(tp: Any) -> str:  # a class
    return f"{tp.__module__}.{tp.__qualname__}"


def _retry_text(exc: AdapterResponseError) -> str:
    """What the model is told when its final answer did not parse."""
    return (
        f"Your answer could not be used: {exc}. Reply again with only the JSON object the "
        "output schema asks for."
    )


def _invoke(
    tools: dict[str, Tool[Any]],
    call: ToolCall,
    session: Session,
    prompt_name: str,
    heartbeat: Heartbeat | None,
) -> ToolInvoked:
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return ToolInvoked(
            name=call.name,
            params={},
            call_id=call.id,
            duration_ms=0.0,
            success=False,
            result=ToolResult(
                message=f"Unknown tool {call.name!r}. Available: {known}.", success=False
            ),
            error=f"UnknownTool: {call.name}",
            prompt_name=prompt_name,
        )
    ctx = ToolContext(
        session=session, prompt_name=prompt_name, call_id=call.id, heartbeat=heartbeat
    )
    return tool.invoke(call.arguments, ctx)


def parse_output(output_type: type[Any], text: str | None, prompt_name: str) -> Any:
    """Parse the final answer's JSON (optionally in a ```json fence) into `output_type`.

    Raises:
        AdapterResponseError: when the text is missing, not JSON or does not validate.
    """
    if not text:
        raise AdapterResponseError(
            f"prompt {prompt_name}: expected a {output_type.__name__} JSON object, got no text",
        )
    fenced = _FENCE.match(text) if "```" in text else None
    body = fenced.group(1) if fenced else text
    try:
        return serde.loads(output_type, body)
    except SerdeError as exc:
        raise AdapterResponseError(
            f"prompt {prompt_name}: structured output does not parse: {exc}; "
            f"text was {text[:200]!r}",
        ) from exc
