"""What the distributed client does with requests found lost (`_tracking.RequestDeadline`).

The first time a request is found lost it is sent again; the second time it is recorded
as an error result of kind `lost`. Each step is one log line.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from weakincentives.evals import EvalResult, Experiment, Sample, Score

__all__ = ["Collector", "LostRequests"]

_log = logging.getLogger("weakincentives.contrib.distributed._client")

_BATCH = 500
"""Error results stored per call (a run that lost many requests never holds them all)."""


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

    @property
    def expected(self) -> Any:
        """The keys the run expects (`slot(key)`: an int below `len(expected)`, or None)."""
        ...

    def add(self, results: Sequence[EvalResult]) -> None:
        """Store and report results made by the client."""
        ...


class LostRequests:
    """Sends lost requests again once, then records them as errors (module docstring).

    Holds one byte per expected key (sent again or not); the samples are read again from
    `samples` (re-iterable) each time missing requests are looked for.

    Args:
        samples: The run's samples (iterated again on each call).
        experiments: The run's experiments.
        epochs: The run's epochs.
        collector: Where results are kept.
        seconds: The request deadline (for messages).
    """

    def __init__(
        self,
        samples: Iterable[Sample[Any, Any]],
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
        self._sent_again = bytearray(len(collector.expected))

    def _missing(self) -> Iterator[tuple[Sample[Any, Any], Experiment, int, int]]:
        """`(sample, experiment, epoch, slot)` of each expected key without a result."""
        done, slot_of = self._collector.done, self._collector.expected.slot
        for experiment in self._experiments:
            for epoch in range(self._epochs):
                for sample in self._samples:
                    key = (sample.id, experiment.name, epoch)
                    if key not in done:
                        yield sample, experiment, epoch, slot_of(key)

    def give_up(self) -> None:
        """Record the missing requests that were already sent again as `lost` errors."""
        error = (
            f"lost: no result {self._seconds:g}s after it was sent, twice, and neither "
            "queued nor held by a worker"
        )
        run_id = self._collector.run_id
        twice = (
            EvalResult(
                sample_id=sample.id, experiment_name=experiment.name, epoch=epoch,
                run_id=run_id, metadata=dict(sample.metadata), latency_ms=0, error=error,
                error_kind="lost", score=Score(value=0.0, passed=False, reason=error),
            )
            for sample, experiment, epoch, slot in self._missing()
            if self._sent_again[slot]
        )  # fmt: skip
        # Counted first (one pass without building results), so the log line comes
        # before the results, as a reader of the log expects.
        count = sum(1 for *_, slot in self._missing() if self._sent_again[slot])
        if not count:
            return
        _log.warning(
            "run %s: %s lost again after being sent twice; recording them as errors "
            "(kind 'lost')", run_id, _requests(count),
        )  # fmt: skip
        while batch := list(itertools.islice(twice, _BATCH)):
            self._collector.add(batch)

    def send_again(self) -> bool:
        """Mark the missing requests as sent again (False: none is missing)."""
        count = 0
        for *_, slot in self._missing():
            self._sent_again[slot] = 1
            count += 1
        if not count:
            return False
        _log.warning(
            "run %s: %s had no result %gs after it was sent and %s neither queued nor held "
            "by a worker (lost while Redis kept the rest); sending them again",
            self._collector.run_id, _requests(count), self._seconds,
            "is" if count == 1 else "are",
        )  # fmt: skip
        return True


def _requests(n: int) -> str:
    return f"{n} request" if n == 1 else f"{n} requests"
