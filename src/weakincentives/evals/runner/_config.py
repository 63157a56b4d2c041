"""`EvalConfig`: a local run's target and options as one value, and `prepare_messages`.

The second design (`spec/evaluation-abstractions.md`) configures a run with one frozen
value, `evaluate(samples, config, score_fn)`, and derives variants with
`dataclasses.replace(base_config, max_samples=100, experiment_name="...")`. `EvalConfig`
is that value: it names the target (what the second design calls the endpoint) and the
options of `evaluate` it holds. Passed as `evaluate`'s second argument, its values are
used for those options.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from weakincentives.errors import ConfigurationError
from weakincentives.experiment import Experiment
from weakincentives.runtime.agent_loop import AgentLoop
from weakincentives.runtime.session import ChatMessage

from .._records import Sample
from ..dataset import Dataset

__all__ = ["EvalConfig", "PrepareMessages", "limit_samples", "with_prepared_messages"]

PrepareMessages = Callable[[Sample[Any, Any]], Sequence[ChatMessage]]
"""`prepare_messages(sample) -> messages`: what the target receives instead of the input."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalConfig:
    """A local run's target and options, as one frozen value.

    Examples:
        >>> import anyio
        >>> from dataclasses import replace
        >>> from weakincentives.evals import Sample, evaluate, exact_match
        >>> base = EvalConfig(target=str.upper, max_concurrent=4)
        >>> config = replace(base, max_samples=1, experiment_name="upper_smoke")
        >>> samples = [Sample(id="a", input="hi", expected="HI"), Sample(id="b", input="x")]
        >>> report = anyio.run(evaluate, samples, config, exact_match)
        >>> report.total, report.config["experiment_name"], report.results[0].experiment_name
        (1, 'upper_smoke', 'upper_smoke')
    """

    target: AgentLoop[Any, Any] | Callable[..., Any]
    """What runs each sample: an `AgentLoop` or a task function (see `evaluate`)."""
    max_samples: int | None = None
    """Run only the first `max_samples` samples of the dataset (None: all)."""
    max_concurrent: int = 16
    """Samples in flight at once."""
    experiment_name: str | None = None
    """Name of the run's experiment (results carry it; the report's config records it).
    None runs under `BASELINE`."""
    epochs: int = 1
    """Runs of each sample (pass@k)."""
    timeout: float | None = None
    """Seconds per sample (agent and scoring)."""

    def __post_init__(self) -> None:
        if self.max_samples is not None and self.max_samples < 0:
            raise ConfigurationError(f"EvalConfig.max_samples must be >= 0, got {self.max_samples}")

    def experiments(self) -> tuple[Experiment, ...] | None:
        """The experiment `experiment_name` names, or None to keep `evaluate`'s default."""
        if self.experiment_name is None:
            return None
        return (Experiment(name=self.experiment_name),)


def limit_samples(dataset: Iterable[Any], max_samples: int | None) -> Iterable[Any]:
    """The first `max_samples` samples; a list stays a list (hashed up front), else lazy."""
    if max_samples is None:
        return dataset
    first = itertools.islice(dataset, max_samples)
    return list(first) if isinstance(dataset, Sequence | Dataset) else first


def with_prepared_messages(
    dataset: Iterable[Any], prepare_messages: PrepareMessages | None
) -> Iterable[Any]:
    """Each sample with `input` replaced by `prepare_messages(sample)` (as a list)."""
    if prepare_messages is None:
        return dataset

    def prepared(sample: Any) -> Any:
        if not isinstance(sample, Sample):
            return sample  # the runner reports what is not a sample
        return replace(sample, input=list(prepare_messages(sample)))

    if isinstance(dataset, Sequence | Dataset):
        return [prepared(sample) for sample in dataset]
    return (prepared(sample) for sample in dataset)
