"""Datasets: immutable, typed collections of samples, loaded from JSONL.

A JSONL dataset holds one JSON object per line::

    {"id": "q1", "input": "What is 2 + 2?", "expected": "4", "metadata": {"topic": "math"}}

- `id` is a string; an integer is accepted and turned into its decimal string (many
  exported datasets number their rows). Any other type is an error. Ids are unique.
- `input` and `expected` are coerced into the types given to the loader through
  `weakincentives.serde`: primitives, (nested) dataclasses, lists, dicts, unions.
  `expected` may be left out only when its type accepts `None`.
- `metadata` is optional and must be an object; it is kept on `Sample.metadata`.
- Any other key is an error (a misspelt `expected` would otherwise vanish); put extra
  fields under `metadata`. Blank lines are skipped.

Bad data raises `InvalidDatasetError` naming the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, SupportsIndex, TypeVar, overload

import pydantic

from weakincentives import serde
from weakincentives.errors import InvalidDatasetError, SerdeError

from .._records import Sample

__all__ = ["Dataset", "canonical_bytes", "dataset_sha256", "iter_jsonl", "load_jsonl"]

InputT = TypeVar("InputT")
ExpectedT = TypeVar("ExpectedT")
I = TypeVar("I")  # noqa: E741 - the short names read like the spec's signatures
E = TypeVar("E")

_KEYS = ("id", "input", "expected", "metadata")
_REQUIRED = ("id", "input")

StrPath = str | os.PathLike[str]
"""A filesystem path as a string or `Path`."""


# No slots on generic values: `Dataset[str, str](...)` sets __orig_class__, which slotted
# frozen dataclasses reject. Not slotted also lets `cached_property` cache the hash.
@dataclass(frozen=True)
class Dataset(Generic[InputT, ExpectedT]):
    """An immutable, ordered collection of samples with unique ids.

    Example:
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
    def load(path: StrPath, input_type: type[I], expected_type: type[E]) -> Dataset[I, E]:
        """Load a JSONL file (format in the module docstring) into a dataset.

        Raises:
            InvalidDatasetError: a line is not valid; the message names file, line and field.
        """
        return Dataset(samples=tuple(iter_jsonl(path, input_type, expected_type)))

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
        digest = hashlib.sha256()
        for sample in self.samples:
            digest.update(canonical_bytes(sample))
        return digest.hexdigest()

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

    Raises:
        InvalidDatasetError: a line is not valid; the message names file, line and field.
    """
    source = Path(path)
    expected_optional = _accepts_none(expected_type)
    seen: dict[str, int] = {}
    with source.open("rb") as lines:
        for lineno, raw in enumerate(lines, start=1):
            text = _decode(raw, source, lineno)
            if not text.strip():
                continue
            sample: Sample[I, E] = _parse_line(
                text, f"{source}:{lineno}", input_type, expected_type, expected_optional
            )
            if check_duplicate_ids:
                first = seen.setdefault(sample.id, lineno)
                if first != lineno:
                    raise InvalidDatasetError(
                        f"{source}:{lineno}: field 'id': duplicate id {sample.id!r} "
                        f"(first on line {first}); ids must be unique"
                    )
            yield sample


def dataset_sha256(path: StrPath, input_type: Any = Any, expected_type: Any = Any) -> str:
    """Return the content hash of a JSONL dataset without holding it in memory.

    Equals `Dataset.load(path, input_type, expected_type).sha256`. With the default
    `Any` types the values are hashed as written in the file, which equals the typed
    hash whenever the types do not change the JSON form of the values.

    Raises:
        InvalidDatasetError: a line is not valid.
    """
    digest = hashlib.sha256()
    for sample in iter_jsonl(path, input_type, expected_type):
        digest.update(canonical_bytes(sample))
    return digest.hexdigest()


# -- helpers ----------------------------------------------------------------------------


# The canonical JSON of one sample: compact, keys sorted at every level, not ASCII-escaped.
# One encoder for every value (JSON's encoding of a value does not depend on where it
# sits), not a `json.dumps` call that builds one per sample.
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def canonical_bytes(sample: Sample[Any, Any]) -> bytes:
    """`{"expected":…,"id":…,"input":…,"metadata":…}` and a newline, as UTF-8.

    The same bytes as `json.dumps` of that record with sorted keys (the four keys are
    written in sorted order); each value is JSON-compatible Python first (`_dumped`).
    """
    metadata = sample.metadata
    text = (
        f'{{"expected":{_encode(_dumped(sample.expected))},"id":{_encode(sample.id)},'
        f'"input":{_encode(_dumped(sample.input))},'
        f'"metadata":{_encode(_dumped(metadata)) if metadata else "{}"}}}\n'
    )
    return text.encode("utf-8")


_AS_IS = frozenset({str, int, bool, type(None)})  # serde.dump returns these unchanged


def _dumped(value: Any) -> Any:
    # Runs per sample when a streamed dataset is hashed: skip serde for plain values, and
    # for dicts of them (serde.dump would copy them unchanged).
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is dict and all(type(k) is str and type(v) in _AS_IS for k, v in value.items()):
        return value
    return serde.dump(value)


def _decode(raw: bytes, source: Path, lineno: int) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidDatasetError(
            f"{source}:{lineno}: not UTF-8 text (byte {exc.start + 1}); save the file as UTF-8"
        ) from exc
    return text.removeprefix("\ufeff") if lineno == 1 else text


def _accepts_none(tp: Any) -> bool:
    try:
        serde.load(tp, None)
    except SerdeError:
        return False
    return True


def _parse_line(
    text: str, where: str, input_type: type[I], expected_type: type[E], expected_optional: bool
) -> Sample[I, E]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidDatasetError(
            f"{where}: not valid JSON: {exc.msg} at column {exc.colno}"
        ) from exc
    if not isinstance(obj, dict):
        raise InvalidDatasetError(
            f"{where}: expected a JSON object with id, input and expected, got {_json_type(obj)}"
        )
    _check_keys(obj, where, expected_optional)
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        raise InvalidDatasetError(
            f"{where}: field 'metadata' must be an object, got {_json_type(metadata)}"
        )
    return Sample(
        id=_sample_id(obj["id"], where),
        input=_coerce("input", obj["input"], input_type, where),
        expected=_coerce("expected", obj.get("expected"), expected_type, where),
        metadata=metadata,
    )


def _check_keys(obj: dict[str, Any], where: str, expected_optional: bool) -> None:
    required = _REQUIRED if expected_optional else (*_REQUIRED, "expected")
    missing = [key for key in required if key not in obj]
    unknown = [key for key in obj if key not in _KEYS]
    problems = []
    if missing:
        problems.append(f"missing field {', '.join(repr(k) for k in missing)}")
    if unknown:
        problems.append(
            f"unknown field {', '.join(repr(k) for k in unknown)}; a line holds id, input, "
            "expected and an optional metadata object (put extra fields under metadata)"
        )
    if problems:
        raise InvalidDatasetError(f"{where}: {'; '.join(problems)}")


def _sample_id(value: object, where: str) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    got = "an empty string" if value == "" else _json_type(value)
    raise InvalidDatasetError(
        f"{where}: field 'id' must be a non-empty string (or an integer), got {got}"
    )


def _coerce(name: str, value: object, tp: type[I], where: str) -> I:
    try:
        return serde.load(tp, value)
    except SerdeError as exc:
        raise InvalidDatasetError(f"{where}: {_field_errors(name, exc)}") from exc


def _field_errors(name: str, exc: SerdeError) -> str:
    cause = exc.__cause__
    if not isinstance(cause, pydantic.ValidationError):
        return f"field {name!r}: {exc}"
    parts = []
    for error in cause.errors():
        path = ".".join([name, *(str(p) for p in error["loc"])])
        got = "" if error["type"] == "missing" else f" (got {_json_type(error['input'])})"
        parts.append(f"field {path!r}: {error['msg']}{got}")
    return "; ".join(parts)


def _json_type(value: object) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", float: "number"}
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return names.get(type(value), type(value).__name__)
