"""`RunSettings`: what `evaluate` was asked to run, checked once."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from weakincentives.errors import ConfigurationError
from weakincentives.experiment import Experiment

__all__ = ["RunSettings"]


@dataclasses.dataclass(frozen=True, slots=True)
class RunSettings:
    """What `evaluate` was asked to run (checked)."""

    experiments: tuple[Experiment, ...]
    """Experiments, in order, with unique names."""
    epochs: int
    """Runs per `(sample, experiment)`."""
    max_concurrent: int
    """Worker tasks (and worker threads)."""
    timeout: float | None
    """Seconds per sample."""

    @classmethod
    def build(
        cls,
        *,
        experiments: Iterable[Experiment],
        epochs: int,
        max_concurrent: int,
        timeout: float | None,
        judge_concurrency: int | None,
    ) -> RunSettings:
        """Check the arguments of `evaluate` and keep the ones the run needs."""
        exps = (experiments,) if isinstance(experiments, Experiment) else tuple(experiments)
        names = [e.name for e in exps if isinstance(e, Experiment)]
        if not exps or len(names) != len(exps) or len(set(names)) != len(names):
            raise ConfigurationError(
                f"experiments must be one or more Experiments with unique names, got {exps!r}"
            )
        for name, value, low in (
            ("epochs", epochs, 1), ("max_concurrent", max_concurrent, 1),
            ("judge_concurrency", judge_concurrency, 1),
        ):  # fmt: skip
            if value is not None and (not isinstance(value, int) or value < low):
                raise ConfigurationError(f"{name} must be an integer >= {low}, got {value!r}")
        if timeout is not None and not timeout > 0:
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout}")
        return cls(exps, epochs, max_concurrent, timeout)
