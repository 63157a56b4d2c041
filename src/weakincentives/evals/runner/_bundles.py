"""Debug bundles of the samples a run executes: all of them, or only the failed ones.

`EvalLoop` (`EvalLoopConfig.debug_bundle`) and the local runner (`evaluate(bundles=...)`,
`wink eval run --bundles`) both record a sample's bundle with `record_bundle`: the request,
the session before and after, the logs, the response, `eval.json` (score, error and its
kind) and `error.json`. Every file is redacted (`weakincentives.redaction`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from weakincentives.clock import Clock
from weakincentives.runtime.bundle import DebugBundleConfig
from weakincentives.runtime.session import Session

from .._records import EvalRequest
from ._sample import SampleOutcome

if TYPE_CHECKING:
    from weakincentives.runtime.bundle import BundleWriter

__all__ = [
    "BundleOptions",
    "BundleScope",
    "keep_or_discard",
    "open_bundle",
    "record_bundle",
    "record_outcome",
    "with_bundle",
]

BundleScope = Literal["all", "failed"]
"""Which samples get a bundle: every one, or those that did not pass (errors included)."""


@dataclass(frozen=True, slots=True)
class BundleOptions:
    """Where bundles go and which samples get one."""

    config: DebugBundleConfig
    """Directory and capture settings."""
    scope: BundleScope = "all"
    """`all`, or `failed` for the samples that did not pass."""


def record_bundle(
    options: BundleOptions,
    request: EvalRequest[object, object],
    clock: Clock,
    run: Callable[[Callable[[Session], None]], SampleOutcome],
) -> SampleOutcome:
    """Run `run(on_prepared)` inside a bundle recorder and return its outcome.

    The outcome's result names the bundle written (`bundle_path`); with scope `failed`,
    a sample that passed writes none.
    """
    recorder = open_bundle(options, request, clock)
    with recorder as rec:
        rec.set_request(request)
        outcome = run(rec.set_session_before)
        keep_or_discard(options, rec, outcome)
    return with_bundle(outcome, recorder)


def open_bundle(
    options: BundleOptions, request: EvalRequest[object, object], clock: Clock
) -> BundleWriter:
    """The recorder of `request`'s bundle (enter it around the sample; see `record_bundle`)."""
    # The writer (zip archives, log capture) is imported by the first run that bundles.
    from weakincentives.runtime.bundle import bundle_recorder

    return bundle_recorder(
        options.config, request_id=str(request.request_id), kind="eval", clock=clock,
        sample_id=request.sample.id, experiment=request.experiment.name, run_id=request.run_id,
    )  # fmt: skip


def keep_or_discard(options: BundleOptions, rec: BundleWriter, outcome: SampleOutcome) -> None:
    """Record `outcome` in the bundle, or drop the bundle of a pass under scope `failed`."""
    if options.scope == "failed" and outcome.result.passed:
        rec.discard()
    else:
        record_outcome(rec, outcome)


def with_bundle(outcome: SampleOutcome, rec: BundleWriter) -> SampleOutcome:
    """`outcome` whose result names the bundle `rec` wrote (as is when none was)."""
    if rec.path is None:
        return outcome
    result = dataclasses.replace(outcome.result, bundle_path=rec.path)
    return dataclasses.replace(outcome, result=result)


def record_outcome(rec: BundleWriter, outcome: SampleOutcome) -> None:
    """Put a sample's response, session after, `eval.json` and error into its bundle."""
    if not rec.enabled:
        return
    result = outcome.result
    if outcome.response is not None:
        rec.set_response(outcome.response)
    if outcome.session is not None:
        rec.set_session_after(outcome.session)
    rec.set_eval(
        {
            "sample_id": result.sample_id,
            "experiment_name": result.experiment_name,
            "epoch": result.epoch,
            "request_id": result.request_id,
            "score": result.score,
            "passed": result.passed,
            "latency_ms": result.latency_ms,
            "error": result.error,
            "error_kind": result.error_kind,
            "usage": result.usage,
            "delivery_count": result.delivery_count,
        }
    )
    if result.error is not None:
        rec.set_error(result.error_kind or "agent", outcome.exception or result.error)
