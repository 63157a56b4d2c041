"""Reading and writing reports as versioned JSONL, and reading run directories.

A saved report (`EvalReport.save`)::

    {"format": "weakincentives.eval_report", "version": 1, "run_id": ..., "expected_count": ...,
     "config": {...}}
    {<EvalResult>}
    {<EvalResult>}

A run directory (written by the run store) holds `results.jsonl` (the same result lines,
no header; when a key appears twice the last line wins) and optionally `run.json`, its
manifest (`run_id`, and `counts.expected` or `expected_count`). Results are appended as they finish,
so a crash can leave the last line cut short: a final line without a newline that does
not parse is skipped (with a log warning); a bad line anywhere else is an error.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weakincentives import serde
from weakincentives.errors import InvalidReportError, SerdeError

from .._records import EvalResult
from ..store import FORMAT_VERSION, MANIFEST_FILE, RESULTS_FILE, SlimDecoder, StoredResults
from ._collector import collector_paused

__all__ = [
    "REPORT_FORMAT",
    "REPORT_VERSION",
    "LoadedReport",
    "StrPath",
    "read_report",
    "read_run_id",
    "write_report",
]

REPORT_FORMAT = "weakincentives.eval_report"
"""The `format` field of a saved report's header line."""
REPORT_VERSION = 1
"""The report format version this code writes and reads."""

REPORT_FILE = "report.jsonl"

StrPath = str | os.PathLike[str]
"""A filesystem path as a string or `Path`."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedReport:
    """What `read_report` found: the results and the header or manifest fields."""

    results: tuple[EvalResult, ...] | StoredResults
    """Results in file order (streamed from a run's file: see `read_report`)."""
    run_id: str | None = None
    """Run id from the header or manifest."""
    expected_count: int | None = None
    """Expected count from the header or manifest."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """Report config (saved report) or the whole manifest (run directory)."""


def write_report(
    path: StrPath,
    results: Sequence[EvalResult],
    *,
    run_id: str | None,
    expected_count: int | None,
    config: Mapping[str, Any],
) -> Path:
    """Write a header line and one line per result, atomically (temp file + rename)."""
    target = Path(path)
    if target.is_dir():
        target = target / REPORT_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    header = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "run_id": run_id,
        "expected_count": expected_count,
        "config": serde.dump(config),
    }
    temporary = target.with_name(f".{target.name}.tmp")
    with temporary.open("wb") as out:
        out.write(json.dumps(header, ensure_ascii=False).encode("utf-8") + b"\n")
        for result in results:
            out.write(serde.dumps(result) + b"\n")
    temporary.replace(target)
    return target


def read_report(
    path: StrPath, *, slim: bool = False, experiment_prefix: str = "", hold: bool = False
) -> LoadedReport:
    """Read a saved report, a bare results JSONL file, or a run directory.

    The file is streamed: one line at a time is read, and of a run directory only the
    last line of each key is kept. With `slim`, each result keeps only the fields a
    report computes with (see `SlimDecoder`); the transcripts, outputs, inputs and
    expected values are skipped without being validated. `experiment_prefix` is put
    before each result's experiment name as it is read. A slim read (no prefix) of a
    run directory in which each key occurs once keeps none of its results: they are
    `StoredResults` over the run's file, which a report's tables stream through (see
    `report._totals`); with several experiments or epochs the report keeps a compact
    form of each result (`StoredResults.compact`, `report._columns`). `hold=True` reads
    every result into memory instead (for a caller that uses them all, side by side).

    Raises:
        InvalidReportError: the path holds no report, the format version is unknown, or a
            line (other than a truncated last one) is corrupt.
    """
    source = Path(path)
    decode = _decoder(slim, experiment_prefix)
    if not source.is_dir():
        return _read_file(source, decode)
    if (source / RESULTS_FILE).is_file():
        manifest = _read_manifest(source / MANIFEST_FILE)
        # The run store appends a new line when a key is re-run: the last line wins.
        # Without re-runs (one line per key), a slim read streams the file instead.
        streams = slim and not experiment_prefix and not hold
        streamed = _streamed_run(source / RESULTS_FILE) if streams else None
        if streamed is not None:
            loaded = LoadedReport(results=streamed)
        else:
            loaded = _read_file(source / RESULTS_FILE, decode, latest=True)
        counts = manifest.get("counts")
        expected = _optional(manifest, "expected_count", int)
        if expected is None and isinstance(counts, dict):
            expected = _optional(counts, "expected", int)
        return LoadedReport(
            results=loaded.results,
            run_id=_optional(manifest, "run_id", str) or loaded.run_id,
            expected_count=expected,
            config=manifest or loaded.config,
        )
    if (source / REPORT_FILE).is_file():
        return _read_file(source / REPORT_FILE, decode)
    raise InvalidReportError(
        f"{source}: a directory without {RESULTS_FILE} or {REPORT_FILE}; pass a run "
        "directory or a file written by EvalReport.save"
    )


def read_run_id(path: StrPath) -> Any:
    """The `run_id` that `read_report(path)` gives, read from the manifest or header only.

    None when there is none, or when the path cannot be read (`read_report` says why).
    """
    source = Path(path)
    try:
        if not source.is_dir():
            return _header_run_id(source)
        if (source / RESULTS_FILE).is_file():
            manifest = _read_manifest(source / MANIFEST_FILE)
            return _optional(manifest, "run_id", str) or _header_run_id(source / RESULTS_FILE)
        if (source / REPORT_FILE).is_file():
            return _header_run_id(source / REPORT_FILE)
    except (InvalidReportError, OSError):
        return None
    return None


def _header_run_id(source: Path) -> Any:
    for lineno, line in _Lines(source):
        header = _header_of(line, f"{source}:{lineno}", not line.endswith(b"\n"))
        return None if header is None else header.get("run_id")
    return None


def _decoder(slim: bool, prefix: str) -> Callable[[bytes], EvalResult]:
    rename = prefix.__add__ if prefix else None
    if slim:
        return SlimDecoder(rename=rename)
    if rename is None:
        return _full_result
    return lambda line: _renamed(_full_result(line), prefix)


def _streamed_run(path: Path) -> StoredResults | None:
    """A run's `results.jsonl` as `StoredResults` when each key occurs once.

    One quick pass reads each line's key only and keeps its 64-bit hash (8 bytes per
    line; two keys whose hashes collide, a 1 in 2**64 chance, only send the file to the
    full reader). With several experiments or epochs the results are `compact` (the
    report compares or clusters them side by side from a compact form of each).
    None when the file needs the full reader instead: a key recorded twice (a retry:
    the last line wins), a blank line, a last line cut short, or a line whose key does
    not read (the full reader names its file:line).
    """
    decode = _key_decoder()
    first: tuple[str, int] | None = None
    several = False
    seen: array[int] = array("q")
    count = end = 0
    try:
        with path.open("rb") as handle:
            for raw in handle:
                if raw.isspace() or not raw.endswith(b"\n"):
                    return None
                key = decode(raw)
                part = (key.experiment_name, key.epoch)
                if first is None:
                    first = part
                elif part != first:
                    several = True  # comparisons, epochs: a compact form of each result
                seen.append(hash((key.sample_id, key.experiment_name, key.epoch)))
                count += 1
                end += len(raw)
    except (OSError, ValueError):  # msgspec's DecodeError and ValidationError
        return None
    if _repeats(seen):
        return None
    return StoredResults(
        path, start=0, end=end, count=count, report_fields=True, unique_keys=True,
        streamed=True, compact=several,
    )  # fmt: skip


@functools.cache
def _key_decoder() -> Callable[[bytes], Any]:
    import msgspec

    class Key(msgspec.Struct, gc=False):
        sample_id: str
        experiment_name: str
        epoch: int = 0

    return msgspec.json.Decoder(Key).decode


def _repeats(hashes: array[int]) -> bool:
    """Whether a hash occurs twice (sorts `hashes` in place, as numpy, not as a list)."""
    import numpy as np

    view = np.frombuffer(hashes, dtype=np.int64) if hashes else np.empty(0, np.int64)
    view.sort()
    return bool(np.any(view[1:] == view[:-1]))


def _full_result(line: bytes) -> EvalResult:
    return serde.loads(EvalResult, line)


def _renamed(result: EvalResult, prefix: str) -> EvalResult:
    return dataclasses.replace(result, experiment_name=prefix + result.experiment_name)


def _read_file(
    source: Path, decode: Callable[[bytes], EvalResult], *, latest: bool = False
) -> LoadedReport:
    """Read `source`; with `latest`, keep the last result of each key (in first-seen order)."""
    header: dict[str, Any] | None = None
    results: list[EvalResult] = []
    by_key: dict[tuple[str, str, int], EvalResult] = {}
    lines = _Lines(source)
    with collector_paused():
        for lineno, line in lines:
            if lineno == lines.first:
                header = _header_of(line, f"{source}:{lineno}", not line.endswith(b"\n"))
                if header is not None:
                    continue
            try:
                result = decode(line)
            except SerdeError as exc:
                where = f"{source}:{lineno}"
                if not line.endswith(b"\n"):  # only the last line can be cut short
                    _log.warning("%s: skipping a last line cut short (crash while writing?)", where)
                    break
                raise InvalidReportError(
                    f"{where}: not a valid result line: {exc}; fix or remove the line"
                ) from exc
            if latest:
                by_key[result.sample_id, result.experiment_name, result.epoch] = result
            else:
                results.append(result)
    header = header or {}
    expected = header.get("expected_count")
    return LoadedReport(
        results=tuple(by_key.values()) if latest else tuple(results),
        run_id=header.get("run_id"),
        expected_count=expected if isinstance(expected, int) else None,
        config=header.get("config") or {},
    )


def _header_of(line: bytes, where: str, cut_short: bool) -> dict[str, Any] | None:
    """Return the header if `line` is one; None if it is a result line (bare results)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        if cut_short:
            return None  # a lone truncated line; the result parser skips it
        raise InvalidReportError(
            f"{where}: not valid JSON: {exc.msg} at column {exc.colno}"
        ) from exc
    if not isinstance(obj, dict) or "format" not in obj:
        return None
    if obj["format"] != REPORT_FORMAT:
        raise InvalidReportError(
            f"{where}: format {obj['format']!r} is not {REPORT_FORMAT!r}; "
            "this file is not an eval report"
        )
    if obj.get("version") != REPORT_VERSION:
        raise InvalidReportError(
            f"{where}: report format version {obj.get('version')!r} is not supported "
            f"(this weakincentives reads version {REPORT_VERSION}); "
            "read it with the weakincentives version that wrote it"
        )
    return obj


class _Lines:
    """The non-blank lines of a file, numbered from 1, and the number of the first one.

    A line that does not end with a newline is the last one, cut short by a crash while
    it was written. (A class rather than a generator: `first` is known before the loop
    body runs, and blank lines are found without copying every line, as `strip` would.)
    """

    def __init__(self, source: Path) -> None:
        try:
            self._handle = source.open("rb")
        except FileNotFoundError as exc:
            raise InvalidReportError(f"{source}: no such report file or run directory") from exc
        self.first = 0

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        with self._handle as handle:
            for lineno, raw in enumerate(handle, start=1):
                if raw.isspace():
                    continue
                if not self.first:
                    self.first = lineno
                yield lineno, raw


def _read_manifest(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        manifest = json.loads(path.read_bytes())
    except json.JSONDecodeError as exc:
        raise InvalidReportError(
            f"{path}:{exc.lineno}: run manifest is not valid JSON: {exc.msg}"
        ) from exc
    if not isinstance(manifest, dict):
        raise InvalidReportError(f"{path}: run manifest must be a JSON object")
    version = manifest.get("format_version", FORMAT_VERSION)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise InvalidReportError(
            f"{path}: format_version {version!r} is not one this weakincentives reads "
            f"(<= {FORMAT_VERSION}); upgrade weakincentives to read this run"
        )
    return manifest


def _optional(mapping: Mapping[str, Any], key: str, tp: type[Any]) -> Any:
    value = mapping.get(key)
    if isinstance(value, tp) and not isinstance(value, bool):
        return value
    return None
