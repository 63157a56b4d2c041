"""Provider adapters: run a prompt, tools included, against a model.

`ProviderAdapter` is the protocol; `AsyncProviderAdapter` adds `aevaluate`, the async path
that lets an agent in flight be a task instead of a thread (`is_async_adapter` tells).
`OpenAIAdapter` (in `weakincentives.adapters.openai`) talks to any OpenAI-compatible
server; `FunctionAdapter` makes a Python function the model, for tests and offline demos.
Both take a `ResponseCache` (`SQLiteResponseCache` on disk) and are `CacheableAdapter`s:
`adapter.with_cache(cache)` is a copy that replays recorded turns.
"""

from typing import TYPE_CHECKING, Any

from weakincentives.adapters._cache import (
    NullCache,
    SQLiteResponseCache,
    acached_model_call,
    cache_key,
    cached_model_call,
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
from weakincentives.adapters.function import FunctionAdapter, FunctionModel, FunctionReply

if TYPE_CHECKING:
    from weakincentives.adapters.openai import OpenAIAdapter


def __getattr__(name: str) -> Any:
    # Importing the openai SDK costs about a second: load it only when asked for.
    if name == "OpenAIAdapter":
        from weakincentives.adapters.openai import OpenAIAdapter

        return OpenAIAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AdapterInfo",
    "AsyncProviderAdapter",
    "CacheStats",
    "CacheableAdapter",
    "DescribedAdapter",
    "FunctionAdapter",
    "FunctionModel",
    "FunctionReply",
    "Heartbeat",
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
    "describe_adapter",
    "is_async_adapter",
    "package_version",
    "strip_credentials",
]
