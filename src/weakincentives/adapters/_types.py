"""The adapter protocol and the values that cross it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, Self, TypeVar, runtime_checkable

from typing_extensions import TypeVar as DefaultTypeVar

from weakincentives._frozen import quick_init
from weakincentives.prompt import Prompt, ToolSpec
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.session import ChatMessage, Session, TokenUsage

__all__ = [
    "AsyncProviderAdapter",
    "CacheStats",
    "CacheableAdapter",
    "Heartbeat",
    "ModelRequest",
    "ModelTurn",
    "PromptResponse",
    "ProviderAdapter",
    "ResponseCache",
    "is_async_adapter",
]

OutputT = TypeVar("OutputT")
AdapterOutputT_co = DefaultTypeVar("AdapterOutputT_co", covariant=True, default=Any)
"""The output type an adapter is meant for (`ProviderAdapter[JudgeOutput]`); default Any."""

Heartbeat = Callable[[], None]
"""Called between model turns and tool calls so leases and watchdogs see progress."""


# No slots: `PromptResponse[T](...)` sets __orig_class__, which slotted frozen classes reject.
@quick_init
@dataclass(frozen=True)
class PromptResponse(Generic[OutputT]):
    """The result of running a prompt to its final answer."""

    prompt_name: str
    """Name of the prompt that ran."""
    text: str | None
    """Final assistant text."""
    output: OutputT | None
    """Structured output parsed into the template's output type; for a plain-text prompt,
    the final text (so a `PromptTemplate[str]`'s output is its answer)."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    """Tokens used across every model call."""
    messages: tuple[ChatMessage, ...] = ()
    """The whole conversation, rendered prompt included."""
    model: str | None = None
    """Model name the provider reported."""
    model_requests: int = 0
    """How many model calls the run made."""
    tool_calls: int = 0
    """How many tool calls were executed."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """One model call: the conversation so far and what the model may do next."""

    messages: tuple[ChatMessage, ...]
    """Conversation so far."""
    tools: tuple[ToolSpec, ...] = ()
    """Tools the model may call."""
    output_type: type[Any] | None = None
    """Structured output type for the final answer, if any."""
    output_schema: Mapping[str, Any] | None = None
    """JSON schema of `output_type`: one object shared by every request of that type
    (`serde.json_schema(output_type, copy=False)`); copy it before changing it."""
    prompt_name: str = ""
    """Name of the prompt being run."""
    turn: int = 0
    """0-based index of this call within the run."""
    timeout: float | None = None
    """Seconds left before the run's deadline, if it has one."""

    def last_user_text(self) -> str:
        """Content of the newest user message ("" when there is none)."""
        for m in reversed(self.messages):
            if m.role == "user":
                return m.content or ""
        return ""

    def tool_messages(self) -> tuple[ChatMessage, ...]:
        """Tool answers received since the last assistant turn."""
        out: list[ChatMessage] = []
        for m in reversed(self.messages):
            if m.role != "tool":
                break
            out.append(m)
        return tuple(reversed(out))


@quick_init
@dataclass(frozen=True, slots=True)
class ModelTurn:
    """What one model call returned."""

    message: ChatMessage
    """The assistant message (text and/or tool calls)."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    """Tokens this call used."""
    model: str | None = None
    """Model name the provider reported."""


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Lookups and writes since the cache object was created."""

    hits: int = 0
    """Lookups that found a value."""
    misses: int = 0
    """Lookups that found nothing."""
    writes: int = 0
    """Values stored."""

    @property
    def hit_rate(self) -> float:
        """Share of lookups that hit: hits / (hits + misses), 0.0 before any lookup."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


class ResponseCache(Protocol):
    """A key -> bytes store for model responses. Implementations must be thread-safe."""

    def get(self, key: str) -> bytes | None:
        """Return the value stored under `key` (None on a miss), counting a hit or a miss."""
        ...

    def put(self, key: str, value: bytes) -> None:
        """Store `value` under `key`, replacing any previous value."""
        ...

    @property
    def stats(self) -> CacheStats:
        """Hits, misses and writes so far."""
        ...


class ProviderAdapter(Protocol[AdapterOutputT_co]):
    """Runs a prompt against a model, tools included, and records what happened.

    The type parameter is optional and documents intent, as the spec writes it
    (`adapter: ProviderAdapter[JudgeOutput]`): `evaluate` is generic per prompt, so every
    adapter matches `ProviderAdapter` with any parameter, and a bare `ProviderAdapter`
    means `ProviderAdapter[Any]`.
    """

    def evaluate(
        self,
        prompt: Prompt[OutputT],
        *,
        session: Session,
        deadline: Deadline | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
    ) -> PromptResponse[OutputT]:
        """Run `prompt` to its final answer.

        Publishes `PromptRendered`, one `ToolInvoked` per tool call and `PromptExecuted`
        into `session`.

        Raises:
            AdapterError: when the provider fails for good.
            DeadlineExceededError: when `deadline` passes.
            BudgetExceededError: when `budget` is exceeded.
        """
        ...


@runtime_checkable
class CacheableAdapter(ProviderAdapter[AdapterOutputT_co], Protocol[AdapterOutputT_co]):
    """A `ProviderAdapter` that can hand out a copy of itself using a response cache.

    Code that receives someone else's adapter (the eval runner, `wink eval run`) tests
    `isinstance(adapter, CacheableAdapter)` and calls `with_cache` instead of knowing how
    each adapter stores its cache. `FunctionAdapter` and `OpenAIAdapter` are cacheable.

    Examples:
        >>> from weakincentives.adapters import FunctionAdapter, SQLiteResponseCache
        >>> adapter = FunctionAdapter(lambda request: "hi")
        >>> isinstance(adapter, CacheableAdapter)
        True
        >>> with SQLiteResponseCache(":memory:") as cache:
        ...     adapter.with_cache(cache).cache is cache, adapter.cache is None
        (True, True)
    """

    def with_cache(self, cache: ResponseCache | None) -> Self:
        """A copy of this adapter whose model turns go through `cache` (None: no cache).

        The original is left as it was; everything else (model, limits, clock, HTTP
        client) is the same.
        """
        ...


@runtime_checkable
class AsyncProviderAdapter(ProviderAdapter, Protocol):
    """A `ProviderAdapter` with a native async path: the contract of async agents.

    Two members beside `evaluate`:

    - `aevaluate(...)`: the same as `evaluate` (same arguments, events, response and
      errors), as a coroutine to await on the running event loop; model calls go through
      the provider SDK's async client, tool handlers run on the loop.
    - `is_async`: True when `aevaluate` never blocks the event loop. `AgentLoop.aexecute`
      (and through it the local runner and `EvalLoop`) then awaits the adapter, so a
      sample in flight is a task, not a thread; when False, callers use `evaluate` in a
      worker thread as for any sync adapter.

    `OpenAIAdapter` is async (`openai.AsyncOpenAI`); `FunctionAdapter` is when its model
    function is an `async def`. An adapter without these members is a sync adapter and
    keeps working everywhere. Test with `is_async_adapter(adapter)`.
    """

    @property
    def is_async(self) -> bool:
        """Whether `aevaluate` is safe to await on an event loop (never blocks it)."""
        ...

    async def aevaluate(
        self,
        prompt: Prompt[OutputT],
        *,
        session: Session,
        deadline: Deadline | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
    ) -> PromptResponse[OutputT]:
        """`evaluate`, awaited on the running event loop (same events and errors)."""
        ...


def is_async_adapter(adapter: object) -> bool:
    """Whether `adapter` is an `AsyncProviderAdapter` whose `is_async` is True.

    Examples:
        >>> from weakincentives.adapters import FunctionAdapter
        >>> async def model(request: ModelRequest) -> str:
        ...     return "hi"
        >>> is_async_adapter(FunctionAdapter(model)), is_async_adapter(FunctionAdapter(str))
        (True, False)
    """
    # The two members, read directly: `isinstance` on a runtime-checkable Protocol walks
    # its attributes on every call, and this is asked once per sample.
    return getattr(adapter, "is_async", False) is True and callable(
        getattr(adapter, "aevaluate", None)
    )
