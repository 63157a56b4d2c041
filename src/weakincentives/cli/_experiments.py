"""Parsing `--experiment NAME[:TAG][,FLAG=VALUE]...` into `Experiment`s.

Examples of the syntax:

- `careful` -> `Experiment("careful")` (overrides tag `latest`, no flags);
- `careful:careful` -> loads prompt overrides tagged `careful`;
- `fast,model=small,retries=2,strict=true` -> flags `{"model": "small", "retries": 2,
  "strict": True}`: a value that parses as JSON (numbers, `true`, `null`, `"quoted"`,
  `[...]`) is used as parsed, anything else is kept as text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from weakincentives.errors import ConfigurationError
from weakincentives.experiment import Experiment

__all__ = ["parse_experiment", "parse_experiments"]

_SYNTAX = "NAME[:TAG][,FLAG=VALUE]..."


def parse_experiment(spec: str) -> Experiment:
    """Parse one `--experiment` value.

    Examples:
        >>> exp = parse_experiment("careful:strict,retries=2,style=short")
        >>> exp.name, exp.overrides_tag, dict(exp.flags)
        ('careful', 'strict', {'retries': 2, 'style': 'short'})

    Raises:
        ConfigurationError: an empty name or tag, or a flag without `=`.
    """
    head, *flag_parts = spec.split(",")
    name, sep, tag = head.strip().partition(":")
    name, tag = name.strip(), tag.strip()
    if not name:
        raise ConfigurationError(f"--experiment {spec!r}: the name is empty; use {_SYNTAX}")
    if sep and not tag:
        raise ConfigurationError(
            f"--experiment {spec!r}: nothing after ':'; give an overrides tag or drop the ':'"
        )
    flags: dict[str, Any] = {}
    for part in flag_parts:
        key, eq, raw = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigurationError(
                f"--experiment {spec!r}: flag {part.strip()!r} is not FLAG=VALUE; use {_SYNTAX}"
            )
        flags[key] = _flag_value(raw.strip())
    return Experiment(name=name, overrides_tag=tag or "latest", flags=flags)


def parse_experiments(
    specs: Sequence[str], default: Iterable[Experiment] = ()
) -> tuple[Experiment, ...]:
    """Parse every `--experiment` value; `default` when there are none.

    Raises:
        ConfigurationError: a value is malformed, or two experiments share a name.
    """
    experiments = tuple(parse_experiment(s) for s in specs) if specs else tuple(default)
    seen: set[str] = set()
    for experiment in experiments:
        if experiment.name in seen:
            raise ConfigurationError(
                f"experiment {experiment.name!r} is given twice; experiment names must be unique"
            )
        seen.add(experiment.name)
    return experiments


def _flag_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw
