"""Provider adapters: run a prompt, tools included, against a model.

`ProviderAdapter` is the protocol; `AsyncProviderAdapter` adds `aevaluate`, the async path
that lets an agent in flight be a task instead of a thread (`is_async_adapter` tells).
`OpenAIAdapter` (in `weakincentives.adapters.openai`) talks to any OpenAI-compatible
server, `AnthropicAdapter` (`weakincentives[anthropic]`) to Claude's Messages API and
`GeminiAdapter` (`weakincentives[gemini]`) to the Gemini API; `FunctionAdapter` makes a
Python function the model, for tests and offline demos. All take a `ResponseCache`
(`SQLiteResponseCache` on disk) and are `CacheableAdapter`s: `adapter.with_cache(cache)` is
a copy that replays recorded turns. Each describes itself (`describe()`), and `pricing`
turns their token usage into dollars.
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from weakincentives.adapters._cache import (
        NullCache,
        SQLiteResponseCache,
        acached_model_call,
        cache_key,
        cached_model_call,
    )
    from weakincentives.adapters._override import (
        ModelConfigurable,
        configure_model,
        parse_model_args,
    )
    from weakincentives.adapters._provenance import (
        AdapterInfo,
        DescribedAdapter,
        describe_adapter,
        package_version,
        strip_credentials,
    )
    from weakincentives.adapters._types import (
        AsyncProviderAdapter,
        CacheableAdapter,
        CacheStats,
        Heartbeat,
        ModelRequest,
        ModelTurn,
        PromptResponse,
        ProviderAdapter,
        ResponseCache,
        is_async_adapter,
    )
    from weakincentives.adapters.anthropic import AnthropicAdapter
    from weakincentives.adapters.function import FunctionAdapter, FunctionModel, FunctionReply
    from weakincentives.adapters.gemini import GeminiAdapter
    from weakincentives.adapters.openai import OpenAIAdapter


__all__ = [
    "AdapterInfo",
    "AnthropicAdapter",
    "AsyncProviderAdapter",
    "CacheStats",
    "CacheableAdapter",
    "DescribedAdapter",
    "FunctionAdapter",
    "FunctionModel",
    "FunctionReply",
    "GeminiAdapter",
    "Heartbeat",
    "ModelConfigurable",
    "ModelRequest",
    "ModelTurn",
    "NullCache",
    "OpenAIAdapter",
    "PromptResponse",
    "ProviderAdapter",
    "ResponseCache",
    "SQLiteResponseCache",
    "acached_model_call",
    "cache_key",
    "cached_model_call",
    "configure_model",
    "describe_adapter",
    "is_async_adapter",
    "package_version",
    "parse_model_args",
    "strip_credentials",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.adapters._cache": (
            "NullCache",
            "SQLiteResponseCache",
            "acached_model_call",
            "cache_key",
            "cached_model_call",
        ),
        "weakincentives.adapters._override": (
            "ModelConfigurable",
            "configure_model",
            "parse_model_args",
        ),
        "weakincentives.adapters._provenance": (
            "AdapterInfo",
            "DescribedAdapter",
            "describe_adapter",
            "package_version",
            "strip_credentials",
        ),
        "weakincentives.adapters._types": (
            "AsyncProviderAdapter",
            "CacheableAdapter",
            "CacheStats",
            "Heartbeat",
            "ModelRequest",
            "ModelTurn",
            "PromptResponse",
            "ProviderAdapter",
            "ResponseCache",
            "is_async_adapter",
        ),
        "weakincentives.adapters.function": ("FunctionAdapter", "FunctionModel", "FunctionReply"),
        "weakincentives.adapters.anthropic": ("AnthropicAdapter",),
        "weakincentives.adapters.gemini": ("GeminiAdapter",),
        "weakincentives.adapters.openai": ("OpenAIAdapter",),
    },
)
