"""`StoredResults`: the results one call appended to a run, read back from its file.

The local runner appends each result to the run store as it completes and keeps nothing
of it in memory; the report it returns holds a `StoredResults` instead of a tuple: the
byte range of `results.jsonl` that call wrote, read back (and kept) the first time the
results are asked for. `len()` needs no reading. A run of a million samples therefore
costs the runner no memory per sample; a report that computes over every result holds
them once it has read them, as a report built from a tuple does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from weakincentives import serde
from weakincentives.errors import RunStoreError, SerdeError
from weakincentives.runtime.session import TokenUsage

from .._records import EvalResult, Metric, Score, build_result

__all__ = ["StoredResults", "decode_report_fields"]


def _decode(raw: bytes) -> EvalResult:
    return serde.loads(EvalResult, raw)


def decode_report_fields(raw: bytes) -> EvalResult:
    """A line this process wrote, as an `EvalResult` holding what a report reads.

    The fields a report computes with are read with the standard library's `json` and
    built as pydantic would build them (the file was written from valid results moments
    ago): 5 µs a line instead of 30, and no `pydantic` import for a run that only reports.
    The transcript, output, input and expected are left out (the runner's `slim` drops
    them anyway). A line in any other shape goes through `serde.loads` (full validation).
    """
    try:
        return _report_fields(json.loads(raw))
    except Exception:  # an unusual line: the validator decides (and says why)
        return serde.loads(EvalResult, raw)


def _report_fields(data: dict[str, Any]) -> EvalResult:
    raw_score = data["score"]
    metrics = tuple(
        Metric(
            name=m["name"], value=float(m["value"]), weight=float(m["weight"]),
            metadata=m["metadata"],
        )
        for m in raw_score["metrics"]
    )  # fmt: skip
    score = Score(
        value=float(raw_score["value"]), passed=raw_score["passed"], reason=raw_score["reason"],
        metrics=metrics,
    )  # fmt: skip
    latency, bundle, cost, judge_cost = (
        data["latency_ms"],
        data["bundle_path"],
        data["cost"],
        data["judge_cost"],
    )
    if type(raw_score["passed"]) is not bool or type(data["epoch"]) is not int:
        raise TypeError("not as written")  # pydantic's coercions are the validator's
    return build_result(
        sample_id=data["sample_id"], experiment_name=data["experiment_name"], score=score,
        latency_ms=round(latency), error=data["error"],
        bundle_path=None if bundle is None else Path(bundle), error_kind=data["error_kind"],
        epoch=data["epoch"], request_id=data["request_id"], run_id=data["run_id"],
        usage=TokenUsage(**data["usage"]), metadata=data["metadata"],
        delivery_count=data["delivery_count"], environment=data["environment"],
        cost=None if cost is None else float(cost),
        judge_cost=None if judge_cost is None else float(judge_cost),
    )  # fmt: skip


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
    """

    __slots__ = (
        "_count", "_decode", "_earlier", "_end", "_kept", "_lock", "_path", "_start",
        "_transform",
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
    ) -> None:
        self._path = path
        self._start = start
        self._end = end
        self._count = count
        self._earlier = tuple(earlier)
        self._transform = transform
        self._decode = decode_report_fields if report_fields else _decode
        self._kept: tuple[EvalResult, ...] | None = None
        self._lock = threading.Lock()

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

    def _all(self) -> tuple[EvalResult, ...]:
        kept = self._kept
        if kept is None:
            with self._lock:  # two threads asking at once read the file once
                kept = self._kept
                if kept is None:
                    kept = self._kept = (*self._earlier, *self._read())
        return kept

    def _read(self) -> Iterator[EvalResult]:
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
                read += 1
                yield result if transform is None else transform(result)
        if read != self._count:
            raise RunStoreError(
                f"{self._path}: expected {self._count} results between bytes {self._start} and "
                f"{self._end}, found {read}; the file changed after the run"
            )
