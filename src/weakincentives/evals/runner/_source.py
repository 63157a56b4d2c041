"""The dataset as the local runner reads it: checked, counted, and hashed as it streams."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from weakincentives.errors import ConfigurationError, InvalidDatasetError

from .._records import RecordInputs, Sample
from ..dataset import Dataset, JsonForm, canonical_bytes, canonical_forms

__all__ = ["UNHASHED_STREAM", "DatasetSource", "SampleSource"]

DatasetSource = Iterable[Sample[Any, Any]]
"""A `Dataset`, a list or tuple of samples, or any iterable of them (streamed)."""

UNHASHED_STREAM = "unhashed-stream"
"""`Fingerprint.dataset_sha256` of a streamed run until its hash is known (see resume)."""


class SampleSource:
    """The dataset as the runner reads it: checked, counted and, when needed, hashed.

    A `Dataset`, list or tuple is hashed up front (`Dataset.sha256`); any other iterable
    is streamed once, hashed as it is read when `hashing` and no `sha256` was given.
    Hashing a sample makes the JSON forms of its input and expected value: with `forms`,
    the latest `forms` of them (structured ones) are kept for `record_inputs`, which
    records them on the sample's results without converting them again.
    """

    def __init__(
        self,
        dataset: DatasetSource,
        *,
        sha256: str | None = None,
        hashing: bool = False,
        forms: int = 0,
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
            self.length = len(dataset) if isinstance(dataset, Collection) else None
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
        # id(value) -> its `JsonForm`, oldest first (the value itself is held, so its id
        # is not reused while it is here). Only the iteration writes to it.
        self._forms: dict[int, JsonForm] | None = {} if forms and self._hasher else None
        self._most_forms = forms

    def __iter__(self) -> Iterator[Sample[Any, Any]]:
        hasher, streamed, forms = self._hasher, self._streamed, self._forms
        for sample in self._samples:
            if streamed and not isinstance(sample, Sample):
                raise InvalidDatasetError(
                    f"dataset item {self.count} is a {type(sample).__name__}, not a Sample"
                )
            if forms is not None:
                line, *pair = canonical_forms(sample)
                hasher.update(line)  # type: ignore[union-attr]  # forms need a hasher
                self._keep(forms, pair)
            elif hasher is not None:
                hasher.update(canonical_bytes(sample))
            self.count += 1
            yield sample
        if hasher is not None:
            self.hashed_as_read = hasher.hexdigest()

    def _keep(self, forms: dict[int, JsonForm], pair: list[JsonForm]) -> None:
        for known in pair:
            # A form made anew (not a dict of plain values, which is its own form: the
            # agent could change it before its result is recorded).
            if type(known[1]) in _STRUCTURED and known[1] is not known[0]:
                forms[id(known[0])] = known
        while len(forms) > self._most_forms:
            del forms[next(iter(forms))]

    def record_inputs(self, inputs: RecordInputs) -> RecordInputs:
        """`inputs`, taking the forms of values this source kept (see the class docs)."""
        if self._forms is None or not inputs.enabled:
            return inputs
        return _KnownForms(inputs, self._forms)


_STRUCTURED = (dict, list)


class _KnownForms(RecordInputs):
    """`RecordInputs` that looks up the forms a `SampleSource` kept before converting.

    A form kept is the one `recorded_value` would make (`canonical_forms`): the value's
    JSON form (a dict or list made from it, never the value itself), which a result
    records whole when its JSON text is within `limit`, else `RecordInputs.value` cuts.
    """

    __slots__ = ("_forms",)
    _forms: dict[int, JsonForm]

    def __init__(self, inputs: RecordInputs, forms: dict[int, JsonForm]) -> None:
        super().__init__(enabled=inputs.enabled, limit=inputs.limit)
        object.__setattr__(self, "_forms", forms)

    def value(self, value: Any) -> Any:
        known = self._forms.get(id(value))
        if known is not None and known[0] is value and known[2] <= self.limit:
            return known[1]
        return super().value(value)
