"""Reading result lines for a report: only the fields the report computes with.

A stored result line holds the whole record: the transcript (`messages`, `tool_calls`),
`output`, `input`, `expected`, `environment`. A report reads none of them, and validating
them is most of the cost of reading a run (about 30 µs a line with pydantic, for lines of
~1 KB). `SlimDecoder` reads a line with msgspec into the fields a report needs and skips
the rest without building or validating it (lazy validation: a malformed transcript is
found by the readers that read transcripts, `iter_results` and the viewer, not here).

Kept: `sample_id`, `experiment_name`, `score` (value, passed, reason, metrics), `latency_ms`,
`error`, `error_kind`, `epoch`, `usage`, `metadata`, `cost`, `judge_cost`, and the small
fields a caller of `evaluate()` reads on its report's results (`bundle_path`, `run_id`,
`delivery_count`, `environment`). Every other field of the `EvalResult` is left at its
default. The local runner's report reads its results back with the same decoder
(`StoredResults`), so there is one slim reading of a result line.

**Exactness.** The kept fields hold the same values `serde.loads(EvalResult, line)` gives:
msgspec accepts a subset of what pydantic accepts (its strict mode: no `"1"` for 1, no
`1.0` for an int field, ...), and both give equal values on what both accept (ints read
into float fields become floats, `latency_ms` is rounded as `serde.WholeNumber` rounds it,
`Score` and `Metric` run their own checks in `__post_init__`). A line msgspec refuses, or
whose values fail those checks, is read again by the full validator, so a line in an
unusual but valid form gives the same result, and an invalid one the same error.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weakincentives import serde
from weakincentives.runtime.session import TokenUsage

from .._records import ErrorKind, EvalResult, Score, build_result

if TYPE_CHECKING:
    import msgspec

__all__ = ["SlimDecoder", "slim_copy"]

_NO_USAGE = TokenUsage()


@functools.cache
def _line_type() -> type[msgspec.Struct]:
    import msgspec

    class SlimLine(msgspec.Struct, gc=False):
        """The fields of a result line a report reads; msgspec skips the others."""

        sample_id: str
        experiment_name: str
        score: Score
        latency_ms: int | float
        error: str | None = None
        error_kind: ErrorKind | None = None
        epoch: int = 0
        usage: TokenUsage = _NO_USAGE
        metadata: dict[str, Any] = msgspec.field(default_factory=dict)
        cost: float | None = None
        judge_cost: float | None = None
        bundle_path: str | None = None
        run_id: str | None = None
        delivery_count: int = 1
        environment: dict[str, Any] | None = None

    return SlimLine


class SlimDecoder:
    """Decode result lines into `EvalResult`s holding only what a report reads.

    Build one per file read (building the msgspec decoder costs about a millisecond) and
    call it per line.

    Example:
        >>> decode = SlimDecoder()
        >>> line = (b'{"sample_id": "a", "experiment_name": "x", "latency_ms": 12.4,'
        ...         b' "score": {"value": 1, "passed": true}, "messages": [{"role": "user"}]}')
        >>> result = decode(line)
        >>> result.score.value, result.latency_ms, result.messages
        (1.0, 12, ())
    """

    def __init__(self, *, rename: Callable[[str], str] | None = None) -> None:
        """Build the msgspec decoder of the slim line type.

        Args:
            rename: Names each result's experiment from the stored name, as the result is
                built (`wink eval compare` labels two runs' experiments `RUN/NAME` so,
                rather than copying every result afterwards).
        """
        import msgspec

        self._decode: Callable[[bytes], Any] = msgspec.json.Decoder(_line_type()).decode
        self._rename = rename

    def __call__(self, line: bytes) -> EvalResult:
        """The slim `EvalResult` of one JSON line.

        Raises:
            SerdeError: the line is not a valid result (the full validator's message).
        """
        rename = self._rename
        try:
            slim = self._decode(line)
            name = slim.experiment_name if rename is None else rename(slim.experiment_name)
            return build_result(
                sample_id=slim.sample_id, experiment_name=name,
                score=slim.score, latency_ms=slim.latency_ms, error=slim.error,
                error_kind=slim.error_kind, epoch=slim.epoch, usage=slim.usage,
                metadata=slim.metadata, cost=slim.cost, judge_cost=slim.judge_cost,
                bundle_path=None if slim.bundle_path is None else Path(slim.bundle_path),
                run_id=slim.run_id, delivery_count=slim.delivery_count,
                environment=slim.environment,
            )  # fmt: skip
        except Exception:  # any refusal: the full validator decides
            result = slim_copy(serde.loads(EvalResult, line))
            if rename is None:
                return result
            return dataclasses.replace(result, experiment_name=rename(result.experiment_name))


def slim_copy(result: EvalResult) -> EvalResult:
    """`result` with only the fields `SlimDecoder` keeps (the others at their defaults)."""
    return build_result(
        sample_id=result.sample_id, experiment_name=result.experiment_name,
        score=result.score, latency_ms=result.latency_ms, error=result.error,
        error_kind=result.error_kind, epoch=result.epoch, usage=result.usage,
        metadata=result.metadata, cost=result.cost, judge_cost=result.judge_cost,
        bundle_path=result.bundle_path, run_id=result.run_id,
        delivery_count=result.delivery_count, environment=result.environment,
    )  # fmt: skip
