"""Prompts and tools: the agent's templates, typed tool calls and prompt overrides.

Build a `PromptTemplate` from `MarkdownSection`s and `Tool`s, bind params with
`Prompt(template).bind(...)`, and let an adapter run it. Overrides stored per tag in a
`LocalPromptOverridesStore` replace section bodies, which is how experiments change
prompts without changing code.
"""

from weakincentives.prompt._overrides import (
    LocalPromptOverridesStore,
    PromptOverridesStore,
    SectionOverride,
    StaleOverrideWarning,
    section_hash,
)
from weakincentives.prompt._template import (
    MarkdownSection,
    Prompt,
    PromptTemplate,
    RenderedPrompt,
)
from weakincentives.prompt._tool import Tool, ToolContext, ToolHandler, ToolSpec
from weakincentives.runtime.session import ToolResult

__all__ = [
    "LocalPromptOverridesStore",
    "MarkdownSection",
    "Prompt",
    "PromptOverridesStore",
    "PromptTemplate",
    "RenderedPrompt",
    "SectionOverride",
    "StaleOverrideWarning",
    "Tool",
    "ToolContext",
    "ToolHandler",
    "ToolResult",
    "ToolSpec",
    "section_hash",
]
