"""What the distributed client does with requests found lost (`_tracking.RequestDeadline`).

The first time a request is found lost it is sent again; the second time it is recorded
as an error result of kind `lost`. Each step is one log line.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from weakincentives.evals import EvalResult, Experiment, Sample, Score

__all__ = ["Collector", "LostRequests"]

_log = logging.getLogger("weakincentives.contrib.distributed._client")

_Key = tuple[str, str, int]
"""`(sample_id, experiment_name, epoch)`."""


class Collector(Protocol):
    """What `LostRequests` needs of the client's collector."""

    @property
    def run_id(self) -> str:
        """The run."""
        ...

    @property
    def done(self) -> Any:
        """The keys that have a result (supports `in`)."""
        ...

    def add(self, results: Sequence[EvalResult]) -> None:
        """Store and report results made by the client."""
        ...


class LostRequests:
    """Sends lost requests again once, then records them as errors (module docstring).

    Args:
        samples: The run's samples.
        experiments: The run's experiments.
        epochs: The run's epochs.
        collector: Where results are kept.
        seconds: The request deadline (for messages).
    """

    def __init__(
        self,
        samples: Sequence[Sample[Any, Any]],
        experiments: Sequence[Experiment],
        epochs: int,
        collector: Collector,
        seconds: float,
    ) -> None:
        self._samples = samples
        self._experiments = experiments
        self._epochs = epochs
        self._collector = collector
        self._seconds = seconds
        self._sent_again: set[_Key] = set()

    def _missing(self) -> list[tuple[Sample[Any, Any], Experiment, int]]:
        done = self._collector.done
        return [
            (sample, experiment, epoch)
            for experiment in self._experiments
            for epoch in range(self._epochs)
            for sample in self._samples
            if (sample.id, experiment.name, epoch) not in done
        ]

    def give_up(self) -> None:
        """Record the missing requests that were already sent again as `lost` errors."""
        twice = [m for m in self._missing() if (m[0].id, m[1].name, m[2]) in self._sent_again]
        if not twice:
            return
        error = (
            f"lost: no result {self._seconds:g}s after it was sent, twice, and neither "
            "queued nor held by a worker"
        )
        run_id = self._collector.run_id
        _log.warning(
            "run %s: %s lost again after being sent twice; recording them as errors "
            "(kind 'lost')", run_id, _requests(len(twice)),
        )  # fmt: skip
        self._collector.add([
            EvalResult(
                sample_id=sample.id, experiment_name=experiment.name, epoch=epoch,
                run_id=run_id, metadata=dict(sample.metadata), latency_ms=0, error=error,
                error_kind="lost", score=Score(value=0.0, passed=False, reason=error),
            )
            for sample, experiment, epoch in twice
        ])  # fmt: skip

    def send_again(self) -> bool:
        """Mark the missing requests as sent again (False: none is missing)."""
        keys = [(s.id, e.name, epoch) for s, e, epoch in self._missing()]
        if not keys:
            return False
        self._sent_again.update(keys)
        _log.warning(
            "run %s: %s had no result %gs after it was sent and %s neither queued nor held "
            "by a worker (lost while Redis kept the rest); sending them again",
            self._collector.run_id, _requests(len(keys)), self._seconds,
            "is" if len(keys) == 1 else "are",
        )  # fmt: skip
        return True


def _requests(n: int) -> str:
    return f"{n} request" if n == 1 else f"{n} requests"
