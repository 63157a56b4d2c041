"""What an adapter says about itself: the provenance a run records.

Every adapter describes the model it talks to, so a run's manifest can record it and its
fingerprint can refuse a resume against another model. `describe_adapter` works on any
`ProviderAdapter`: one without a `describe()` method is described by its class alone.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "AdapterInfo",
    "DescribedAdapter",
    "describe_adapter",
    "package_version",
    "strip_credentials",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterInfo:
    """The provenance of one adapter: which model, where, and with which settings.

    Examples:
        >>> info = AdapterInfo(provider="openai", model="gpt-4o-mini",
        ...                    parameters={"temperature": 0.0}, adapter="x.OpenAIAdapter")
        >>> info.behaviour()["model"]
        'gpt-4o-mini'
    """

    provider: str
    """Provider family: `"openai"`, `"anthropic"`, `"gemini"`, `"function"`, ..."""
    model: str
    """Model name as sent to the provider (a function's qualified name for `FunctionAdapter`)."""
    base_url: str | None = None
    """Server address with any user, password or query credentials removed (None: default)."""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    """Sampling and request parameters that change what the model does (temperature, ...)."""
    adapter: str = ""
    """Qualified class name of the adapter."""
    version: str = ""
    """Version of the SDK (or package) the adapter talks through."""

    def behaviour(self) -> dict[str, Any]:
        """The fields that change what a model does: these go into a run's fingerprint.

        The adapter class and SDK version are recorded but left out: upgrading an SDK
        does not make a run a different experiment.
        """
        return {
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url,
            "parameters": dict(sorted(self.parameters.items())),
        }

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON values."""
        return {**self.behaviour(), "adapter": self.adapter, "version": self.version}


@runtime_checkable
class DescribedAdapter(Protocol):
    """An adapter that can say which model it talks to (every shipped adapter can)."""

    def describe(self) -> AdapterInfo:
        """This adapter's provenance."""
        ...


def describe_adapter(adapter: object) -> AdapterInfo:
    """`adapter.describe()` when it has one, else an `AdapterInfo` naming only its class."""
    if isinstance(adapter, DescribedAdapter):
        return adapter.describe()
    cls = type(adapter)
    name = f"{cls.__module__}.{cls.__qualname__}"
    return AdapterInfo(provider="unknown", model=name, adapter=name)


def strip_credentials(url: str | None) -> str | None:
    """`url` without a user, password, query string or fragment (they may hold secrets).

    Examples:
        >>> strip_credentials("https://user:pw@example.com:8443/v1?key=abc")
        'https://example.com:8443/v1'
    """
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@functools.cache
def package_version(name: str = "weakincentives") -> str:
    """The installed version of distribution `name` ("unknown" when it is not installed).

    This package's own is its `__version__` (what the run fingerprint records too); others
    are read from the installed metadata, once per process.
    """
    if name == "weakincentives":
        # The root package sits above adapters in the layers, so it is not imported from
        # here; it is always loaded before any of its submodules. Reading the metadata
        # would cost a first run 15 ms (importing `importlib.metadata`, scanning sys.path).
        root = sys.modules.get("weakincentives")
        version = getattr(root, "__version__", None)
        if isinstance(version, str):
            return version
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"
