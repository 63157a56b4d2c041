"""The agent runtime: `AgentLoop`, sessions and their events, limits, mailboxes and workers.

This is the production side: what an `EvalLoop` wraps is exactly what serves traffic.
"""

from typing import TYPE_CHECKING, Any

from weakincentives.runtime.agent_worker import (
    AgentLoopRequest,
    AgentLoopResult,
    AgentLoopWorker,
)
from weakincentives.runtime.dlq import DeadLetter, DLQPolicy, RetryPolicy
from weakincentives.runtime.lease import LeaseExtenderConfig, WorkerHeartbeat
from weakincentives.runtime.lifecycle import LoopGroup
from weakincentives.runtime.limits import Budget, BudgetTracker, Deadline
from weakincentives.runtime.mailbox import InMemoryMailbox, Mailbox, Message
from weakincentives.runtime.session import (
    ChatMessage,
    PromptExecuted,
    PromptRendered,
    Session,
    SessionView,
    TokenUsage,
    ToolCall,
    ToolInvoked,
    ToolResult,
)
from weakincentives.runtime.threads import WorkerThreads
from weakincentives.runtime.worker import MailboxWorker, WorkerStats

if TYPE_CHECKING:
    from weakincentives.runtime.agent_loop import AgentLoop, FunctionLoop, MainLoop

# `prompt` and `adapters` import `runtime.session`, and `agent_loop` imports them: loading
# `agent_loop` lazily keeps `import weakincentives.runtime.session` free of that cycle.
_LAZY = {"AgentLoop", "FunctionLoop", "MainLoop"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from weakincentives.runtime import agent_loop

        return getattr(agent_loop, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentLoop",
    "AgentLoopRequest",
    "AgentLoopResult",
    "AgentLoopWorker",
    "Budget",
    "BudgetTracker",
    "ChatMessage",
    "DLQPolicy",
    "DeadLetter",
    "Deadline",
    "FunctionLoop",
    "InMemoryMailbox",
    "LeaseExtenderConfig",
    "LoopGroup",
    "Mailbox",
    "MailboxWorker",
    "MainLoop",
    "Message",
    "PromptExecuted",
    "PromptRendered",
    "RetryPolicy",
    "Session",
    "SessionView",
    "TokenUsage",
    "ToolCall",
    "ToolInvoked",
    "ToolResult",
    "WorkerHeartbeat",
    "WorkerStats",
    "WorkerThreads",
]
