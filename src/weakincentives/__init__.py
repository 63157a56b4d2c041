"""weakincentives: evaluate the agent you ship. EvalLoop wraps AgentLoop.

The top-level package re-exports the names most programs need; subpackages hold the rest:
`weakincentives.prompt`, `weakincentives.adapters`, `weakincentives.runtime`,
`weakincentives.evals`.
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from weakincentives.adapters import FunctionAdapter, PromptResponse, ProviderAdapter
    from weakincentives.clock import SYSTEM_CLOCK, Clock, FakeClock, SystemClock
    from weakincentives.errors import WinkError
    from weakincentives.experiment import BASELINE, CONTROL, Experiment
    from weakincentives.prompt import (
        LocalPromptOverridesStore,
        MarkdownSection,
        Prompt,
        PromptTemplate,
        Tool,
        ToolContext,
        ToolResult,
    )
    from weakincentives.runtime import (
        AgentLoop,
        Budget,
        Deadline,
        FunctionLoop,
        MainLoop,
        Session,
        SessionView,
        TokenUsage,
        ToolInvoked,
    )


__version__ = "0.1.0"

__all__ = [
    "BASELINE",
    "CONTROL",
    "SYSTEM_CLOCK",
    "AgentLoop",
    "Budget",
    "Clock",
    "Deadline",
    "Experiment",
    "FakeClock",
    "FunctionAdapter",
    "FunctionLoop",
    "LocalPromptOverridesStore",
    "MainLoop",
    "MarkdownSection",
    "Prompt",
    "PromptResponse",
    "PromptTemplate",
    "ProviderAdapter",
    "Session",
    "SessionView",
    "SystemClock",
    "TokenUsage",
    "Tool",
    "ToolContext",
    "ToolInvoked",
    "ToolResult",
    "WinkError",
    "__version__",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.adapters": ("FunctionAdapter", "PromptResponse", "ProviderAdapter"),
        "weakincentives.clock": ("SYSTEM_CLOCK", "Clock", "FakeClock", "SystemClock"),
        "weakincentives.errors": ("WinkError",),
        "weakincentives.experiment": ("BASELINE", "CONTROL", "Experiment"),
        "weakincentives.prompt": (
            "LocalPromptOverridesStore",
            "MarkdownSection",
            "Prompt",
            "PromptTemplate",
            "Tool",
            "ToolContext",
            "ToolResult",
        ),
        "weakincentives.runtime": (
            "AgentLoop",
            "Budget",
            "Deadline",
            "FunctionLoop",
            "MainLoop",
            "Session",
            "SessionView",
            "TokenUsage",
            "ToolInvoked",
        ),
    },
)
