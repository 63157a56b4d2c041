"""Reading dataset rows, one at a time, from JSONL, JSON, CSV, Parquet and Hugging Face.

Every reader is a generator of `Row`s: the row's place (file and line, or file and row
number) and its fields as a dict. None of them holds the file in memory: JSONL is read
line by line, a JSON array element by element, CSV record by record, Parquet batch by
batch, and a Hugging Face dataset is iterated (memory-mapped, or streamed by name).

Every failure (no such file, a directory, undecodable bytes, bad JSON, a line longer than
`max_line_bytes`, JSON nested too deeply, a missing optional library) raises
`InvalidDatasetError` with one line naming the place; no other exception escapes.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal, TextIO

from weakincentives.errors import InvalidDatasetError

__all__ = [
    "FORMATS",
    "MAX_LINE_BYTES",
    "DatasetFormat",
    "Row",
    "detect_format",
    "json_type",
    "parse_json",
    "read_rows",
]

DatasetFormat = Literal["jsonl", "json", "csv", "parquet", "hf"]
"""A dataset format: JSON Lines, a JSON array, CSV, Parquet, or a Hugging Face dataset."""

FORMATS: tuple[DatasetFormat, ...] = ("jsonl", "json", "csv", "parquet", "hf")
"""Every `DatasetFormat`, in the order `--format` lists them."""

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest JSONL line (or JSON array element, or CSV field) read by default: 16 MiB."""

_SUFFIXES: dict[str, DatasetFormat] = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv",
    ".parquet": "parquet", ".pq": "parquet",
}  # fmt: skip
_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Row:
    """One record of a dataset source."""

    where: str
    """`file:line` (JSONL, JSON) or `file: row N` (CSV, Parquet, Hugging Face)."""
    number: int
    """Line number (JSONL) or 1-based row number (other formats): the default sample id."""
    fields: dict[str, Any]
    """The record's fields."""


def detect_format(location: str) -> DatasetFormat:
    """The format of `location` from its suffix; a directory or `hf:` name is Hugging Face.

    Raises:
        InvalidDatasetError: the suffix is none of the known ones.
    """
    if location.startswith("hf:"):
        return "hf"
    path = Path(location)
    if path.is_dir():
        if _looks_like_hf(path):
            return "hf"
        raise InvalidDatasetError(
            f"{location}: is a directory with no dataset in it; pass a dataset file (.jsonl, "
            ".json, .csv, .parquet) or a Hugging Face dataset directory"
        )
    found = _SUFFIXES.get(path.suffix.lower())
    if found is None:
        known = ", ".join(sorted(_SUFFIXES))
        raise InvalidDatasetError(
            f"{location}: cannot tell the dataset format from the name; use a file ending in "
            f"{known}, or pass --format ({', '.join(FORMATS)})"
        )
    return found


def _looks_like_hf(path: Path) -> bool:
    """A `save_to_disk` directory, or a folder holding data files (`load_dataset(dir)`)."""
    if (path / "dataset_dict.json").exists() or (path / "state.json").exists():
        return True
    suffixes = {*_SUFFIXES, ".arrow"}
    return any(p.suffix.lower() in suffixes for p in path.rglob("*") if p.is_file())


def read_rows(
    location: str,
    format: DatasetFormat,
    *,
    split: str | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[Row]:
    """Yield the rows of a dataset source one at a time (see the module docstring).

    Args:
        location: A file path, a Hugging Face dataset directory, or (`format="hf"`) a
            dataset name such as `gsm8k` or `hf:openai/gsm8k` (the `hf:` prefix is dropped).
        format: The source's format (`detect_format` guesses it from the name).
        split: The Hugging Face split (`test`, `train`, ...); required when it has several.
        max_line_bytes: Longest line (JSONL), element (JSON) or field (CSV) accepted.

    Raises:
        InvalidDatasetError: the source cannot be read; the message names the place.
    """
    if format == "hf":
        return _hf_rows(location.removeprefix("hf:"), split)
    path = _existing_file(location)
    if format == "jsonl":
        return _jsonl_rows(path, max_line_bytes)
    if format == "json":
        return _json_rows(path, max_line_bytes)
    if format == "csv":
        return _csv_rows(path, max_line_bytes)
    if format == "parquet":
        return _parquet_rows(path)
    raise InvalidDatasetError(f"unknown dataset format {format!r}; use one of {FORMATS}")


def _existing_file(location: str) -> Path:
    path = Path(location)
    if path.is_dir():
        raise InvalidDatasetError(
            f"{location}: is a directory; pass a dataset file (.jsonl, .json, .csv, .parquet) "
            "or, for a Hugging Face dataset directory, --format hf"
        )
    if not path.exists():
        raise InvalidDatasetError(f"{location}: no such dataset file")
    return path


def _open_binary(path: Path) -> BinaryIO:
    try:
        return path.open("rb")
    except OSError as exc:
        raise InvalidDatasetError(f"{path}: cannot be read: {exc.strerror or exc}") from exc


# -- JSONL -------------------------------------------------------------------------------


def _jsonl_rows(path: Path, max_line_bytes: int) -> Iterator[Row]:
    with _open_binary(path) as lines:
        lineno = 0
        while True:
            raw = lines.readline(max_line_bytes + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > max_line_bytes:
                raise InvalidDatasetError(
                    f"{path}:{lineno}: line longer than {max_line_bytes:,} bytes; is this a "
                    "JSONL file (one sample per line)?"
                )
            text = _decode(raw, f"{path}:{lineno}")
            if lineno == 1:
                text = text.removeprefix("\ufeff")
            if not text.strip():
                continue
            where = f"{path}:{lineno}"
            yield Row(where, lineno, _object(parse_json(text, where), where))


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidDatasetError(
            f"{where}: not UTF-8 text (byte {exc.start + 1}); save the file as UTF-8"
        ) from exc


def parse_json(text: str, where: str) -> Any:
    """`json.loads(text)`, with every failure an `InvalidDatasetError` at `where`.

    Raises:
        InvalidDatasetError: not JSON, or nested too deeply for Python to parse.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidDatasetError(
            f"{where}: not valid JSON: {exc.msg} at column {exc.colno}"
        ) from exc
    except RecursionError:
        raise InvalidDatasetError(f"{where}: JSON nested too deeply to read") from None


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidDatasetError(
            f"{where}: expected a JSON object with id, input and expected, got {json_type(value)}"
        )
    return value


def json_type(value: object) -> str:
    """The JSON name of a value's type (`object`, `array`, `integer`, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    names = {dict: "object", list: "array", str: "string", float: "number"}
    return names.get(type(value), type(value).__name__)


# -- JSON array --------------------------------------------------------------------------


class _ArrayReader:
    """Decodes the elements of a top-level JSON array, reading the file in chunks."""

    def __init__(self, text: TextIO, path: Path, max_element: int) -> None:
        self._text = text
        self._path = path
        self._max = max_element
        self._buf = ""
        self._pos = 0
        self._line = 1  # line number at self._pos
        self._eof = False

    def _fill(self, size: int = _CHUNK) -> bool:
        if self._eof:
            return False
        try:
            chunk = self._text.read(size)
        except UnicodeDecodeError as exc:
            raise InvalidDatasetError(
                f"{self._path}:{self._line}: not UTF-8 text; save the file as UTF-8"
            ) from exc
        if not chunk:
            self._eof = True
            return False
        self._line += self._buf.count("\n", 0, self._pos)
        self._buf = self._buf[self._pos :] + chunk
        self._pos = 0
        return True

    def _skip_space(self) -> str:
        """The next non-blank character (consumed), or "" at the end of the file."""
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in " \t\r\n\ufeff":
                self._pos += 1
            if self._pos < len(self._buf):
                char = self._buf[self._pos]
                self._pos += 1
                return char
            if not self._fill():
                return ""

    def _where(self) -> str:
        return f"{self._path}:{self._line + self._buf.count(chr(10), 0, self._pos)}"

    def elements(self) -> Iterator[tuple[str, Any]]:
        if self._skip_space() != "[":
            raise InvalidDatasetError(
                f"{self._where()}: a .json dataset is an array of samples ([{{...}}, ...]); "
                "for one sample per line use .jsonl"
            )
        first = True
        while True:
            char = self._skip_space()
            if char == "]":
                return
            if not first:
                if char != ",":
                    raise InvalidDatasetError(f"{self._where()}: not valid JSON: expected ','")
                char = self._skip_space()
            if not char:
                raise InvalidDatasetError(f"{self._where()}: not valid JSON: the array ends early")
            self._pos -= 1
            yield self._where(), self._element()
            first = False

    def _element(self) -> Any:
        decoder = json.JSONDecoder()
        while True:
            try:
                value, end = decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                # Maybe cut off by the chunk's end: read more, unless the file is done.
                if len(self._buf) - self._pos > self._max:
                    raise InvalidDatasetError(
                        f"{self._where()}: element longer than {self._max:,} characters"
                    ) from None
                # Read as much again as is pending: a long element costs O(its length).
                if self._fill(max(_CHUNK, len(self._buf) - self._pos)):
                    continue
                line = self._line + self._buf.count("\n", 0, exc.pos)
                raise InvalidDatasetError(
                    f"{self._path}:{line}: not valid JSON: {exc.msg}"
                ) from None
            except RecursionError:
                raise InvalidDatasetError(
                    f"{self._where()}: JSON nested too deeply to read"
                ) from None
            if end == len(self._buf) and self._fill():
                continue  # a number may go on in the next chunk: decode it again
            self._pos = end
            return value


def _json_rows(path: Path, max_line_bytes: int) -> Iterator[Row]:
    with _open_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
        reader = _ArrayReader(text, path, max_line_bytes)
        for number, (where, value) in enumerate(reader.elements(), start=1):
            yield Row(where, number, _object(value, f"{where} (element {number})"))


# -- CSV ---------------------------------------------------------------------------------


def _csv_rows(path: Path, max_line_bytes: int) -> Iterator[Row]:
    csv.field_size_limit(max_line_bytes)
    with _open_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
        reader = csv.reader(text)
        try:
            header = next(reader, None)
            if header is None:
                return
            _check_header(header, path)
            for number, cells in enumerate(reader, start=1):
                where = f"{path}:{reader.line_num} (row {number})"
                if not cells:
                    continue
                if len(cells) != len(header):
                    raise InvalidDatasetError(
                        f"{where}: {len(cells)} cells, but the header has {len(header)} columns"
                    )
                yield Row(where, number, dict(zip(header, cells, strict=True)))
        except UnicodeDecodeError as exc:
            raise InvalidDatasetError(
                f"{path}:{reader.line_num + 1}: not UTF-8 text; save the file as UTF-8"
            ) from exc
        except csv.Error as exc:
            raise InvalidDatasetError(f"{path}:{reader.line_num}: not valid CSV: {exc}") from exc


def _check_header(header: list[str], path: Path) -> None:
    seen: set[str] = set()
    for name in header:
        if not name:
            raise InvalidDatasetError(f"{path}:1: the header has an empty column name")
        if name in seen:
            raise InvalidDatasetError(f"{path}:1: the header names column {name!r} twice")
        seen.add(name)


# -- Parquet and Hugging Face ------------------------------------------------------------


def _optional(module: str, extra: str, what: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise InvalidDatasetError(
            f"reading {what} needs the `{module}` package: pip install 'weakincentives[{extra}]'"
        ) from None


def _parquet_rows(path: Path) -> Iterator[Row]:
    parquet = _optional("pyarrow.parquet", "parquet", "Parquet")
    try:
        file = parquet.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid, OSError, ...
        raise InvalidDatasetError(f"{path}: not a readable Parquet file: {exc}") from exc
    number = 0
    with file:
        for batch in file.iter_batches(batch_size=1024):
            for record in batch.to_pylist():
                number += 1
                yield Row(f"{path}: row {number}", number, record)


def _hf_rows(name: str, split: str | None) -> Iterator[Row]:
    datasets = _optional("datasets", "hf", "Hugging Face datasets")
    path = Path(name)
    try:
        saved = (path / "dataset_dict.json").exists() or (path / "state.json").exists()
        if path.is_dir() and saved:
            loaded = datasets.load_from_disk(str(path))
        else:
            loaded = datasets.load_dataset(name, split=split, streaming=True)
        if isinstance(loaded, datasets.DatasetDict | datasets.IterableDatasetDict):
            loaded = _pick_split(loaded, name, split)
    except InvalidDatasetError:
        raise
    except Exception as exc:  # the library raises many kinds (network, format, missing)
        raise InvalidDatasetError(
            f"{name}: cannot load the Hugging Face dataset: {type(exc).__name__}: {exc}"
        ) from exc
    label = f"{name}[{split}]" if split else name
    for number, record in enumerate(loaded, start=1):
        yield Row(f"{label}: row {number}", number, dict(record))


def _pick_split(splits: Any, name: str, split: str | None) -> Any:
    names = sorted(splits)
    if split is None:
        if len(names) == 1:
            return splits[names[0]]
        raise InvalidDatasetError(
            f"{name}: the dataset has splits {', '.join(names)}; pick one with --split NAME"
        )
    if split not in splits:
        raise InvalidDatasetError(f"{name}: no split {split!r}; the dataset has {', '.join(names)}")
    return splits[split]
