"""Events an adapter publishes into a session while it runs a prompt."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple

from weakincentives._frozen import quick_init

__all__ = [
    "ChatMessage",
    "PromptExecuted",
    "PromptFailed",
    "PromptRendered",
    "ThinkingBlock",
    "TokenUsage",
    "ToolCall",
    "ToolInvoked",
    "ToolResult",
    "TurnUsage",
]


@quick_init
@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens used by one or more model calls."""

    input_tokens: int = 0
    """Prompt tokens sent to the model."""
    output_tokens: int = 0
    """Completion tokens produced by the model."""
    cached_tokens: int = 0
    """Prompt tokens the provider served from its cache: cache reads (a subset of
    `input_tokens`)."""
    cache_write_tokens: int = 0
    """Prompt tokens the provider wrote into its cache (a subset of `input_tokens`; Anthropic
    bills them above the plain input price)."""
    reasoning_tokens: int = 0
    """Output tokens spent on thinking (a subset of `output_tokens`)."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


_NO_TOKENS = TokenUsage()


class TurnUsage(NamedTuple):
    """Tokens and cost of one model call, as an eval result records it (`EvalResult.turns`).

    A named tuple, not a dataclass, so a result line stores each turn as a three-item
    array (`[40, 10, 0.00016]`), a few bytes per model call.

    Examples:
        >>> TurnUsage(input_tokens=40, output_tokens=10, cost=0.00016).output_tokens
        10
    """

    input_tokens: int
    """Prompt tokens sent with the call (cache reads and writes included)."""
    output_tokens: int
    """Tokens the model produced (thinking included)."""
    cost: float | None = None
    """Dollars the call cost at its model's price (None: unpriced, or no price table)."""


@quick_init
@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call requested by the model."""

    id: str
    """Provider-assigned call id; the tool's answer refers to it."""
    name: str
    """Name of the tool to call."""
    arguments: str
    """Arguments as the JSON text the model produced (may be invalid)."""
    signature: str | None = None
    """An opaque signature the provider attached to the call (Gemini's thought signature),
    sent back with it on the next turn."""


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """A piece of a model's visible reasoning, kept so the next turn can send it back.

    Providers with extended thinking (Anthropic, Gemini) require the thinking of a turn
    that called tools to be returned, signature intact, with the tool results.
    """

    text: str = ""
    """The thinking text ("" when the provider withheld it)."""
    signature: str | None = None
    """The provider's opaque signature of the block."""
    redacted: bool = False
    """True for a block the provider encrypted (Anthropic `redacted_thinking`); its
    opaque data is in `signature`."""


@quick_init
@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a conversation, in the chat-completions shape."""

    role: Literal["system", "user", "assistant", "tool"]
    """Who speaks."""
    content: str | None = None
    """Text of the message (None for an assistant turn with only tool calls)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls requested by an assistant turn."""
    tool_call_id: str | None = None
    """For a `tool` message: the call it answers."""
    name: str | None = None
    """For a `tool` message: the tool's name."""
    thinking: tuple[ThinkingBlock, ...] = ()
    """For an assistant turn: the reasoning it showed before answering (extended thinking)."""
    is_error: bool = False
    """For a `tool` message: the tool failed (providers that mark failed results see it)."""


@quick_init
@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool handler returns; `message` goes back to the model."""

    message: str
    """Text sent back to the model."""
    value: Any = None
    """Structured value for code that reads the session (not sent to the model)."""
    success: bool = True
    """False when the tool failed; the model sees the message and may try again."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PromptRendered:
    """A prompt was rendered and is about to be sent."""

    prompt_ns: str
    """Namespace of the prompt template."""
    prompt_key: str
    """Key of the prompt template."""
    prompt_name: str
    """Display name of the prompt."""
    messages: tuple[ChatMessage, ...]
    """The rendered messages."""
    tools: tuple[str, ...] = ()
    """Names of the tools offered to the model."""
    overrides_tag: str | None = None
    """Overrides tag applied while rendering, if any."""
    applied_overrides: tuple[str, ...] = ()
    """Keys of the sections whose body came from an override."""
    rendered_at: datetime
    """When the prompt was rendered."""
    output_type: str | None = None
    """Qualified name of the structured output type, None for a text prompt."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInvoked:
    """A tool call was executed (or rejected) during a run."""

    name: str
    """Tool name the model asked for."""
    params: Mapping[str, Any]
    """Arguments as decoded from the model (empty if they were not JSON)."""
    result: ToolResult
    """What the tool returned (a failed result for invalid params or a raising handler)."""
    success: bool
    """Same as `result.success`: false for validation errors and handler exceptions."""
    call_id: str
    """The provider's tool call id."""
    duration_ms: float
    """Wall time spent in the handler."""
    error: str | None = None
    """Exception type and message when the handler raised or params failed validation."""
    prompt_name: str = ""
    """Name of the prompt whose run called the tool."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PromptExecuted:
    """A prompt run finished with an answer."""

    prompt_ns: str
    """Namespace of the prompt template."""
    prompt_key: str
    """Key of the prompt template."""
    prompt_name: str
    """Display name of the prompt."""
    text: str | None
    """Final assistant text."""
    output: Any = None
    """Parsed structured output (None for text prompts)."""
    usage: TokenUsage = _NO_TOKENS  # one shared immutable zero, not a factory call per event
    """Tokens used across every model call of the run."""
    model: str | None = None
    """Model name reported by the adapter."""
    model_requests: int = 0
    """Number of model calls the run made (one per turn)."""
    tool_calls: int = 0
    """Number of tool calls executed."""
    duration_ms: float = 0.0
    """Wall time of the whole run."""
    turn_usage: tuple[TokenUsage, ...] = ()
    """Tokens of each model call, in order (one per turn; they add up to `usage`)."""


FailureStage = Literal["agent", "output_parsing", "timeout", "budget"]
"""Where a prompt run failed: calling the model or a tool (`agent`), parsing the final
answer into the output type (`output_parsing`), the deadline, or the token budget."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PromptFailed:
    """A prompt run raised before its answer: the evidence gathered up to the failure.

    Published by the adapter just before the exception leaves `evaluate`, so an errored
    sample keeps its partial transcript, tool calls (the `ToolInvoked` events before it)
    and the tokens already spent.
    """

    prompt_ns: str
    """Namespace of the prompt template."""
    prompt_key: str
    """Key of the prompt template."""
    prompt_name: str
    """Display name of the prompt."""
    messages: tuple[ChatMessage, ...]
    """The conversation up to the failure, rendered prompt included."""
    usage: TokenUsage = _NO_TOKENS
    """Tokens used by the model calls that answered."""
    model: str | None = None
    """Model name reported by the adapter, if a call answered."""
    model_requests: int = 0
    """Model calls that answered before the failure."""
    tool_calls: int = 0
    """Tool calls executed before the failure."""
    stage: FailureStage = "agent"
    """Where the run failed."""
    error_type: str = ""
    """Class name of the exception."""
    error: str = ""
    """The exception's message."""
    duration_ms: float = 0.0
    """Wall time until the failure."""
    turn_usage: tuple[TokenUsage, ...] = ()
    """Tokens of each model call that answered, in order (they add up to `usage`)."""
