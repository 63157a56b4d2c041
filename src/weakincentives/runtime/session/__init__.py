"""Sessions: the typed record of one agent run.

An adapter publishes `PromptRendered`, `ToolInvoked` and `PromptExecuted` events into the
session; session-aware evaluators read them back through a read-only `SessionView`.
"""

from weakincentives.runtime.session._events import (
    ChatMessage,
    FailureStage,
    PromptExecuted,
    PromptFailed,
    PromptRendered,
    ThinkingBlock,
    TokenUsage,
    ToolCall,
    ToolInvoked,
    ToolResult,
    TurnUsage,
)
from weakincentives.runtime.session._session import (
    Reducer,
    Session,
    SessionProtocol,
    SessionSnapshot,
    SessionView,
    SessionViewProtocol,
    Slice,
    SliceView,
    append_reducer,
    replace_latest,
    upsert_by,
)

__all__ = [
    "ChatMessage",
    "FailureStage",
    "PromptExecuted",
    "PromptFailed",
    "PromptRendered",
    "Reducer",
    "Session",
    "SessionProtocol",
    "SessionSnapshot",
    "SessionView",
    "SessionViewProtocol",
    "Slice",
    "SliceView",
    "ThinkingBlock",
    "TokenUsage",
    "ToolCall",
    "ToolInvoked",
    "ToolResult",
    "TurnUsage",
    "append_reducer",
    "replace_latest",
    "upsert_by",
]
