"""Choosing the model from outside the code: `wink eval run --model NAME --model-arg k=v`.

An adapter that can be pointed at another model, or given other sampling parameters,
without editing the code that built it implements `ModelConfigurable.with_model`: a
copy with the new model and parameters, the original left as it was. `configure_model`
applies it to any adapter and says clearly when one cannot be configured.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, Self, runtime_checkable

from weakincentives.errors import ConfigurationError

__all__ = ["ModelConfigurable", "configure_model", "parse_model_args"]


@runtime_checkable
class ModelConfigurable(Protocol):
    """An adapter whose model and sampling parameters can be replaced (a copy is made)."""

    def with_model(self, model: str | None = None, **parameters: Any) -> Self:
        """A copy of this adapter using `model` (None: the same) and `parameters`.

        `parameters` are sampling or request options (`temperature=0`, `top_p=0.9`, ...);
        they are merged over the adapter's own.

        Raises:
            ConfigurationError: a parameter this adapter cannot take.
        """
        ...


def configure_model(
    adapter: object, model: str | None, parameters: Mapping[str, Any], *, what: str = "--model"
) -> Any:
    """`adapter.with_model(model, **parameters)`, or `adapter` when there is nothing to change.

    Raises:
        ConfigurationError: the adapter has no `with_model`, or refuses a parameter.
    """
    if model is None and not parameters:
        return adapter
    if not isinstance(adapter, ModelConfigurable):
        cls = type(adapter)
        raise ConfigurationError(
            f"{what}: the adapter {cls.__module__}.{cls.__qualname__} cannot be given another "
            "model or parameters (it has no with_model method); set the model in code"
        )
    return adapter.with_model(model, **parameters)


def parse_model_args(specs: Iterable[str], *, what: str = "--model-arg") -> dict[str, Any]:
    """`["temperature=0", "top_p=0.9"]` -> `{"temperature": 0, "top_p": 0.9}`.

    A value is read as JSON when it is JSON (`0`, `0.5`, `true`, `null`, `[...]`) and is
    a string otherwise.

    Examples:
        >>> parse_model_args(["temperature=0", "top_p=0.9", "user=eval-bot"])
        {'temperature': 0, 'top_p': 0.9, 'user': 'eval-bot'}

    Raises:
        ConfigurationError: a spec is not `KEY=VALUE`.
    """
    out: dict[str, Any] = {}
    for spec in specs:
        key, eq, text = spec.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise ConfigurationError(
                f"{what} {spec!r} must look like KEY=VALUE, e.g. temperature=0"
            )
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out
