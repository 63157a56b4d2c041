"""Environments: per-sample state an agent acts on, serialized with its kind and version.

`spec/evaluation-abstractions.md`: an environment (a calculator, a sandbox, a file system)
is created per sample by an `environment_factory(sample)`, handed to the agent, and its
final state is serialized onto the result (`EvalResult.environment`). The serialized form
must say what it is (`env_kind`) and which layout it has (`version`), so restoring it into
the wrong class or an incompatible version fails loudly (`EnvironmentMismatchError`)
instead of corrupting state silently.

Examples:
    >>> import anyio
    >>> class Counter:
    ...     ENV_KIND = "counter"
    ...     VERSION = "1.2.0"
    ...     def __init__(self, n: int = 0) -> None:
    ...         self.n = n
    ...     async def serialize(self) -> dict:
    ...         return {"env_kind": self.ENV_KIND, "version": self.VERSION, "n": self.n}
    ...     @staticmethod
    ...     async def deserialize(data: dict) -> "Counter":
    ...         return Counter(data["n"])
    >>> data = anyio.run(serialize_environment, Counter(3))
    >>> anyio.run(restore_environment, data, Counter).n  # kind "counter", version "1.*"
    3
    >>> try:
    ...     check_environment({**data, "version": "2.0.0"}, "counter", "1.*")
    ... except EnvironmentMismatchError as exc:
    ...     print(str(exc)[:72])
    cannot restore a counter environment of version '2.0.0': compatible vers
"""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

from weakincentives.errors import ConfigurationError, EnvironmentMismatchError

from .._records import Sample

__all__ = [
    "Environment",
    "EnvironmentFactory",
    "check_environment",
    "create_environment",
    "restore_environment",
    "serialize_environment",
]

EnvT = TypeVar("EnvT", bound="Environment")


@runtime_checkable
class Environment(Protocol):
    """Per-sample state that can be saved and restored.

    `serialize()` returns a JSON-compatible dict that includes `env_kind` (e.g.
    `"calculator"`) and `version` (e.g. `"1.0.0"`) besides the state; `deserialize(data)`
    rebuilds an environment from it (check the kind and version first, with
    `check_environment`, or restore through `restore_environment`, which does).
    """

    async def serialize(self) -> dict[str, Any]:
        """Serialize the state, including `env_kind` and `version`."""
        ...

    @staticmethod
    async def deserialize(data: dict[str, Any]) -> Environment:
        """Rebuild an environment from `serialize()`'s output."""
        ...


EnvironmentFactory = Callable[[Sample[Any, Any]], "Environment | Awaitable[Environment]"]
"""`factory(sample) -> Environment` (or an awaitable of one): one environment per sample."""


async def create_environment(factory: EnvironmentFactory, sample: Sample[Any, Any]) -> Environment:
    """Call `factory(sample)`, awaiting the result when the factory is async.

    Raises:
        EnvironmentMismatchError: the factory returned something without `serialize`.
        Exception: whatever the factory raised.
    """
    env = factory(sample)
    if inspect.isawaitable(env):
        env = await env
    if not isinstance(env, Environment):
        raise EnvironmentMismatchError(
            f"environment_factory returned a {type(env).__name__}, which is not an "
            "Environment: give it async serialize() and a static async deserialize(data)"
        )
    return env


async def serialize_environment(env: Environment) -> dict[str, Any]:
    """Return `await env.serialize()` after checking it names its kind and version.

    Raises:
        EnvironmentMismatchError: the data is not a dict with string `env_kind` and
            `version`.
        Exception: whatever `serialize` raised.
    """
    data = await env.serialize()
    _kind_and_version(data, f"{type(env).__name__}.serialize()")
    return dict(data)


def check_environment(
    data: Mapping[str, Any],
    expected_kind: str,
    compatible_versions: str | Collection[str] = "*",
) -> None:
    """Check that serialized environment `data` may be restored as `expected_kind`.

    Args:
        data: What `Environment.serialize()` returned.
        expected_kind: The `env_kind` the restoring class handles.
        compatible_versions: Version patterns the restoring code reads: exact versions
            (`"1.0.0"`) or shell-style patterns (`"1.*"`); one string or several.

    Raises:
        EnvironmentMismatchError: `data` lacks `env_kind`/`version`, is of another kind,
            or its version matches none of `compatible_versions`.
    """
    kind, version = _kind_and_version(data, "serialized environment")
    if kind != expected_kind:
        raise EnvironmentMismatchError(
            f"cannot restore a {kind!r} environment as {expected_kind!r}: the snapshot was "
            "written by another environment class; restore it with that class"
        )
    patterns = (
        (compatible_versions,)
        if isinstance(compatible_versions, str)
        else tuple(compatible_versions)
    )
    if not any(fnmatch.fnmatchcase(version, pattern) for pattern in patterns):
        shown = ", ".join(repr(p) for p in patterns) or "none"
        raise EnvironmentMismatchError(
            f"cannot restore a {kind} environment of version {version!r}: compatible "
            f"versions are {shown}; migrate the snapshot or restore it with the code that "
            "wrote it"
        )


async def restore_environment(
    data: Mapping[str, Any],
    env_type: type[EnvT],
    expected_kind: str | None = None,
    compatible_versions: str | Collection[str] | None = None,
) -> EnvT:
    """Check `data` (see `check_environment`) and rebuild it with `env_type.deserialize`.

    Args:
        data: What `Environment.serialize()` returned (e.g. `EvalResult.environment`).
        env_type: The environment class to restore into.
        expected_kind: Defaults to `env_type.ENV_KIND`.
        compatible_versions: Defaults to the major version of `env_type.VERSION`
            (`"1.4.2"` reads `"1.*"`).

    Raises:
        EnvironmentMismatchError: wrong kind, incompatible version, or the restored object
            is not an `env_type`.
        ConfigurationError: a default is needed but `env_type` lacks `ENV_KIND`/`VERSION`.
    """
    kind = expected_kind if expected_kind is not None else _class_attr(env_type, "ENV_KIND")
    if compatible_versions is None:
        major = _class_attr(env_type, "VERSION").split(".", 1)[0]
        compatible_versions = f"{major}.*"
    check_environment(data, kind, compatible_versions)
    env = await env_type.deserialize(dict(data))
    if not isinstance(env, env_type):
        raise EnvironmentMismatchError(
            f"{env_type.__name__}.deserialize returned a {type(env).__name__}, "
            f"not a {env_type.__name__}"
        )
    return env


def _kind_and_version(data: object, what: str) -> tuple[str, str]:
    if not isinstance(data, Mapping):
        raise EnvironmentMismatchError(
            f"{what} returned a {type(data).__name__}, not a dict with env_kind and version"
        )
    kind, version = data.get("env_kind"), data.get("version")
    if not isinstance(kind, str) or not kind or not isinstance(version, str) or not version:
        raise EnvironmentMismatchError(
            f"{what} must include 'env_kind' and 'version' as non-empty strings "
            f"(got env_kind={kind!r}, version={version!r}), so it can be restored safely"
        )
    return kind, version


def _class_attr(env_type: type[Any], name: str) -> str:
    value = getattr(env_type, name, None)
    if not isinstance(value, str) or not value:
        raise ConfigurationError(
            f"{env_type.__name__} has no {name} string; pass "
            f"{'expected_kind' if name == 'ENV_KIND' else 'compatible_versions'} explicitly"
        )
    return value
