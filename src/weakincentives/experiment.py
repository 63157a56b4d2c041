"""Experiments: a named configuration variant (prompt overrides tag and feature flags).

An `Experiment` is applied by `AgentLoop.prepare`: its `overrides_tag` selects prompt
overrides through the loop's overrides store, and the experiment itself is seeded into
the session so tools and evaluators can read its flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

__all__ = ["BASELINE", "CONTROL", "Experiment"]


@dataclass(frozen=True, slots=True)
class Experiment:
    """A named variant to evaluate under.

    Examples:
        >>> exp = Experiment(name="concise").with_flag("style", "short")
        >>> exp.get_flag("style")
        'short'
    """

    name: str
    """Unique name of the experiment; results are grouped by it."""
    overrides_tag: str = "latest"
    """Prompt overrides tag the agent loads its section overrides from."""
    flags: Mapping[str, Any] = field(default_factory=dict)
    """Feature flags readable by prompts, tools and evaluators."""
    owner: str | None = None
    """Who owns the experiment (free text)."""
    description: str | None = None
    """What the experiment changes and why."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("Experiment.name must be a non-empty string")
        object.__setattr__(self, "flags", MappingProxyType(dict(self.flags)))

    def __hash__(self) -> int:
        # Flags are left out: their values may be unhashable (lists, dicts), and equal
        # experiments still hash equal, which is all `__hash__` must guarantee.
        return hash((self.name, self.overrides_tag))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Experiment):
            return NotImplemented
        return (
            self.name == other.name
            and self.overrides_tag == other.overrides_tag
            and dict(self.flags) == dict(other.flags)
            and self.owner == other.owner
            and self.description == other.description
        )

    def with_flag(self, name: str, value: Any = True) -> Experiment:
        """Return a copy with flag `name` set to `value`."""
        return replace(self, flags={**self.flags, name: value})

    def with_tag(self, tag: str) -> Experiment:
        """Return a copy that loads prompt overrides from `tag`."""
        return replace(self, overrides_tag=tag)

    def get_flag(self, name: str, default: Any = None) -> Any:
        """Return flag `name`, or `default` when it is not set."""
        return self.flags.get(name, default)

    def has_flag(self, name: str) -> bool:
        """Return whether flag `name` is set (whatever its value)."""
        return name in self.flags


BASELINE = Experiment(name="baseline", description="No overrides, no flags.")
"""The default experiment: the `latest` overrides tag and no flags."""

CONTROL = Experiment(name="control", description="Explicit control group (same as baseline).")
"""An explicit control group; configured like `BASELINE`."""
