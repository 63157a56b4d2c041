"""Tools: typed params, a handler, and a JSON schema for the model."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from weakincentives import serde
from weakincentives.errors import SerdeError
from weakincentives.runtime.session import ToolInvoked, ToolResult

if TYPE_CHECKING:
    from weakincentives.experiment import Experiment
    from weakincentives.runtime.session import Session

__all__ = ["Tool", "ToolContext", "ToolHandler", "ToolSpec"]

ParamsT = TypeVar("ParamsT")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a tool handler can see besides its params."""

    session: Session
    """The session of the current run (read it, dispatch into it)."""
    prompt_name: str
    """Name of the prompt being run."""
    call_id: str
    """The provider's id for this call."""
    heartbeat: Callable[[], None] | None = None
    """Call during long work so leases are extended and watchdogs stay calm."""

    @property
    def experiment(self) -> Experiment | None:
        """The experiment the run is under (seeded into the session by `AgentLoop`)."""
        from weakincentives.experiment import Experiment

        return self.session[Experiment].latest()


ToolHandler = Callable[[ParamsT, ToolContext], ToolResult]
"""`handler(params, context) -> ToolResult`."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """How a tool is described to the model."""

    name: str
    """Tool name."""
    description: str
    """What the tool does, for the model."""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    """JSON schema of the params object."""


# No slots: `Tool[T](...)` sets __orig_class__, which slotted frozen classes reject.
@dataclass(frozen=True)
class Tool(Generic[ParamsT]):
    """A tool the model may call.

    Examples:
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class AddParams:
        ...     a: int
        ...     b: int
        >>> add = Tool(
        ...     name="add",
        ...     description="Add two integers.",
        ...     params_type=AddParams,
        ...     handler=lambda p, ctx: ToolResult(message=str(p.a + p.b), value=p.a + p.b),
        ... )
        >>> add.spec().parameters["required"]
        ['a', 'b']
    """

    name: str
    """Name the model calls the tool by (letters, digits, `_` and `-`)."""
    description: str
    """What the tool does, shown to the model."""
    params_type: type[ParamsT]
    """Dataclass the JSON arguments are validated into."""
    handler: ToolHandler[ParamsT]
    """Called with validated params and a `ToolContext`."""

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "_-" for c in self.name):
            raise ValueError(
                f"tool name {self.name!r} must be non-empty letters, digits, '_' or '-'",
            )

    def spec(self) -> ToolSpec:
        """Return the model-facing description with the params' JSON schema."""
        return ToolSpec(self.name, self.description, serde.json_schema(self.params_type))

    def invoke(self, arguments: str, context: ToolContext) -> ToolInvoked:
        """Validate `arguments`, run the handler, and describe what happened.

        Never raises for bad arguments or a raising handler: both become a failed
        `ToolResult` whose message tells the model what went wrong.
        """
        start = time.perf_counter()
        params_dict = _decode_arguments(arguments)
        error: str | None = None
        try:
            params: ParamsT = serde.loads(self.params_type, arguments or "{}")
        except SerdeError as exc:
            error = f"ToolValidationError: {exc}"
            result = ToolResult(
                message=f"Invalid arguments for tool {self.name!r}: {exc}. Fix and call again.",
                success=False,
            )
        else:
            try:
                result = self.handler(params, context)
            except Exception as exc:  # a tool failure is data: the model sees it
                error = f"{type(exc).__name__}: {exc}"
                result = ToolResult(message=f"Tool {self.name!r} failed: {error}", success=False)
        return ToolInvoked(
            name=self.name,
            params=params_dict,
            result=result,
            success=result.success,
            call_id=context.call_id,
            duration_ms=(time.perf_counter() - start) * 1000.0,
            error=error,
            prompt_name=context.prompt_name,
        )


def _decode_arguments(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
