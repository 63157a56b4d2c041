"""`StoredResults`: the results one call appended to a run, read back from its file.

The local runner appends each result to the run store as it completes and keeps nothing
of it in memory; the report it returns holds a `StoredResults` instead of a tuple: the
byte range of `results.jsonl` that call wrote, read back (and kept) the first time the
results are asked for. `len()` needs no reading. A run of a million samples therefore
costs the runner no memory per sample; the report's tables are computed in one pass
that streams the file (`stream()`, see `report._totals`). What compares results side by
side (experiments, epochs) reads and holds them, except for a run directory read back
by `EvalReport.load(slim=True)` (`compact`), whose report keeps a compact form of each
result from that pass instead (`report._columns`).
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, overload

from weakincentives import serde
from weakincentives.errors import RunStoreError, SerdeError

from .._records import EvalResult
from ._slim import SlimDecoder

__all__ = ["StoredResults", "decode_report_fields"]


def _decode(raw: bytes) -> EvalResult:
    return serde.loads(EvalResult, raw)


def decode_report_fields(raw: bytes) -> EvalResult:
    """A result line as an `EvalResult` holding what a report reads (`SlimDecoder`).

    The transcript, output, input and expected are skipped, not built (the runner's `slim`
    drops them anyway); a line in any other shape goes through the full validator.
    """
    return _slim_decoder()(raw)


@functools.cache
def _slim_decoder() -> SlimDecoder:
    return SlimDecoder()


class StoredResults(Sequence[EvalResult]):
    """`earlier` results, then the lines `start:end` of a results file, as `EvalResult`s.

    Args:
        path: The run's `results.jsonl`.
        start: Offset of the first line to read.
        end: Offset just past the last line to read (the file's size when the writer
            finished: lines appended later, by a resume, are not this call's).
        count: How many lines that range holds.
        earlier: Results to put first (a resumed run's earlier results, already read).
        transform: Applied to each result read (the runner's `slim`).
        report_fields: Read only the fields a report computes with (scores, errors,
            latency, usage, metadata, environment, costs; see `decode_report_fields`),
            faster; the transcript, output, input and expected are then left empty.
        unique_keys: The writer recorded each `(sample, experiment, epoch)` once here
            (`earlier` included), so a report need not read the keys to count them.
        streamed: A report computes its tables from one pass over `stream()` instead
            of holding the results (set when nothing else of the report needs them
            side by side: one experiment, one epoch).
        compact: Several experiments or epochs, each key once, nothing `earlier`: a
            report computes its tables from one pass over `positions()` and keeps
            only a compact form of each result for what compares them side by side
            (`report._columns`); implies `streamed`.
    """

    __slots__ = (
        "_count", "_decode", "_earlier", "_end", "_experiment", "_kept", "_lock", "_path",
        "_start", "_transform", "compact", "streamed", "unique_keys",
    )  # fmt: skip

    def __init__(
        self,
        path: Path,
        *,
        start: int,
        end: int,
        count: int,
        earlier: Sequence[EvalResult] = (),
        transform: Callable[[EvalResult], EvalResult] | None = None,
        report_fields: bool = False,
        unique_keys: bool = False,
        streamed: bool = False,
        compact: bool = False,
    ) -> None:
        self._path = path
        self._start = start
        self._end = end
        self._count = count
        self._earlier = tuple(earlier)
        self._transform = transform
        self._decode = decode_report_fields if report_fields else _decode
        self._kept: tuple[EvalResult, ...] | None = None
        self._experiment: str | None = None
        self._lock = threading.Lock()
        self.unique_keys = unique_keys
        """Whether each result key occurs once (see the class docstring)."""
        self.streamed = streamed or compact
        """Whether a report streams these results for its tables (class docstring)."""
        self.compact = compact and not self._earlier
        """Whether a report keeps a compact form of these results (class docstring)."""

    @property
    def path(self) -> Path:
        """The results file read back."""
        return self._path

    def __len__(self) -> int:
        return len(self._earlier) + self._count

    def __iter__(self) -> Iterator[EvalResult]:
        return iter(self._all())

    @overload
    def __getitem__(self, index: int) -> EvalResult: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[EvalResult, ...]: ...
    def __getitem__(self, index: int | slice) -> EvalResult | tuple[EvalResult, ...]:
        return self._all()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredResults | tuple | list):
            return len(self) == len(other) and self._all() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to tuples, so not hashable like one

    def __repr__(self) -> str:
        return f"StoredResults({str(self._path)!r}, results={len(self)})"

    def stream(self) -> Iterator[EvalResult]:
        """The results in order, read from the file as they are used, none kept.

        What a report computes its totals with: a million results pass through one at a
        time. (Iterating the sequence itself reads them once and keeps them.)
        """
        kept = self._kept
        if kept is not None:
            return iter(kept)
        return itertools.chain(self._earlier, self._read())

    def of_experiment(self, name: str, count: int) -> StoredResults:
        """The `count` results of experiment `name` among these, read when asked for.

        For the report of one experiment of a `compact` run: its results are read from
        the same file (the others skipped) if something asks for them.
        """
        part = StoredResults(
            self._path, start=self._start, end=self._end, count=count,
            transform=self._transform, unique_keys=self.unique_keys,
        )  # fmt: skip
        part._decode = self._decode
        part._experiment = name
        return part

    def positions(self) -> Iterator[tuple[int, EvalResult]]:
        """`(offset, result)` for each result, in order, none kept.

        The offset is where the result's line starts in the file: `read_at(offset)`
        reads that result again; it is -1 for the `earlier` results (not in the file's
        range: they cannot be read back).
        """
        earlier = ((-1, result) for result in self._earlier)
        return itertools.chain(earlier, self._read(with_offsets=True))

    def read_at(self, offset: int) -> EvalResult:
        """The result whose line starts at `offset` of the file (see `positions`).

        Raises:
            RunStoreError: the file cannot be read there, or the line is not a result.
        """
        try:
            with self._path.open("rb") as handle:
                handle.seek(offset)
                raw = handle.readline()
            result = self._decode(raw)
        except (OSError, SerdeError) as exc:
            raise RunStoreError(
                f"{self._path}: cannot read the result at byte {offset} back: {exc}; keep "
                "the run directory unchanged while its report is in use"
            ) from exc
        return result if self._transform is None else self._transform(result)

    def _all(self) -> tuple[EvalResult, ...]:
        kept = self._kept
        if kept is None:
            with self._lock:  # two threads asking at once read the file once
                kept = self._kept
                if kept is None:
                    kept = self._kept = (*self._earlier, *self._read())
        return kept

    @overload
    def _read(self, *, with_offsets: Literal[False] = False) -> Iterator[EvalResult]: ...
    @overload
    def _read(self, *, with_offsets: Literal[True]) -> Iterator[tuple[int, EvalResult]]: ...
    def _read(self, *, with_offsets: bool = False) -> Iterator[Any]:
        transform, decode = self._transform, self._decode
        try:
            handle = self._path.open("rb")
        except OSError as exc:
            raise RunStoreError(
                f"cannot read the results back from {self._path}: {exc}; the report of a "
                "run with a store reads its results from the run directory: keep it, or "
                "ask for the results before removing it"
            ) from exc
        read = 0
        with handle:
            handle.seek(self._start)
            position = self._start
            for raw in handle:
                position += len(raw)
                if position > self._end:
                    break
                try:
                    result = decode(raw)
                except SerdeError as exc:
                    raise RunStoreError(
                        f"{self._path}: a result line does not read: {exc}"
                    ) from exc
                if self._experiment is not None and result.experiment_name != self._experiment:
                    continue
                read += 1
                if transform is not None:
                    result = transform(result)
                yield (position - len(raw), result) if with_offsets else result
        if read != self._count:
            raise RunStoreError(
                f"{self._path}: expected {self._count} results between bytes {self._start} and "
                f"{self._end}, found {read}; the file changed after the run"
            )
