"""Samples from dataset files where they are: field mapping, transforms, strict typing.

`iter_samples(location, I, E)` streams the samples of a JSONL, JSON (array), CSV or
Parquet file, or of a Hugging Face dataset (by directory, or by name with `split=`). A
`FieldMap` says which field of a row is the sample's id, input, expected value and
metadata, and may transform a value first: GSM8K's own `test.jsonl` (`question`,
`answer` ending in `#### 72`) loads with

    FieldMap.parse(["input=question", "expected=answer|after:####"])

Rules (the same for every format):

- The id is the `id` field (a non-empty string, or an integer turned into its decimal
  string); without one it is the row's number: the line number in JSONL, the 1-based row
  number elsewhere. Ids are unique.
- Loading is strict: a field that is not mapped is an error (a misspelt `expected` would
  otherwise vanish) unless `allow_extra_fields=True`, which keeps extra fields in the
  metadata; values are validated against the types strictly (`true` is not an int, `"3"`
  is not an int), except CSV cells, which are text and converted to the declared type.
  Extra keys inside a typed input or expected value (a dataclass) are errors too.
- Each failure raises `InvalidDatasetError` naming the file and line (or row number).

`DatasetProvenance.of(...)` is what a run records about its source: where, which format,
the mapping, and the sha256 of the file's bytes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pydantic_core

from weakincentives import serde
from weakincentives.errors import InvalidDatasetError, SerdeError

from .._records import Sample
from ._fields import MISSING, FieldMap, read_field, transform_steps
from ._id_hashes import IdHashes
from ._rows import MAX_LINE_BYTES, DatasetFormat, Row, detect_format, json_type, read_rows
from ._sample_hash import samples_sha256

if TYPE_CHECKING:
    import pydantic

__all__ = [
    "DatasetProvenance",
    "FieldMap",
    "SampleFile",
    "iter_samples",
]

I = TypeVar("I")  # noqa: E741 - the short names read like the spec's signatures
E = TypeVar("E")


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetProvenance:
    """Where a run's samples came from: recorded in the run's provenance.

    Examples:
        >>> DatasetProvenance(location="gsm8k/test.jsonl", format="jsonl",
        ...                   sha256="ab" * 32).to_dict()["format"]
        'jsonl'
    """

    location: str
    """The path (as given) or Hugging Face dataset name."""
    format: DatasetFormat
    """`jsonl`, `json`, `csv`, `parquet` or `hf`."""
    sha256: str | None = None
    """sha256 of the file's bytes (of every file under a dataset directory, by relative
    path); None for a dataset loaded by name."""
    split: str | None = None
    """Hugging Face split, if one was picked."""
    fields: tuple[str, ...] = ()
    """The field mapping, as `--field` strings (empty: the default shape)."""
    allow_extra_fields: bool = False
    """Whether unmapped fields were kept as metadata instead of refused."""

    @classmethod
    def of(
        cls,
        location: str,
        format: DatasetFormat | None = None,
        *,
        split: str | None = None,
        fields: FieldMap | None = None,
        allow_extra_fields: bool = False,
    ) -> DatasetProvenance:
        """Describe a source, hashing its bytes (a file or a dataset directory).

        Raises:
            InvalidDatasetError: the file cannot be read.
        """
        kind = format or detect_format(location)
        return cls(
            location=location,
            format=kind,
            sha256=_file_sha256(Path(location)),
            split=split,
            fields=fields.specs() if fields else (),
            allow_extra_fields=allow_extra_fields,
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON values."""
        return {
            "location": self.location, "format": self.format, "sha256": self.sha256,
            "split": self.split, "fields": list(self.fields),
            "allow_extra_fields": self.allow_extra_fields,
        }  # fmt: skip


def _file_sha256(path: Path) -> str | None:
    try:
        if path.is_file():
            return _hash_files([(path.name, path)], named=False)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            return _hash_files([(p.relative_to(path).as_posix(), p) for p in files], named=True)
    except OSError as exc:
        raise InvalidDatasetError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    return None


def _hash_files(files: list[tuple[str, Path]], *, named: bool) -> str:
    digest = hashlib.sha256()
    for name, path in files:
        if named:
            digest.update(name.encode() + b"\0")
        with path.open("rb") as data:
            while block := data.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


def iter_samples(
    location: str | os.PathLike[str],
    input_type: Any = Any,
    expected_type: Any = Any,
    *,
    format: DatasetFormat | None = None,
    fields: FieldMap | None = None,
    split: str | None = None,
    allow_extra_fields: bool = False,
    check_duplicate_ids: bool = True,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[Sample[Any, Any]]:
    """Yield the samples of a dataset source one at a time (rules in the module docstring).

    Memory does not grow with the source, except for the ids seen (for duplicate
    detection); `check_duplicate_ids=False` makes it constant.

    Args:
        location: A file, a Hugging Face dataset directory, or a Hugging Face dataset name.
        input_type: Type each input is validated as (`Any`: the JSON value as is).
        expected_type: Type each expected value is validated as.
        format: The source's format; by default guessed from the name (`detect_format`).
        fields: Where id, input, expected and metadata come from (default: same names).
        split: Hugging Face split.
        allow_extra_fields: Keep unmapped fields as metadata instead of refusing them.
        check_duplicate_ids: Refuse a repeated id (the default).
        max_line_bytes: Longest line, element or field accepted.

    Raises:
        InvalidDatasetError: the source or a row is not valid; the message names the place.
    """
    where = str(location)
    kind = format or detect_format(where)
    parser = _RowParser(
        fields or FieldMap(), input_type, expected_type,
        allow_extra_fields=allow_extra_fields, lax=kind == "csv",
    )  # fmt: skip
    seen: dict[str, int] = {}
    unit = {"jsonl": "line", "json": "element"}.get(kind, "row")
    for row in read_rows(where, kind, split=split, max_line_bytes=max_line_bytes):
        sample = parser.sample(row)
        if check_duplicate_ids:
            first = seen.setdefault(sample.id, row.number)
            if first != row.number:
                raise InvalidDatasetError(
                    f"{row.where}: field 'id': duplicate id {sample.id!r} (first on {unit} "
                    f"{first}); ids must be unique"
                )
        yield sample


class _RowParser:
    """Turns rows into samples under one field map and pair of types."""

    def __init__(
        self,
        fields: FieldMap,
        input_type: Any,
        expected_type: Any,
        *,
        allow_extra_fields: bool,
        lax: bool,
    ) -> None:
        self.fields = fields
        self.input_type = input_type
        self.expected_type = expected_type
        self.allow_extra = allow_extra_fields
        self.lax = lax
        self.expected_optional = _accepts_none(expected_type)
        self.sources = fields.sources()
        # Per row only dict lookups when the map has no dotted paths and no transforms.
        self._steps = {
            target: tuple(zip(names, transform_steps(names), strict=True))
            for target, names in fields.transforms.items()
        }

    def sample(self, row: Row) -> Sample[Any, Any]:
        f, where = self.fields, row.where
        raw_input = self._value(row, "input", f.input)
        raw_expected = self._value(row, "expected", f.expected)
        no_input, no_expected = raw_input is MISSING, raw_expected is MISSING
        if no_input or no_expected or not (self.allow_extra or self.sources >= row.fields.keys()):
            self._check_fields(row, no_input, no_expected)
        if no_expected:
            raw_expected = None
        return Sample(
            id=self._id(row),
            input=self._typed("input", raw_input, self.input_type, where),
            expected=self._typed("expected", raw_expected, self.expected_type, where),
            metadata=self._metadata(row),
        )

    def _check_fields(self, row: Row, no_input: bool, no_expected: bool) -> None:
        f = self.fields
        missing = [_label("input", f.input)] if no_input else []
        if no_expected and not self.expected_optional:
            missing.append(_label("expected", f.expected))
        unknown = [] if self.allow_extra else self._unknown(row)
        problems = []
        if missing:
            problems.append(f"missing field {', '.join(missing)}")
        if unknown:
            problems.append(
                f"unknown field {', '.join(repr(k) for k in unknown)}; a sample holds "
                f"{self._shape()} (put extra fields under metadata, or pass "
                "--allow-extra-fields to keep them there)"
            )
        if missing:
            problems.append(
                f"the row has {', '.join(map(repr, row.fields)) or 'no fields'}; map them "
                "with --field TARGET=FIELD, e.g. --field input=question"
            )
        if problems:
            raise InvalidDatasetError(f"{row.where}: {'; '.join(problems)}")

    def _unknown(self, row: Row) -> list[str]:
        return [name for name in row.fields if name not in self.sources]

    def _shape(self) -> str:
        f = self.fields
        if f == FieldMap():
            return "id, input, expected and an optional metadata object"
        return f"{f.id!r}, {f.input!r}, {f.expected!r} and an optional {f.metadata!r} object"

    def _value(self, row: Row, target: str, source: str) -> Any:
        value = (
            row.fields.get(source, MISSING) if "." not in source else read_field(row.fields, source)
        )
        steps = self._steps.get(target)
        if value is MISSING or not steps:
            return value
        for name, step in steps:
            try:
                value = step(value)
            except (ValueError, TypeError) as exc:
                raise InvalidDatasetError(
                    f"{row.where}: field {source!r}: transform {name} failed: {exc}"
                ) from None
        return value

    def _id(self, row: Row) -> str:
        value = self._value(row, "id", self.fields.id)
        if value is MISSING:
            return str(row.number)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        got = "an empty string" if value == "" else json_type(value)
        raise InvalidDatasetError(
            f"{row.where}: field {_label('id', self.fields.id)} must be a non-empty string "
            f"(or an integer), got {got}"
        )

    def _metadata(self, row: Row) -> dict[str, Any]:
        value = self._value(row, "metadata", self.fields.metadata)
        if value is MISSING or value is None:
            value = {}
        elif isinstance(value, str) and self.lax and value.strip():
            value = _csv_json(value, row.where, self.fields.metadata)
        if not isinstance(value, dict):
            raise InvalidDatasetError(
                f"{row.where}: field {_label('metadata', self.fields.metadata)} must be an "
                f"object, got {json_type(value)}"
            )
        if not self.fields.metadata_fields and not self.allow_extra:
            return value
        metadata = dict(value)
        for key, source in self.fields.metadata_fields.items():
            item = self._value(row, f"metadata.{key}", source)
            if item is not MISSING:
                metadata[key] = item
        if self.allow_extra:
            for name in self._unknown(row):
                metadata.setdefault(name, row.fields[name])
        return metadata

    def _typed(self, name: str, value: Any, tp: Any, where: str) -> Any:
        if tp is Any or tp is object or (type(value) is tp and tp in _PLAIN):
            return value
        try:
            if self.lax:
                return serde.load(tp, value)
            return _strict_load(tp, value)
        except pydantic_core.ValidationError as exc:
            raise InvalidDatasetError(f"{where}: {_field_errors(name, exc)}") from None
        except SerdeError as exc:
            cause = exc.__cause__
            if isinstance(cause, pydantic_core.ValidationError):
                raise InvalidDatasetError(f"{where}: {_field_errors(name, cause)}") from None
            raise InvalidDatasetError(f"{where}: field {name!r}: {exc}") from None
        except _ExtraKeyError as exc:
            raise InvalidDatasetError(
                f"{where}: field '{name}.{exc.path}': unknown field (extra keys are not "
                "allowed in a typed value)"
            ) from None


_PLAIN = frozenset({str, int, float, bool})
"""Types whose values of exactly that type are valid as they are (the common case)."""


def _label(target: str, source: str) -> str:
    return repr(source) if source == target else f"{source!r} (the {target})"


def _csv_json(text: str, where: str, column: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise InvalidDatasetError(
            f"{where}: column {column!r} (the metadata) must hold a JSON object"
        ) from None


@functools.lru_cache(maxsize=256)
def _adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    import pydantic  # 20 ms: imported by the first typed row, not with the runner

    return pydantic.TypeAdapter(tp)


class _ExtraKeyError(Exception):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def _strict_load(tp: Any, value: Any) -> Any:
    """Validate `value` as `tp` in pydantic's strict JSON mode, refusing extra keys."""
    loaded = _adapter(tp).validate_json(json.dumps(value), strict=True)
    _check_no_extra(value, serde.dump(loaded), "")
    return loaded


def _check_no_extra(raw: Any, dumped: Any, path: str) -> None:
    # A key of the row that the typed value dropped was not a field of any dataclass.
    if isinstance(raw, dict) and isinstance(dumped, dict):
        for key, item in raw.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in dumped:
                raise _ExtraKeyError(where)
            _check_no_extra(item, dumped[key], where)
    elif isinstance(raw, list) and isinstance(dumped, list | tuple) and len(raw) == len(dumped):
        for index, (item, out) in enumerate(zip(raw, dumped, strict=True)):
            _check_no_extra(item, out, f"{path}.{index}" if path else str(index))


def _accepts_none(tp: Any) -> bool:
    if tp is Any:
        return True
    try:
        _adapter(tp).validate_python(None)
    except pydantic_core.ValidationError:
        return False
    return True


def _field_errors(name: str, exc: pydantic_core.ValidationError) -> str:
    parts = []
    for error in exc.errors():
        path = ".".join([name, *(str(p) for p in error["loc"])])
        got = "" if error["type"] == "missing" else f" (got {json_type(error['input'])})"
        parts.append(f"field {path!r}: {error['msg']}{got}")
    return "; ".join(parts)


class SampleFile(Generic[I, E]):
    r"""A dataset source read afresh on every iteration: a streamed dataset with a hash.

    `run_eval(SampleFile(...), ...)` streams it; `sha256` (`Dataset.sha256` of the same
    samples) reads it once, so a run can be fingerprinted and resumed without holding it.
    Memory stays flat but for 8 bytes per id (duplicate detection), and only until one
    pass has read the whole source: later passes do not check ids again. A repeated id
    is reported (with its file:line) when that first pass ends.

    Examples:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "d.jsonl"
        >>> _ = path.write_text('{"id": "a", "input": "x", "expected": "X"}\n')
        >>> [s.id for s in SampleFile(path)]
        ['a']
    """

    def __init__(
        self,
        location: str | os.PathLike[str],
        input_type: Any = Any,
        expected_type: Any = Any,
        *,
        format: DatasetFormat | None = None,
        fields: FieldMap | None = None,
        split: str | None = None,
        allow_extra_fields: bool = False,
    ) -> None:
        self.location = str(location)
        self.format: DatasetFormat = format or detect_format(self.location)
        self.input_type = input_type
        self.expected_type = expected_type
        self.fields = fields
        self.split = split
        self.allow_extra_fields = allow_extra_fields
        self._sha256: str | None = None
        self._ids_checked = False

    def __iter__(self) -> Iterator[Sample[I, E]]:
        # Ids are checked for duplicates until one pass has read the whole source, and a
        # later pass (the run after a scan) reads the same unchanged file. The check keeps
        # 8 bytes per id (`IdHashes`), not a dict entry: a repeat is found when the pass
        # ends, and the source is then read again to name its file:line.
        if self._ids_checked:
            yield from self._samples(check_duplicate_ids=False)
            return
        seen = IdHashes()
        for sample in self._samples(check_duplicate_ids=False):
            seen.add(sample.id)
            yield sample
        if seen.repeated():
            for _ in self._samples(check_duplicate_ids=True):  # raises at the repeat
                pass
        self._ids_checked = True

    def _samples(self, *, check_duplicate_ids: bool) -> Iterator[Sample[I, E]]:
        return iter_samples(
            self.location, self.input_type, self.expected_type, format=self.format,
            fields=self.fields, split=self.split, allow_extra_fields=self.allow_extra_fields,
            check_duplicate_ids=check_duplicate_ids,
        )  # fmt: skip

    @property
    def sha256(self) -> str:
        """Content hash of the samples, as `Dataset.sha256` (reads the source once).

        Raises:
            InvalidDatasetError: a row is not valid.
        """
        if self._sha256 is None:
            self._sha256 = samples_sha256(self)
        return self._sha256

    def provenance(self) -> DatasetProvenance:
        """What a run records about this source (hashes the file's bytes)."""
        return DatasetProvenance.of(
            self.location, self.format, split=self.split, fields=self.fields,
            allow_extra_fields=self.allow_extra_fields,
        )  # fmt: skip
