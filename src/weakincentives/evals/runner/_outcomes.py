"""The results the local runner makes itself: `slim` copies for the report, `error_result`."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .._records import ErrorKind, EvalRequest, EvalResult, RecordInputs, Score, build_result
from ._sample import NO_USAGE

__all__ = ["error_result", "slim"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def slim(result: EvalResult) -> EvalResult:
    """`result` as the report keeps it when the run store holds the full record.

    Dropped (the store has them): the transcript (`messages`, `tool_calls`, `turns`),
    `output`, `input`, `expected`, `request_id`, `session_id`, and the reason of a passed
    score without metrics (that score becomes a shared `Score(value, passed=True)`). Kept:
    everything the report computes with (scores, metrics, errors and their reasons, latency, usage,
    metadata, environment).
    Empty metadata and zero usage are shared objects.
    """
    score, error, usage = result.score, result.error, result.usage
    if error is None and score.passed and not score.metrics and score.reason:
        score = _passed_score(score.value)
    # Built through its slots (see `build_result`), not `dataclasses.replace` (which reads
    # every field through `dataclasses.fields` first): this runs per result. The dropped
    # fields are left to their defaults; tests check that every other field is carried over.
    return build_result(
        sample_id=result.sample_id, experiment_name=result.experiment_name, score=score,
        latency_ms=result.latency_ms, error=error, bundle_path=result.bundle_path,
        error_kind=result.error_kind, epoch=result.epoch, run_id=result.run_id,
        usage=NO_USAGE if usage is NO_USAGE or usage == NO_USAGE else usage,
        metadata=result.metadata or _EMPTY, delivery_count=result.delivery_count,
        environment=result.environment, cost=result.cost, judge_cost=result.judge_cost,
    )  # fmt: skip


@functools.lru_cache(maxsize=64)
def _passed_score(value: float) -> Score:
    return Score(value=value, passed=True)


def error_result(
    request: EvalRequest[Any, Any],
    message: str,
    kind: ErrorKind,
    latency_ms: float,
    inputs: RecordInputs | None = None,
) -> EvalResult:
    """An error result for `request` that never reached scoring (input and expected kept)."""
    sample = request.sample
    inputs = inputs or RecordInputs()
    return EvalResult(
        sample_id=sample.id, experiment_name=request.experiment.name, epoch=request.epoch,
        request_id=str(request.request_id), run_id=request.run_id,
        metadata=dict(sample.metadata), latency_ms=round(latency_ms), error=message,
        error_kind=kind,
        score=Score(value=0.0, passed=False, reason=message),
        input=inputs.value(sample.input), expected=inputs.value(sample.expected),
    )  # fmt: skip
