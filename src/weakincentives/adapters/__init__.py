"""Provider adapters: run a prompt, tools included, against a model.

`ProviderAdapter` is the protocol. `OpenAIAdapter` (in `weakincentives.adapters.openai`)
talks to any OpenAI-compatible server; `FunctionAdapter` makes a Python function the model,
for tests and offline demos.
"""

from weakincentives.adapters._types import (
    Heartbeat,
    ModelRequest,
    ModelTurn,
    PromptResponse,
    ProviderAdapter,
)
from weakincentives.adapters.function import FunctionAdapter, FunctionModel, FunctionReply

__all__ = [
    "FunctionAdapter",
    "FunctionModel",
    "FunctionReply",
    "Heartbeat",
    "ModelRequest",
    "ModelTurn",
    "PromptResponse",
    "ProviderAdapter",
]
