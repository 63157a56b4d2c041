"""`EvalLoop`: a mailbox worker that evaluates `EvalRequest`s through an `AgentLoop`."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import (
    AdapterConnectionError,
    AdapterTimeoutError,
    EvalError,
    MailboxConnectionError,
    MessageDecodeError,
    ProviderServerError,
    RateLimitError,
)
from weakincentives.runtime.agent_loop import AgentLoop
from weakincentives.runtime.bundle import DebugBundleConfig, bundle_recorder
from weakincentives.runtime.dlq import DLQPolicy, RetryPolicy
from weakincentives.runtime.lease import LeaseExtenderConfig, WorkerHeartbeat
from weakincentives.runtime.limits import Budget
from weakincentives.runtime.mailbox import Mailbox, Message
from weakincentives.runtime.worker import MailboxWorker

from ._execute import SampleOutcome, execute_sample
from ._types import EvalRequest, EvalResult, Score

__all__ = ["TRANSIENT_ERRORS", "EvalLoop", "EvalLoopConfig", "TransientEvalError"]

_log = logging.getLogger(__name__)

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    AdapterConnectionError,
    AdapterTimeoutError,
    RateLimitError,
    ProviderServerError,
    MailboxConnectionError,
)
"""Agent failures worth another delivery when a dead-letter policy allows retries."""


class TransientEvalError(EvalError):
    """A sample failed for a reason that may pass; the delivery is retried."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalLoopConfig:
    """How an `EvalLoop` runs each sample."""

    lease_extender: LeaseExtenderConfig | None = None
    """Extend a message's visibility while its sample runs (heartbeat-driven)."""
    debug_bundle_dir: Path | None = None
    """Write one debug bundle per sample under this directory (shorthand for `debug_bundle`)."""
    debug_bundle: DebugBundleConfig | None = None
    """Full debug bundle configuration (wins over `debug_bundle_dir`)."""
    timeout: float | None = None
    """Per-sample deadline in seconds (recorded as an error of kind `timeout`)."""
    budget: Budget | None = None
    """Token budget per sample (recorded as an error of kind `budget`)."""
    record_transcript: bool = True
    """Keep messages and tool calls on each result (for `wink query` and the viewer)."""
    transient_errors: tuple[type[BaseException], ...] = TRANSIENT_ERRORS
    """Agent exceptions retried through the DLQ policy before an error result is sent."""

    def bundle_config(self) -> DebugBundleConfig | None:
        """The effective debug bundle configuration, if bundles are on."""
        if self.debug_bundle is not None:
            return self.debug_bundle
        if self.debug_bundle_dir is not None:
            return DebugBundleConfig(directory=Path(self.debug_bundle_dir))
        return None


class EvalLoop(MailboxWorker[EvalRequest[Any, Any], EvalResult]):
    """Evaluates samples received from `requests` and replies with `EvalResult`s.

    For each `EvalRequest(sample, experiment)` the loop executes the sample through
    `loop` under the request's experiment, scores the output with `evaluator` (a
    session-aware evaluator also gets the session), replies the result to the message's
    `reply_to` (or to `results` when the message has none) and acknowledges. Every
    outcome is a result: an agent that raised, no output, an evaluator that raised, a
    timeout — each with its `error_kind`.

    Args:
        loop: The agent under test (the production `AgentLoop`).
        evaluator: `(output, expected) -> Score`, or session-aware `(output, expected,
            session) -> Score`.
        requests: Mailbox of `EvalRequest`s.
        config: Per-sample settings (timeouts, budgets, bundles, leases).
        dlq: Dead-letter policy; with one, transient agent failures are retried up to
            `dlq.max_deliveries` before the error result is sent.
        max_concurrent: Samples in flight at once.
        results: Where results go when a request has no `reply_to`.
        retry: Backoff between retries.
        clock: Clock for latencies, deadlines and heartbeats.
        name: Name in logs and health reports.
    """

    def __init__(
        self,
        *,
        loop: AgentLoop[Any, Any],
        evaluator: Callable[..., Score],
        requests: Mailbox[EvalRequest[Any, Any], EvalResult] | None = None,
        config: EvalLoopConfig | None = None,
        dlq: DLQPolicy[EvalRequest[Any, Any]] | None = None,
        max_concurrent: int = 1,
        results: Mailbox[EvalResult, Any] | None = None,
        retry: RetryPolicy | None = None,
        clock: Clock = SYSTEM_CLOCK,
        name: str | None = None,
    ) -> None:
        self.config = config or EvalLoopConfig()
        super().__init__(
            requests=requests, name=name, clock=clock, max_concurrent=max_concurrent,
            retry=retry, dlq=dlq, lease=self.config.lease_extender,
        )  # fmt: skip
        self.loop = loop
        self.evaluator = evaluator
        self.results = results
        self._dlq_policy = dlq
        self._clock = clock

    def handle(
        self, message: Message[EvalRequest[Any, Any], EvalResult], heartbeat: WorkerHeartbeat
    ) -> None:
        """Evaluate one request and reply with its result (see the class docstring)."""
        request = message.body
        if not isinstance(request, EvalRequest):
            raise MessageDecodeError(
                f"expected an EvalRequest, got {type(request).__name__}; "
                "send EvalRequest(sample=..., experiment=...) bodies",
            )
        outcome = self.evaluate(request, heartbeat=heartbeat, delivery_count=message.delivery_count)
        self._raise_if_transient(outcome, message.delivery_count)
        result = outcome.result
        if message.reply_to is not None:
            message.reply(result)
        elif self.results is not None:
            self.results.send(result)
        else:
            _log.warning(
                "%s: request %s has no reply_to and the loop has no results mailbox; "
                "its result is dropped", self.name, request.request_id,
            )  # fmt: skip

    def evaluate(
        self,
        request: EvalRequest[Any, Any],
        *,
        heartbeat: Callable[[], None] | None = None,
        delivery_count: int = 1,
    ) -> SampleOutcome:
        """Execute and score one request directly (no mailbox), writing its bundle."""
        sample = request.sample
        with bundle_recorder(
            self.config.bundle_config(), request_id=str(request.request_id), kind="eval",
            clock=self._clock, sample_id=sample.id, experiment=request.experiment.name,
            run_id=request.run_id,
        ) as rec:  # fmt: skip
            rec.set_request(request)
            outcome = execute_sample(
                self.loop, self.evaluator, request, timeout=self.config.timeout,
                budget=self.config.budget, heartbeat=heartbeat,
                record_transcript=self.config.record_transcript,
                delivery_count=delivery_count, clock=self._clock,
                on_prepared=rec.set_session_before if rec.enabled else None,
            )  # fmt: skip
            _record_outcome(rec, outcome)
        if rec.path is None:
            return outcome
        result = dataclasses.replace(outcome.result, bundle_path=rec.path)
        return dataclasses.replace(outcome, result=result)

    def _raise_if_transient(self, outcome: SampleOutcome, delivery_count: int) -> None:
        policy = self._dlq_policy
        exc = outcome.exception
        if policy is None or exc is None or outcome.result.error_kind != "agent":
            return
        if delivery_count >= policy.max_deliveries:
            return  # out of retries: the error result is the answer
        if isinstance(exc, self.config.transient_errors):
            raise TransientEvalError(f"sample {outcome.result.sample_id}: {exc}") from exc


def _record_outcome(rec: Any, outcome: SampleOutcome) -> None:
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
            "score": result.score,
            "passed": result.passed,
            "latency_ms": result.latency_ms,
            "error": result.error,
            "error_kind": result.error_kind,
            "usage": result.usage,
        }
    )
    if result.error is not None:
        rec.set_error(result.error_kind or "agent", result.error)
