"""The model/tool loop shared by every adapter, sync and async.

`_RunState` is the loop without I/O: `request` makes each `ModelRequest` and `answer`
records the `ModelTurn` that answers it (running its tool calls, parsing the final
answer), so `run_prompt` drives it with a blocking model call, `arun_prompt` with an
awaited one, and the two cannot drift apart. Tools run where the loop runs (on the event
loop for `arun_prompt`): tool handlers are synchronous and expected to be quick.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from weakincentives import serde
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import (
    AdapterResponseError,
    BudgetExceededError,
    DeadlineExceededError,
    SerdeError,
    TurnLimitExceededError,
)
from weakincentives.prompt import Prompt, Tool, ToolContext, ToolSpec
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
    state = _RunState(
        prompt, session, clock, budget, deadline, heartbeat, max_turns, output_retries
    )
    try:
        request = state.request()
        while True:
            response = state.answer(call_model(request))
            if response is not None:
                return response
            request = state.request()
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
    state = _RunState(
        prompt, session, clock, budget, deadline, heartbeat, max_turns, output_retries
    )
    try:
        request = state.request()
        while True:
            response = state.answer(await call_model(request))
            if response is not None:
                return response
            request = state.request()
    except Exception as exc:
        state.fail(exc)
        raise


_NO_USAGE = TokenUsage()
"""The usage of a run before its first model call (one shared, immutable zero)."""


class _RunState:
    """One prompt run: what it has gathered so far, kept for the result or the failure.

    Made by rendering the prompt (and recording `PromptRendered`). `run_prompt` and
    `arun_prompt` drive it alike: `request` makes the next model request, `answer`
    records the turn that answers it (running its tool calls) and returns the response
    once the model gave its final answer. The two loops do nothing else but call the
    model in between, so they cannot drift apart.

    What a run without tools, budget or retries never changes is a class attribute (one
    is made per sample: each store counts); the rest is set per run.
    """

    # Changed only when the run calls tools, has a budget, or its specs or schema are
    # still to be made (`_make_offer`); shared defaults are never mutated in place.
    tools: Mapping[str, Tool[Any]] = MappingProxyType({})
    offered: tuple[Tool[Any], ...] = ()
    specs: tuple[ToolSpec, ...] = ()
    schema: Mapping[str, Any] | None = None
    offer_ready = True
    tracker: BudgetTracker | None = None
    # The gathered evidence, each replaced (not changed) as the run goes.
    usage = _NO_USAGE
    turn_usage: tuple[TokenUsage, ...] = ()
    model: str | None = None
    model_requests = 0
    tool_calls = 0
    turn_index = 0  # turns that called tools (a parse retry is not one)
    parsing = False

    def __init__(
        self,
        prompt: Prompt[Any],
        session: Session,
        clock: Clock,
        budget: Budget | None,
        deadline: Deadline | None,
        heartbeat: Heartbeat | None,
        max_turns: int,
        output_retries: int,
    ) -> None:
        template = prompt.template
        rendered = prompt.render()
        name = prompt.name  # read for every event and request: looked up once
        output_type: Any = rendered.output_type  # a class or None
        offered = rendered.tools
        self.messages: tuple[ChatMessage, ...] = rendered.messages
        session.dispatch(
            PromptRendered(
                prompt_ns=template.ns,
                prompt_key=template.key,
                prompt_name=name,
                messages=self.messages,
                tools=tuple(t.name for t in offered) if offered else (),
                overrides_tag=prompt.overrides_tag if prompt.overrides_store else None,
                applied_overrides=rendered.applied_overrides,
                rendered_at=clock.now(),
                output_type=None if output_type is None else _type_name(output_type),
            ),
        )
        self.prompt = prompt
        self.name = name
        self.session = session
        self.clock = clock
        self.deadline = deadline
        self.heartbeat = heartbeat
        self.max_turns = max_turns
        self.retries_left = output_retries
        self.output_type = output_type
        # The tools' specs and the output schema are made by the first `request` (a failure
        # there is the run's: `PromptFailed`); an output type's schema is made once.
        if offered:
            self.offered = offered
            self.tools = {t.name: t for t in offered}
            self.offer_ready = False
        if output_type is not None:
            self.schema = _SCHEMAS.get(output_type)
            if self.schema is None:
                self.offer_ready = False
        if budget is not None:  # without one the usage is added up here: no tracker, no lock
            self.tracker = BudgetTracker(budget)
        self.started = clock.monotonic()

    def request(self) -> ModelRequest:
        """The next model request (checks the turn limit, the deadline, the heartbeat)."""
        if self.turn_index >= self.max_turns:
            raise TurnLimitExceededError(
                f"prompt {self.name}: the model was still calling tools after "
                f"{self.max_turns} turns; raise max_turns or check the tools' answers",
            )
        deadline = self.deadline
        if deadline is not None:
            deadline.check(f"prompt {self.name}")
        if self.heartbeat is not None:
            self.heartbeat()
        if not self.offer_ready:
            self._make_offer()
        return ModelRequest(
            messages=self.messages,
            tools=self.specs,
            output_type=self.output_type,
            output_schema=self.schema,
            prompt_name=self.name,
            turn=self.model_requests,
            timeout=deadline.remaining() if deadline is not None else None,
        )

    def _make_offer(self) -> None:
        if self.offered:
            self.specs = tuple(t.spec() for t in self.offered)
        if self.schema is None and self.output_type is not None:
            self.schema = _output_schema(self.output_type)
        self.offer_ready = True

    def answer(self, turn: ModelTurn) -> PromptResponse[Any] | None:
        """Record `turn`; the response when it is the final answer, else None (go on)."""
        self.model_requests += 1
        if turn.model:
            self.model = turn.model
        message = turn.message
        self.messages = (*self.messages, message)
        # Before the budget check: a call that passed the budget was still paid for.
        usage = turn.usage
        self.turn_usage = (*self.turn_usage, usage)
        if self.tracker is not None:
            self.tracker.record(usage)
        elif self.usage is _NO_USAGE and type(usage) is TokenUsage:
            self.usage = usage  # the first call's usage is the total: kept as it is
        else:
            self.usage = self.usage + usage
        if self.deadline is not None:
            # A late answer is a timeout, whatever it says: checked after the call too.
            self.deadline.check(f"prompt {self.name}")
        if message.tool_calls:
            self._call_tools(message.tool_calls)
            self.turn_index += 1
            return None
        try:
            return self._finish(message.content)
        except AdapterResponseError as exc:
            if self.retries_left <= 0:
                raise
            self.retries_left -= 1
            self.parsing = False
            self.messages = (*self.messages, ChatMessage(role="user", content=_retry_text(exc)))
            return None

    def _total(self) -> TokenUsage:
        return self.tracker.usage if self.tracker is not None else self.usage

    def _call_tools(self, calls: tuple[ToolCall, ...]) -> None:
        session, name, heartbeat = self.session, self.name, self.heartbeat
        for call in calls:
            event = _invoke(self.tools, call, session, name, heartbeat)
            session.dispatch(event)
            self.tool_calls += 1
            self.messages = (
                *self.messages,
                ChatMessage(
                    role="tool",
                    content=event.result.message,
                    tool_call_id=call.id,
                    name=call.name,
                    is_error=not event.success,
                ),
            )

    def _finish(self, text: str | None) -> PromptResponse[Any]:
        template, name = self.prompt.template, self.name
        # A plain-text prompt's output is its text, so `response.output` is the answer
        # whichever kind of prompt ran (the spec's `run_eval` reads `response.output`).
        output: Any = text
        output_type = self.output_type
        if output_type is not None:
            self.parsing = True
            output = parse_output(output_type, text, name)
            self.parsing = False
        usage = self._total()
        messages = self.messages
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
                turn_usage=self.turn_usage,
            ),
        )
        return PromptResponse(
            prompt_name=name,
            text=text,
            output=output,
            usage=usage,
            messages=messages,
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
                prompt_name=self.name,
                messages=self.messages,
                usage=self._total(),
                model=self.model,
                model_requests=self.model_requests,
                tool_calls=self.tool_calls,
                stage=self._stage(exc),
                error_type=type(exc).__name__,
                error=str(exc),
                duration_ms=(self.clock.monotonic() - self.started) * 1000.0,
                turn_usage=self.turn_usage,
            ),
        )

    def _stage(self, exc: Exception) -> FailureStage:
        if isinstance(exc, DeadlineExceededError):
            return "timeout"
        if isinstance(exc, BudgetExceededError):
            return "budget"
        return "output_parsing" if self.parsing else "agent"


_SCHEMAS: dict[Any, Mapping[str, Any]] = {}
"""Output type -> its JSON schema (`_output_schema`)."""
_TYPE_NAMES: dict[Any, str] = {}
"""Output type -> its qualified name (`_type_name`)."""


def _output_schema(output_type: Any) -> Mapping[str, Any]:
    """The JSON schema of a structured output type, made once per type.

    Shared, not copied: `ModelRequest.output_schema` is read-only.
    """
    schema = _SCHEMAS.get(output_type)
    if schema is None:
        schema = serde.json_schema(output_type, copy=False)
        if len(_SCHEMAS) >= 256:  # a program making output types on the fly: start over
            _SCHEMAS.clear()
        _SCHEMAS[output_type] = schema
    return schema


def _type_name(output_type: Any) -> str:
    """`module.QualName` of a class, made once per class."""
    name = _TYPE_NAMES.get(output_type)
    if name is None:
        name = f"{output_type.__module__}.{output_type.__qualname__}"
        if len(_TYPE_NAMES) >= 256:
            _TYPE_NAMES.clear()
        _TYPE_NAMES[output_type] = name
    return name


def _retry_text(exc: AdapterResponseError) -> str:
    """What the model is told when its final answer did not parse."""
    return (
        f"Your answer could not be used: {exc}. Reply again with only the JSON object the "
        "output schema asks for."
    )


def _invoke(
    tools: Mapping[str, Tool[Any]],
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
