"""`FunctionAdapter`: the model is a Python function. A test double.

Use it in tests, examples and offline demos: it runs the real prompt rendering, tool
loop, structured output parsing and session events, but the next assistant turn comes
from your function instead of a provider. It is deterministic as long as your function
is. Do not use it to claim anything about a real model.

Example:
    >>> from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
    >>> from weakincentives.runtime.session import Session
    >>> template = PromptTemplate[str](ns="demo", key="echo", sections=(
    ...     MarkdownSection("Say", "say", "$text", role="user"),))
    >>> adapter = FunctionAdapter(lambda req: "you said: " + req.last_user_text())
    >>> print(adapter.evaluate(Prompt(template).bind(text="hi"), session=Session()).text)
    you said: ## Say
    <BLANKLINE>
    hi
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

from weakincentives import serde
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError
from weakincentives.prompt import Prompt
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.session import ChatMessage, Session, TokenUsage, ToolCall

from ._cache import cached_model_call
from ._loop import run_prompt
from ._provenance import AdapterInfo, package_version
from ._types import Heartbeat, ModelRequest, ModelTurn, PromptResponse, ResponseCache

__all__ = ["FunctionAdapter", "FunctionModel", "FunctionReply", "estimate_tokens"]

OutputT = TypeVar("OutputT")


@dataclass(frozen=True, slots=True)
class FunctionReply:
    """The next assistant turn, as a function model returns it."""

    text: str | None = None
    """Assistant text (the final answer when there are no tool calls)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls to execute before the next turn."""
    output: Any = None
    """A structured answer; serialized to JSON as the assistant text."""
    usage: TokenUsage | None = None
    """Token usage to record; estimated from the text when None."""

    @staticmethod
    def call(name: str, /, **arguments: Any) -> FunctionReply:
        """A turn with a single tool call (its id is assigned by the adapter)."""
        return FunctionReply(
            tool_calls=(ToolCall(id="", name=name, arguments=json.dumps(arguments)),)
        )

    @staticmethod
    def calls(*calls: tuple[str, dict[str, Any]]) -> FunctionReply:
        """A turn with several tool calls, given as `(name, arguments)` pairs."""
        return FunctionReply(
            tool_calls=tuple(ToolCall(id="", name=n, arguments=json.dumps(a)) for n, a in calls)
        )


FunctionModel = Callable[[ModelRequest], "FunctionReply | str"]
"""`model(request) -> FunctionReply | str`; a plain string is a final text answer."""


def estimate_tokens(text: str | None) -> int:
    """A deterministic token estimate: about four characters a token."""
    return 0 if not text else len(text) // 4 + 1


@dataclass(slots=True)
class FunctionAdapter:
    """Adapter whose "model" is `model(request)`; see the module docstring."""

    model: FunctionModel
    """Function from the conversation so far to the next assistant turn."""
    model_name: str = "function-model"
    """Name recorded as the model."""
    max_turns: int = 16
    """Model calls allowed per run before `TurnLimitExceededError`."""
    clock: Clock = field(default=SYSTEM_CLOCK)
    """Clock for timings."""
    cache: ResponseCache | None = None
    """Response cache for model turns (keyed by `model_name`, the function's qualified name
    and the conversation; give each function its own `model_name` when they share a cache)."""
    output_retries: int = 1
    """Times a final answer that does not parse into the output type is sent back to the
    model with the parse error (0: fail at once)."""

    def describe(self) -> AdapterInfo:
        """The function's qualified name as the model, `model_name` and the limits.

        Example:
            >>> def echo(request): return "hi"
            >>> FunctionAdapter(echo).describe().model
            'weakincentives.adapters.function.echo'
        """
        return AdapterInfo(
            provider="function",
            model=_qualified_name(self.model),
            parameters={
                "model_name": self.model_name,
                "max_turns": self.max_turns,
                "output_retries": self.output_retries,
            },
            adapter=f"{type(self).__module__}.{type(self).__qualname__}",
            version=package_version(),
        )

    def with_cache(self, cache: ResponseCache | None) -> Self:
        """A copy of this adapter using `cache` (None: no cache); see `CacheableAdapter`."""
        return dataclasses.replace(self, cache=cache)

    def with_model(self, model: str | None = None, **parameters: Any) -> Self:
        """A copy recording `model` as its model name; see `ModelConfigurable`.

        The function is the model, so it takes no sampling parameters: only `max_turns`.

        Raises:
            ConfigurationError: any other parameter.
        """
        unknown = sorted(set(parameters) - {"max_turns"})
        if unknown:
            raise ConfigurationError(
                f"FunctionAdapter (a test double: a Python function is the model) takes no "
                f"sampling parameters; got {', '.join(unknown)} (it accepts max_turns)"
            )
        changes: dict[str, Any] = dict(parameters)
        if model is not None:
            changes["model_name"] = model
        return dataclasses.replace(self, **changes)

    def evaluate(
        self,
        prompt: Prompt[OutputT],
        *,
        session: Session,
        deadline: Deadline | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
    ) -> PromptResponse[OutputT]:
        """Run `prompt` with the function model (see `ProviderAdapter.evaluate`)."""
        call_model: Callable[[ModelRequest], ModelTurn] = self._call
        if self.cache is not None:
            call_model = cached_model_call(
                self._call,
                self.cache,
                model_name=self.model_name,
                parameters={"function": _qualified_name(self.model)},
            )
        return run_prompt(
            prompt,
            session=session,
            call_model=call_model,
            deadline=deadline,
            budget=budget,
            heartbeat=heartbeat,
            max_turns=self.max_turns,
            output_retries=self.output_retries,
            clock=self.clock,
        )

    def _call(self, request: ModelRequest) -> ModelTurn:
        reply = self.model(request)
        if isinstance(reply, str):
            reply = FunctionReply(text=reply)
        text = reply.text
        if reply.output is not None:
            text = serde.dumps(reply.output).decode()
        calls = tuple(
            ToolCall(id=c.id or f"call_{request.turn}_{i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(reply.tool_calls)
        )
        usage = reply.usage or TokenUsage(
            input_tokens=sum(estimate_tokens(m.content) for m in request.messages),
            output_tokens=estimate_tokens(text) + sum(estimate_tokens(c.arguments) for c in calls),
        )
        message = ChatMessage(role="assistant", content=text, tool_calls=calls)
        return ModelTurn(message=message, usage=usage, model=self.model_name)


def _qualified_name(fn: object) -> str:
    module = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{name}"
