"""Collecting a distributed run's results: one per expected key, stored before acknowledged.

`ExpectedKeys` maps every (sample, experiment, epoch) of a run to a slot without holding a
tuple per key; `DoneKeys` marks the slots that have a result; `Collector` accepts each
new result of the run once (foreign and duplicate ones are dropped and counted), stores
it and reports it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from weakincentives.evals import EvalResult, Experiment, RunHandle
from weakincentives.evals.dataset import IdIndex
from weakincentives.evals.runner import slim
from weakincentives.evals.store import StoredResults
from weakincentives.runtime.mailbox import Message

__all__ = ["Collector", "DoneKeys", "ExpectedKeys", "ProgressSink"]

_log = logging.getLogger("weakincentives.contrib.distributed._client")

_Key = tuple[str, str, int]
"""`(sample_id, experiment_name, epoch)`: what a run records once."""


class ProgressSink(Protocol):
    """Told about a run's progress (`weakincentives.cli`'s `RichProgress` is one)."""

    def start(self, total: int | None) -> None:
        """The run expects `total` results."""
        ...

    def advance(self, result: EvalResult) -> None:
        """One more distinct result arrived (or was already stored, on resume)."""
        ...

    def finish(self) -> None:
        """The run ended (complete or not)."""
        ...


class ExpectedKeys:
    """The keys a run expects, each at a slot: every (sample, experiment, epoch).

    Computed from the samples' ranks among their ids (`IdIndex`: 8 bytes per sample,
    no id string, no `Sample` and no tuple of any key kept), the experiment names and
    the epoch count.

    Args:
        index: The run's sample ids.
        experiments: The run's experiments.
        epochs: Times each sample runs per experiment.
    """

    def __init__(self, index: IdIndex, experiments: Sequence[Experiment], epochs: int) -> None:
        self._index = index
        self._names = {e.name: j for j, e in enumerate(experiments)}
        self._epochs = epochs

    def slot(self, key: object) -> int | None:
        """Where `key` is in `range(len(self))`, or None when the run does not expect it."""
        if not isinstance(key, tuple) or len(key) != 3:
            return None
        sample_id, name, epoch = key
        experiment = self._names.get(name)
        if experiment is None or type(epoch) is not int or not isinstance(sample_id, str):
            return None
        if not 0 <= epoch < self._epochs:
            return None
        rank = self._index.rank(sample_id)
        if rank is None:
            return None
        return (experiment * self._epochs + epoch) * len(self._index) + rank

    @property
    def single(self) -> bool:
        """Whether the run has one experiment and one epoch (one result per sample)."""
        return len(self._names) == 1 and self._epochs == 1

    def __contains__(self, key: object) -> bool:
        return self.slot(key) is not None

    def __len__(self) -> int:
        return len(self._index) * len(self._names) * self._epochs


class DoneKeys:
    """The expected keys that have a result: one byte per expected key, and a count."""

    def __init__(self, expected: ExpectedKeys) -> None:
        self._expected = expected
        self._done = bytearray(len(expected))
        self._count = 0

    def add(self, key: _Key) -> None:
        slot = self._expected.slot(key)
        if slot is not None and not self._done[slot]:
            self._done[slot] = 1
            self._count += 1

    def __contains__(self, key: object) -> bool:
        slot = self._expected.slot(key)
        return slot is not None and bool(self._done[slot])

    def __len__(self) -> int:
        return self._count


class Collector:
    """Keeps one result per expected key, storing and reporting each new one.

    With a run store, each new result is stored whole and nothing of it is kept here:
    the report reads this call's results back from the store (`StoredResults`, slim:
    no transcript, output, input or expected value), as the local runner's does. Each
    key is stored once (duplicates are dropped first), so the run handle is told to
    count keys without remembering them (`expect_unique_keys`).
    """

    def __init__(
        self,
        expected: ExpectedKeys,
        run_id: str,
        handle: RunHandle | None,
        progress: ProgressSink | None,
    ) -> None:
        self.expected = expected
        self.run_id = run_id
        self.handle = handle
        self.progress = progress
        self.done = DoneKeys(expected)
        self.results: list[EvalResult] = []
        """Without a store: every result. With one: a resumed run's earlier results."""
        self._stored = 0
        self._start = 0
        self.duplicates = 0
        self.foreign = 0
        self.restored = False
        """Whether a resumed run's stored results were read back."""
        if progress is not None:
            progress.start(len(expected))

    @property
    def missing(self) -> int:
        """Expected keys without a result yet."""
        return len(self.expected) - len(self.done)

    def restore(self, handle: RunHandle) -> None:
        """Count what a resumed run already stored (cancelled results do not count)."""
        self.restored = True
        completed = handle.completed_keys()
        for result in handle.latest_results(strict=False):
            if result.key in completed and result.key in self.expected:
                self._record(result)
                self.results.append(slim(result))

    def start(self) -> None:
        """Mark where this call's results begin in the store (after `restore`)."""
        if self.handle is not None:
            self.handle.expect_unique_keys()
            self._start = self.handle.results_path.stat().st_size

    def report_results(self) -> Sequence[EvalResult]:
        """What the report holds: the results, or (with a store) this call's read back."""
        if self.handle is None:
            return tuple(self.results)
        return StoredResults(
            self.handle.results_path, start=self._start,
            end=self.handle.results_path.stat().st_size, count=self._stored,
            earlier=tuple(self.results), transform=slim, report_fields=True,
            unique_keys=True, streamed=self.expected.single,
        )  # fmt: skip

    def add(self, results: Sequence[EvalResult]) -> None:
        """Store and report results made here (requests recorded as lost)."""
        if self.handle is not None:
            self.handle.extend(results)
            self._stored += len(results)
        for result in results:
            self._record(result)

    def take(self, messages: Sequence[Message[EvalResult, Any]]) -> None:
        """Store and report the new results among `messages` (not acknowledged here)."""
        fresh: list[EvalResult] = []
        for message in messages:
            result = self._accept(message)
            if result is not None:
                fresh.append(result)
                self._record(result)
        if fresh and self.handle is not None:
            self.handle.extend(fresh)  # may raise: then nothing is acknowledged
            self._stored += len(fresh)

    def _accept(self, message: Message[EvalResult, Any]) -> EvalResult | None:
        if message.decode_error is not None:
            _log.warning("dropping an unreadable reply: %s", message.decode_error)
            self.foreign += 1
            return None
        result = message.body
        if result.run_id != self.run_id or result.key not in self.expected:
            _log.warning(
                "dropping a result of run %r for %s: not a request of run %s",
                result.run_id, result.key, self.run_id,
            )  # fmt: skip
            self.foreign += 1
            return None
        # One request, one key: a key already recorded is a duplicate delivery, or a
        # request sent again (its new id answers the same key).
        if result.key in self.done:
            self.duplicates += 1
            return None
        return result

    def _record(self, result: EvalResult) -> None:
        self.done.add(result.key)
        if self.handle is None:
            self.results.append(result)
        if self.progress is not None:
            self.progress.advance(result)
