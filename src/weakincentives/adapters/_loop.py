"""The model/tool loop shared by every adapter."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar, cast

from weakincentives import serde
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import AdapterResponseError, SerdeError, TurnLimitExceededError
from weakincentives.prompt import Prompt, RenderedPrompt, Tool, ToolContext
from weakincentives.runtime.limits import Budget, BudgetTracker, Deadline
from weakincentives.runtime.session import (
    ChatMessage,
    PromptExecuted,
    PromptRendered,
    Session,
    TokenUsage,
    ToolCall,
    ToolInvoked,
    ToolResult,
)

from ._types import Heartbeat, ModelRequest, ModelTurn, PromptResponse

__all__ = ["parse_output", "run_prompt"]

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
    clock: Clock = SYSTEM_CLOCK,
) -> PromptResponse[OutputT]:
    """Render `prompt`, call the model until it answers without tool calls, record events."""
    started = clock.monotonic()
    rendered = prompt.render()
    session.dispatch(
        PromptRendered(
            prompt_ns=prompt.template.ns,
            prompt_key=prompt.template.key,
            prompt_name=prompt.name,
            messages=rendered.messages,
            tools=tuple(t.name for t in rendered.tools),
            overrides_tag=prompt.overrides_tag if prompt.overrides_store else None,
            applied_overrides=rendered.applied_overrides,
            rendered_at=clock.now(),
        ),
    )
    tracker = BudgetTracker(budget)
    tools = {t.name: t for t in rendered.tools}
    specs = tuple(t.spec() for t in rendered.tools)
    schema = serde.json_schema(rendered.output_type) if rendered.output_type else None
    messages = list(rendered.messages)
    tool_calls = 0
    model: str | None = None
    for turn_index in range(max_turns):
        if deadline is not None:
            deadline.check(f"prompt {prompt.name}")
        if heartbeat is not None:
            heartbeat()
        turn = call_model(
            ModelRequest(
                messages=tuple(messages),
                tools=specs,
                output_type=rendered.output_type,
                output_schema=schema,
                prompt_name=prompt.name,
                turn=turn_index,
                timeout=deadline.remaining() if deadline is not None else None,
            ),
        )
        model = turn.model or model
        tracker.record(turn.usage)
        if deadline is not None:
            # A late answer is a timeout, whatever it says: checked after the call too.
            deadline.check(f"prompt {prompt.name}")
        messages.append(turn.message)
        if not turn.message.tool_calls:
            return _finish(
                prompt,
                rendered,
                session,
                messages,
                tracker.usage,
                model,
                turn_index + 1,
                tool_calls,
                clock.monotonic() - started,
            )
        for call in turn.message.tool_calls:
            event = _invoke(tools, call, session, prompt.name, heartbeat)
            session.dispatch(event)
            tool_calls += 1
            messages.append(
                ChatMessage(
                    role="tool", content=event.result.message, tool_call_id=call.id, name=call.name
                ),
            )
    raise TurnLimitExceededError(
        f"prompt {prompt.name}: the model was still calling tools after {max_turns} turns; "
        "raise max_turns or check the tools' answers",
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


def _finish(
    prompt: Prompt[OutputT],
    rendered: RenderedPrompt,
    session: Session,
    messages: list[ChatMessage],
    usage: TokenUsage,
    model: str | None,
    model_requests: int,
    tool_calls: int,
    elapsed: float,
) -> PromptResponse[OutputT]:
    text = messages[-1].content
    output: Any = None
    if rendered.output_type is not None:
        output = parse_output(rendered.output_type, text, prompt.name)
    session.dispatch(
        PromptExecuted(
            prompt_ns=prompt.template.ns,
            prompt_key=prompt.template.key,
            prompt_name=prompt.name,
            text=text,
            output=output,
            usage=usage,
            model=model,
            model_requests=model_requests,
            tool_calls=tool_calls,
            duration_ms=elapsed * 1000.0,
        ),
    )
    return PromptResponse(
        prompt_name=prompt.name,
        text=text,
        output=cast("OutputT | None", output),
        usage=usage,
        messages=tuple(messages),
        model=model,
        model_requests=model_requests,
        tool_calls=tool_calls,
    )


def parse_output(output_type: type[Any], text: str | None, prompt_name: str) -> Any:
    """Parse the final answer's JSON (optionally in a ```json fence) into `output_type`.

    Raises:
        AdapterResponseError: when the text is missing, not JSON or does not validate.
    """
    if not text:
        raise AdapterResponseError(
            f"prompt {prompt_name}: expected a {output_type.__name__} JSON object, got no text",
        )
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        return serde.loads(output_type, body)
    except SerdeError as exc:
        raise AdapterResponseError(
            f"prompt {prompt_name}: structured output does not parse: {exc}; "
            f"text was {text[:200]!r}",
        ) from exc
