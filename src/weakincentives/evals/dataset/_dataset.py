"""Datasets: immutable, typed collections of samples, loaded from JSONL.

A JSONL dataset holds one JSON object per line::

    {"id": "q1", "input": "What is 2 + 2?", "expected": "4", "metadata": {"topic": "math"}}

- `id` is a string; an integer is accepted and turned into its decimal string (many
  exported datasets number their rows). Any other type is an error. Without an `id`, the
  line number is the id. Ids are unique.
- `input` and `expected` are validated strictly against the types given to the loader:
  primitives, (nested) dataclasses, lists, dicts, unions (`true` is not an int, and a
  key that is no field of a dataclass is an error). `expected` may be left out only when
  its type accepts `None`.
- `metadata` is optional and must be an object; it is kept on `Sample.metadata`.
- Any other key is an error (a misspelt `expected` would otherwise vanish); put extra
  fields under `metadata`, or pass `allow_extra_fields=True` to keep them there.
  Blank lines are skipped.

Other formats (JSON arrays, CSV, Parquet, Hugging Face datasets) and other field names
(`FieldMap`) load through `Dataset.load` too; see `weakincentives.evals._loaders`.
Bad data raises `InvalidDatasetError` naming the file, the line and the field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, SupportsIndex, TypeVar, overload

from weakincentives import serde
from weakincentives.errors import InvalidDatasetError

from .._records import Sample
from ._fields import FieldMap
from ._loaders import iter_samples
from ._rows import DatasetFormat
from ._sample_hash import canonical_bytes, samples_sha256

__all__ = ["Dataset", "canonical_bytes", "dataset_sha256", "iter_jsonl", "load_jsonl"]

InputT = TypeVar("InputT")
ExpectedT = TypeVar("ExpectedT")
I = TypeVar("I")  # noqa: E741 - the short names read like the spec's signatures
E = TypeVar("E")

StrPath = str | os.PathLike[str]
"""A filesystem path as a string or `Path`."""


# No slots on generic values: `Dataset[str, str](...)` sets __orig_class__, which slotted
# frozen dataclasses reject. Not slotted also lets `cached_property` cache the hash.
@dataclass(frozen=True)
class Dataset(Generic[InputT, ExpectedT]):
    """An immutable, ordered collection of samples with unique ids.

    Examples:
        >>> ds = Dataset(samples=(Sample(id="a", input="1+1", expected="2"),))
        >>> len(ds), ds[0].id, len(ds[:0])
        (1, 'a', 0)
    """

    samples: tuple[Sample[InputT, ExpectedT], ...] = ()
    """The samples, in order (any iterable is accepted and stored as a tuple)."""

    def __post_init__(self) -> None:
        samples = tuple(self.samples)
        object.__setattr__(self, "samples", samples)
        first_index: dict[str, int] = {}
        for index, sample in enumerate(samples):
            if not isinstance(sample, Sample):
                raise InvalidDatasetError(
                    f"dataset item {index} is a {type(sample).__name__}, not a Sample"
                )
            previous = first_index.setdefault(sample.id, index)
            if previous != index:
                raise InvalidDatasetError(
                    f"duplicate sample id {sample.id!r} at positions {previous} and {index}; "
                    "ids must be unique within a dataset"
                )

    # -- sequence protocol ----------------------------------------------------------

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self) -> Iterator[Sample[InputT, ExpectedT]]:
        return iter(self.samples)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Sample[InputT, ExpectedT]: ...

    @overload
    def __getitem__(self, index: slice) -> Dataset[InputT, ExpectedT]: ...

    def __getitem__(
        self, index: SupportsIndex | slice
    ) -> Sample[InputT, ExpectedT] | Dataset[InputT, ExpectedT]:
        if isinstance(index, slice):
            return Dataset(samples=self.samples[index])
        return self.samples[index]

    # -- building -------------------------------------------------------------------

    @staticmethod
    def from_samples(samples: Iterable[Sample[I, E]]) -> Dataset[I, E]:
        """Build a dataset from any iterable of samples (ids must be unique)."""
        return Dataset(samples=tuple(samples))

    @staticmethod
    def load(
        path: StrPath,
        input_type: type[I],
        expected_type: type[E],
        *,
        format: DatasetFormat | None = None,
        fields: FieldMap | None = None,
        split: str | None = None,
        allow_extra_fields: bool = False,
    ) -> Dataset[I, E]:
        """Load a dataset file into memory (JSONL by default; see `iter_samples`).

        Args:
            path: A `.jsonl`, `.json`, `.csv` or `.parquet` file, or a Hugging Face
                dataset (directory or name, with `format="hf"`).
            input_type: Type the inputs are validated as.
            expected_type: Type the expected values are validated as.
            format: The format; by default guessed from the file name.
            fields: Where id, input, expected and metadata come from in each row.
            split: The Hugging Face split.
            allow_extra_fields: Keep unmapped fields as metadata instead of refusing them.

        Raises:
            InvalidDatasetError: a line is not valid; the message names file, line and field.
        """
        samples = iter_samples(
            path, input_type, expected_type, format=format, fields=fields, split=split,
            allow_extra_fields=allow_extra_fields,
        )  # fmt: skip
        return Dataset(samples=tuple(samples))

    @staticmethod
    def stream(
        path: StrPath, input_type: type[I], expected_type: type[E]
    ) -> Iterator[Sample[I, E]]:
        """Yield the samples of a JSONL file one at a time (see `iter_jsonl`)."""
        return iter_jsonl(path, input_type, expected_type)

    def filter(
        self, predicate: Callable[[Sample[InputT, ExpectedT]], bool]
    ) -> Dataset[InputT, ExpectedT]:
        """Return the samples for which `predicate` is true, in order."""
        return Dataset(samples=tuple(s for s in self.samples if predicate(s)))

    def head(self, n: int) -> Dataset[InputT, ExpectedT]:
        """Return the first `n` samples (a smoke test before the full run)."""
        return Dataset(samples=self.samples[: max(n, 0)])

    # -- reading --------------------------------------------------------------------

    @cached_property
    def ids(self) -> tuple[str, ...]:
        """Sample ids, in order."""
        return tuple(s.id for s in self.samples)

    @cached_property
    def _by_id(self) -> Mapping[str, Sample[InputT, ExpectedT]]:
        return {s.id: s for s in self.samples}

    def get(self, sample_id: str) -> Sample[InputT, ExpectedT] | None:
        """Return the sample with id `sample_id`, or None."""
        return self._by_id.get(sample_id)

    @cached_property
    def sha256(self) -> str:
        """Content hash of the samples (hex), to fingerprint a run.

        It is the sha256 of each sample's canonical JSON (`id`, `input`, `expected`,
        `metadata`, keys sorted, compact), one per line, in dataset order. It depends on
        the samples and their order, not on how a file was formatted (whitespace, key
        order, blank lines): `Dataset.load(p, I, E).sha256 == dataset_sha256(p, I, E)`.
        """
        return samples_sha256(self.samples)

    def save(self, path: StrPath) -> None:
        """Write the dataset as JSONL that `Dataset.load` reads back."""
        with Path(path).open("w", encoding="utf-8") as out:
            for sample in self.samples:
                record: dict[str, Any] = {
                    "id": sample.id,
                    "input": serde.dump(sample.input),
                    "expected": serde.dump(sample.expected),
                }
                if sample.metadata:
                    record["metadata"] = serde.dump(sample.metadata)
                out.write(json.dumps(record, ensure_ascii=False) + "\n")


def load_jsonl(path: StrPath, input_type: type[I], expected_type: type[E]) -> Dataset[I, E]:
    """Load a JSONL dataset; the older draft's name for `Dataset.load`."""
    return Dataset.load(path, input_type, expected_type)


def iter_jsonl(
    path: StrPath,
    input_type: type[I],
    expected_type: type[E],
    *,
    check_duplicate_ids: bool = True,
) -> Iterator[Sample[I, E]]:
    """Yield the samples of a JSONL dataset lazily, one line at a time.

    Memory does not grow with the file, except for the set of ids seen, which duplicate
    detection needs; pass `check_duplicate_ids=False` for strictly constant memory.
    `iter_samples` reads the other formats and maps fields.

    Raises:
        InvalidDatasetError: a line is not valid; the message names file, line and field.
    """
    return iter_samples(
        path, input_type, expected_type, format="jsonl", check_duplicate_ids=check_duplicate_ids
    )


def dataset_sha256(path: StrPath, input_type: Any = Any, expected_type: Any = Any) -> str:
    """Return the content hash of a JSONL dataset without holding it in memory.

    Equals `Dataset.load(path, input_type, expected_type).sha256`. With the default
    `Any` types the values are hashed as written in the file, which equals the typed
    hash whenever the types do not change the JSON form of the values.

    Raises:
        InvalidDatasetError: a line is not valid.
    """
    return samples_sha256(iter_jsonl(path, input_type, expected_type))
