"""Provider adapters: run a prompt, tools included, against a model.

`ProviderAdapter` is the protocol. `OpenAIAdapter` (in `weakincentives.adapters.openai`)
talks to any OpenAI-compatible server; `FunctionAdapter` makes a Python function the model,
for tests and offline demos. Both take a `ResponseCache` (`SQLiteResponseCache` on disk) and
are `CacheableAdapter`s: `adapter.with_cache(cache)` is a copy that replays recorded turns.
"""

from typing import TYPE_CHECKING, Any

from weakincentives.adapters._cache import (
    NullCache,
    SQLiteResponseCache,
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
    CacheableAdapter,
    CacheStats,
    Heartbeat,
    ModelRequest,
    ModelTurn,
    PromptResponse,
    ProviderAdapter,
    ResponseCache,
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
    "CacheStats",
    "CacheableAdapter",
    "DescribedAdapter",
    "FunctionAdapter",
    "FunctionModel",
    "FunctionReply",
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
    "cache_key",
    "cached_model_call",
    "configure_model",
    "describe_adapter",
    "package_version",
    "parse_model_args",
    "strip_credentials",
]
