"""The agent runtime: `AgentLoop`, sessions and their events, limits, mailboxes and workers.

This is the production side: what an `EvalLoop` wraps is exactly what serves traffic.
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from weakincentives.runtime.agent_loop import AgentLoop, FunctionLoop, MainLoop
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

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.runtime.agent_worker": (
            "AgentLoopRequest",
            "AgentLoopResult",
            "AgentLoopWorker",
        ),
        "weakincentives.runtime.dlq": ("DeadLetter", "DLQPolicy", "RetryPolicy"),
        "weakincentives.runtime.lease": ("LeaseExtenderConfig", "WorkerHeartbeat"),
        "weakincentives.runtime.lifecycle": ("LoopGroup",),
        "weakincentives.runtime.limits": ("Budget", "BudgetTracker", "Deadline"),
        "weakincentives.runtime.mailbox": ("InMemoryMailbox", "Mailbox", "Message"),
        "weakincentives.runtime.session": (
            "ChatMessage",
            "PromptExecuted",
            "PromptRendered",
            "Session",
            "SessionView",
            "TokenUsage",
            "ToolCall",
            "ToolInvoked",
            "ToolResult",
        ),
        "weakincentives.runtime.threads": ("WorkerThreads",),
        "weakincentives.runtime.worker": ("MailboxWorker", "WorkerStats"),
        "weakincentives.runtime.agent_loop": ("AgentLoop", "FunctionLoop", "MainLoop"),
    },
)
