"""`FunctionAdapter`: the model is a Python function. A test double.

Use it in tests, examples and offline demos: it runs the real prompt rendering, tool
loop, structured output parsing and session events, but the next assistant turn comes
from your function instead of a provider. It is deterministic as long as your function
is. Do not use it to claim anything about a real model.

The model function may be an `async def`: the adapter is then async
(`is_async_adapter`), `aevaluate` awaits it and `AgentLoop` runs on that path, so a
simulated model that waits (`await asyncio.sleep(...)`) costs a task, not a thread.
`evaluate` runs an async model in a fresh event loop; `aevaluate` calls a sync one on
the running loop (keep it quick).

Examples:
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

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import CoroutineType
from typing import Any, Self, TypeVar

from weakincentives import serde
from weakincentives._frozen import quick_init
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError
from weakincentives.prompt import Prompt
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.session import ChatMessage, Session, TokenUsage, ToolCall

from ._cache import acached_model_call, cached_model_call
from ._loop import arun_prompt, run_prompt
from ._provenance import AdapterInfo, package_version
from ._types import Heartbeat, ModelRequest, ModelTurn, PromptResponse, ResponseCache

__all__ = [
    "AsyncFunctionModel",
    "FunctionAdapter",
    "FunctionModel",
    "FunctionReply",
    "estimate_tokens",
]

OutputT = TypeVar("OutputT")


@quick_init
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

AsyncFunctionModel = Callable[[ModelRequest], "Awaitable[FunctionReply | str]"]
"""`async def model(request) -> FunctionReply | str`: a model that awaits (see the module)."""


def estimate_tokens(text: str | None) -> int:
    """A deterministic token estimate: about four characters a token."""
    return 0 if not text else len(text) // 4 + 1


@dataclass(slots=True)
class FunctionAdapter:
    """Adapter whose "model" is `model(request)`; see the module docstring."""

    model: FunctionModel | AsyncFunctionModel
    """Function from the conversation so far to the next assistant turn (may be async)."""
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
    _async_of: tuple[object, bool] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """`(model, whether it is async)`: `is_async` is asked per sample, `inspect` is slow."""

    def describe(self) -> AdapterInfo:
        """The function's qualified name as the model, `model_name` and the limits.

        Examples:
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

    def close(self) -> None:
        """Nothing to release (no connections); here so every adapter can be closed."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    @property
    def is_async(self) -> bool:
        """True when `model` is an `async def` (see `AsyncProviderAdapter`)."""
        model, known = self.model, self._async_of
        if known is None or known[0] is not model:  # the first call, or a new model
            known = self._async_of = (model, _is_coroutine_function(model))
        return known[1]

    def evaluate(
        self,
        prompt: Prompt[OutputT],
        *,
        session: Session,
        deadline: Deadline | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
    ) -> PromptResponse[OutputT]:
        """Run `prompt` with the function model (see `ProviderAdapter.evaluate`).

        Raises:
            ConfigurationError: `model` is async and an event loop runs in this thread
                (await `aevaluate` there).
        """
        if self.is_async:
            _no_running_loop()
            return asyncio.run(
                self.aevaluate(
                    prompt, session=session, deadline=deadline, budget=budget, heartbeat=heartbeat
                )
            )
        call_model: Callable[[ModelRequest], ModelTurn] = self._call
        if self.cache is not None:
            call_model = cached_model_call(
                self._call, self.cache, model_name=self.model_name,
                parameters={"function": _qualified_name(self.model)},
            )  # fmt: skip
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

    async def aevaluate(
        self,
        prompt: Prompt[OutputT],
        *,
        session: Session,
        deadline: Deadline | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
    ) -> PromptResponse[OutputT]:
        """`evaluate` on the running event loop: an async model is awaited, a sync one called."""
        call_model: Callable[[ModelRequest], Awaitable[ModelTurn]] = self._acall
        if self.cache is not None:
            call_model = acached_model_call(
                self._acall, self.cache, model_name=self.model_name,
                parameters={"function": _qualified_name(self.model)},
            )  # fmt: skip
        return await arun_prompt(
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
        return self._turn(request, reply)  # type: ignore[arg-type]  # sync model: a reply

    async def _acall(self, request: ModelRequest) -> ModelTurn:
        reply = self.model(request)
        # An async model's coroutine is told apart without `inspect` (asked per turn).
        if type(reply) is CoroutineType or inspect.isawaitable(reply):
            reply = await reply
        return self._turn(request, reply)

    def _turn(self, request: ModelRequest, reply: FunctionReply | str) -> ModelTurn:
        if isinstance(reply, str):
            reply = FunctionReply(text=reply)
        text = reply.text
        if reply.output is not None:
            text = serde.dumps(reply.output).decode()
        calls = (
            tuple(
                ToolCall(id=c.id or f"call_{request.turn}_{i}", name=c.name, arguments=c.arguments)
                for i, c in enumerate(reply.tool_calls)
            )
            if reply.tool_calls
            else ()
        )
        usage = reply.usage
        if not usage:  # estimated: `estimate_tokens` of each text, inlined
            sent = 0
            for m in request.messages:
                content = m.content
                if content:
                    sent += len(content) // 4 + 1
            made = len(text) // 4 + 1 if text else 0
            for c in calls:
                made += estimate_tokens(c.arguments)
            usage = TokenUsage(input_tokens=sent, output_tokens=made)
        message = ChatMessage(role="assistant", content=text, tool_calls=calls)
        return ModelTurn(message=message, usage=usage, model=self.model_name)


def _is_coroutine_function(fn: object) -> bool:
    """An `async def`, or an object whose `__call__` is one."""
    if inspect.iscoroutinefunction(fn):
        return True
    return inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def _no_running_loop() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise ConfigurationError(
        "FunctionAdapter: the model function is async and an event loop is already running "
        "in this thread; use `await adapter.aevaluate(...)` there"
    )


def _qualified_name(fn: object) -> str:
    module = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{name}"
