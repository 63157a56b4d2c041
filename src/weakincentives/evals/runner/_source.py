"""The dataset as the local runner reads it: checked, counted, and hashed as it streams."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from weakincentives.errors import ConfigurationError, InvalidDatasetError

from .._records import Sample
from ..dataset import Dataset, canonical_bytes

__all__ = ["UNHASHED_STREAM", "DatasetSource", "SampleSource"]

DatasetSource = Iterable[Sample[Any, Any]]
"""A `Dataset`, a list or tuple of samples, or any iterable of them (streamed)."""

UNHASHED_STREAM = "unhashed-stream"
"""`Fingerprint.dataset_sha256` of a streamed run until its hash is known (see resume)."""


class SampleSource:
    """The dataset as the runner reads it: checked, counted and, when needed, hashed.

    A `Dataset`, list or tuple is hashed up front (`Dataset.sha256`); any other iterable
    is streamed once, hashed as it is read when `hashing` and no `sha256` was given.
    """

    def __init__(
        self, dataset: DatasetSource, *, sha256: str | None = None, hashing: bool = False
    ) -> None:
        self.count = 0
        """Samples read so far."""
        self.hashed_as_read: str | None = None
        """Hash of a streamed dataset, once read to the end (when it was hashed)."""
        if isinstance(dataset, list | tuple):
            dataset = Dataset(samples=tuple(dataset))  # checks types and unique ids
        if isinstance(dataset, Dataset):
            self._samples: Iterable[Sample[Any, Any]] = dataset.samples
            self.length: int | None = len(dataset)
            self.sha256 = sha256 or (dataset.sha256 if hashing else None)
            self._streamed = False
        elif isinstance(dataset, Iterable) and not isinstance(dataset, str | bytes):
            self._samples = dataset
            # `hasattr` first: the ABC check of a generator (no `__len__`) walks every
            # collection class once per process, a tenth of a millisecond cold.
            sized = hasattr(type(dataset), "__len__")
            self.length = len(dataset) if sized and isinstance(dataset, Collection) else None
            self.sha256 = sha256
            self._streamed = True
        else:
            hint = " (load files with Dataset.load or Dataset.stream)"
            is_path = isinstance(dataset, str | bytes | os.PathLike)
            raise ConfigurationError(
                f"dataset must be a Dataset or an iterable of Samples, got "
                f"{type(dataset).__name__}{hint if is_path else ''}"
            )
        self._hasher = hashlib.sha256() if hashing and self.sha256 is None else None

    def __iter__(self) -> Iterator[Sample[Any, Any]]:
        hasher, streamed = self._hasher, self._streamed
        for sample in self._samples:
            if streamed and not isinstance(sample, Sample):
                raise InvalidDatasetError(
                    f"dataset item {self.count} is a {type(sample).__name__}, not a Sample"
                )
            if hasher is not None:
                hasher.update(canonical_bytes(sample))
            self.count += 1
            yield sample
        if hasher is not None:
            self.hashed_as_read = hasher.hexdigest()
