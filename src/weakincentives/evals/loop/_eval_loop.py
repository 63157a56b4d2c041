"""`EvalLoop`: a mailbox worker that evaluates `EvalRequest`s through an `AgentLoop`.

Delivery is at-least-once: a sample may run twice (a worker died, a shutdown took it
back, a lease ran out) and its result may then be sent twice. Results carry their
request id, so `collect_results` counts each request once: the *report* is exactly-once.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weakincentives.adapters.pricing import PriceTable, default_prices
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError
from weakincentives.runtime.agent_loop import AgentLoop, FunctionLoop
from weakincentives.runtime.agent_worker import TRANSIENT_ERRORS
from weakincentives.runtime.answering import AnsweringWorker, reply_target
from weakincentives.runtime.bundle import BundleWriter, DebugBundleConfig, bundle_recorder
from weakincentives.runtime.dlq import DeadLetter, DLQPolicy, RetryPolicy
from weakincentives.runtime.lease import LeaseExtenderConfig, WorkerHeartbeat
from weakincentives.runtime.limits import Budget
from weakincentives.runtime.mailbox import Mailbox, Message
from weakincentives.runtime.threads import call_abandonable

from .._records import DEFAULT_VALUE_LIMIT, EvalRequest, EvalResult, RecordInputs, Score
from ..runner import (
    AsyncFunctionExecutor,
    SampleOutcome,
    error_result,
    execute_function,
    execute_sample,
    prepare_scorer,
    record_outcome,
    with_bundle,
)
from ._requests import DEFAULT_REQUEST_TYPE, dead_letter_result, decode_request

__all__ = ["TRANSIENT_ERRORS", "EvalLoop", "EvalLoopConfig"]

_log = logging.getLogger(__name__)


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
    """Per-sample deadline in seconds (recorded as an error of kind `timeout`). A sync
    agent that does not honour it is given up on then: its thread is abandoned (it does
    not keep the process alive) and the slot takes the next message."""
    budget: Budget | None = None
    """Token budget per sample (recorded as an error of kind `budget`)."""
    record_transcript: bool = True
    """Keep messages and tool calls on each result (for `wink query` and the viewer)."""
    record_inputs: bool = True
    """Keep each sample's input and expected value on its result (off for sensitive data)."""
    value_limit: int = DEFAULT_VALUE_LIMIT
    """Characters of input and expected kept per result (see `RecordInputs`)."""
    transient_errors: tuple[type[BaseException], ...] = TRANSIENT_ERRORS
    """Agent exceptions retried (while the retry and dead-letter policies allow) before
    the error result is sent."""
    prices: PriceTable | None = None
    """Prices for each result's `cost` and `judge_cost` (None: the package's table)."""

    def __post_init__(self) -> None:
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigurationError(f"timeout must be > 0 seconds or None, got {self.timeout!r}")

    @property
    def inputs(self) -> RecordInputs:
        """`record_inputs` and `value_limit` as a `RecordInputs`."""
        return RecordInputs(enabled=self.record_inputs, limit=self.value_limit)

    def bundle_config(self) -> DebugBundleConfig | None:
        """The effective debug bundle configuration, if bundles are on."""
        if self.debug_bundle is not None:
            return self.debug_bundle
        if self.debug_bundle_dir is not None:
            return DebugBundleConfig(directory=Path(self.debug_bundle_dir))
        return None


class EvalLoop(AnsweringWorker[EvalRequest[Any, Any], EvalResult]):
    """Evaluates samples received from `requests` and replies with `EvalResult`s.

    For each `EvalRequest(sample, experiment)` the loop executes the sample through
    `loop` under the request's experiment, scores the output with `evaluator` (a
    session-aware evaluator also gets the session), replies the result to the message's
    `reply_to` (or to `results` when the message has none) and acknowledges. Every
    outcome is a result: an agent that raised, no output, an evaluator or judge that
    raised, a timeout, a budget overrun, each with its `error_kind`, sent at once.
    Infrastructure failures that outlived the adapter's own retries
    (`EvalLoopConfig.transient_errors`: connection refused, provider 5xx, 429, timeouts)
    are retried through the mailbox with backoff instead, and dead-lettered once the
    retry or dead-letter policy gives up; every message given up on (that one, or a body
    that cannot be decoded, dead-lettered at once) is answered with an error result of
    kind `dead_letter` saying why (`on_dead_letter`), so no request goes unanswered. A
    body that arrives as a dict (a mailbox made without `body_type=`) is decoded as
    `request_type`. `AgentLoopWorker` follows the same rule (`runtime.answering`).

    An async target (`loop.is_async`: a `FunctionLoop` around an `async def`, or an
    `AgentLoop` on an async adapter such as `OpenAIAdapter`) runs its samples as tasks on
    one event loop (see `MailboxWorker.handles_async`) instead of a thread each: the way
    to run hundreds of I/O-bound samples at once. Its per-sample timeout cancels the run.

    Args:
        loop: The agent under test (the production `AgentLoop`).
        evaluator: `(output, expected) -> Score`, or session-aware `(output, expected,
            session) -> Score`.
        requests: Mailbox of `EvalRequest`s (None: only `evaluate` can be used).
        config: Per-sample settings (timeouts, budgets, bundles, leases).
        dlq: Dead-letter policy for messages given up on.
        max_concurrent: Samples in flight at once.
        results: Where results go when a request has no `reply_to` (None: dropped with
            a warning).
        retry: Retry limit and backoff between deliveries.
        clock: Clock for latencies, deadlines and heartbeats.
        name: Name in logs and health reports.
        request_type: What dict bodies are decoded as (default `EvalRequest[Any, Any]`:
            inputs and expected values stay plain JSON values).
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
        request_type: Any = DEFAULT_REQUEST_TYPE,
    ) -> None:
        self.config = config or EvalLoopConfig()
        super().__init__(
            requests=requests, results=results, transient_errors=self.config.transient_errors,
            retry=retry, dlq=dlq, name=name, clock=clock, max_concurrent=max_concurrent,
            lease=self.config.lease_extender,
        )  # fmt: skip
        self.loop = loop
        self.evaluator = evaluator
        # Its kind (plain, session-aware, trajectory) read from the signature once here,
        # not per sample (inspect.signature was a quarter of the per-sample cost).
        self._scorer = prepare_scorer(evaluator, None)
        self._async_executor: AsyncFunctionExecutor | None = None
        if loop.is_async:
            self._async_executor = AsyncFunctionExecutor(
                loop, self._scorer, budget=self.config.budget
            )
        self.request_type = request_type
        """What dict bodies are decoded as."""
        self._eval_clock = clock
        self._prices = self.config.prices or default_prices()

    def handle(
        self, message: Message[EvalRequest[Any, Any], EvalResult], heartbeat: WorkerHeartbeat
    ) -> None:
        """Evaluate one request and reply with its result (see the class docstring)."""
        request = decode_request(message.body, self.request_type)
        target = reply_target(message, self.results)  # before the run: it may not resolve
        outcome = self._evaluate_in_time(request, heartbeat, message.delivery_count)
        self._reply(message, request, outcome, target)

    @property
    def handles_async(self) -> bool:
        """True when `loop.is_async` (its samples run as tasks on one event loop)."""
        return self._async_executor is not None

    async def handle_async(
        self, message: Message[EvalRequest[Any, Any], EvalResult], heartbeat: WorkerHeartbeat
    ) -> None:
        """`handle` for an async target: awaited on the worker's event loop."""
        request = decode_request(message.body, self.request_type)
        target = reply_target(message, self.results)
        outcome = await self.evaluate_async(request, delivery_count=message.delivery_count)
        self._reply(message, request, outcome, target)

    def _reply(
        self,
        message: Message[EvalRequest[Any, Any], EvalResult],
        request: EvalRequest[Any, Any],
        outcome: SampleOutcome,
        target: Mailbox[EvalResult, Any] | None,
    ) -> None:
        if outcome.failed_stage == "agent":  # a failure of the scoring is no transient one
            self.raise_if_transient(outcome.exception)
        self.send_answer(target, outcome.result, request.request_id, message=message)

    async def evaluate_async(
        self, request: EvalRequest[Any, Any], *, delivery_count: int = 1
    ) -> SampleOutcome:
        """`evaluate` for an async target (`loop.is_async`), on the running loop.

        Raises:
            ConfigurationError: `loop` is not async.
        """
        execute = self._async_executor
        if execute is None:
            raise ConfigurationError(
                f"{self.name}: evaluate_async needs an async loop (a FunctionLoop around an "
                f"async def, or an agent on an async adapter); loop {self.loop.name} is not "
                "one (call evaluate)"
            )
        config = self.config
        bundles = config.bundle_config()
        if bundles is None:
            return await execute(
                request, timeout=config.timeout,
                record_transcript=config.record_transcript, delivery_count=delivery_count,
                clock=self._eval_clock, inputs=config.inputs,
                prices=self._prices,
            )  # fmt: skip
        # The bundle is written when the block ends, on the loop's thread: a few ms per
        # sample, which bundles (a debugging aid) may cost.
        with self._recorder(bundles, request) as rec:
            rec.set_request(request)
            outcome = await execute(
                request, timeout=config.timeout,
                record_transcript=config.record_transcript, delivery_count=delivery_count,
                clock=self._eval_clock, on_prepared=rec.set_session_before if rec.enabled else None,
                inputs=config.inputs,
                prices=self._prices,
            )  # fmt: skip
            record_outcome(rec, outcome)
        return with_bundle(outcome, rec)

    def evaluate(
        self,
        request: EvalRequest[Any, Any],
        *,
        heartbeat: Callable[[], None] | None = None,
        delivery_count: int = 1,
    ) -> SampleOutcome:
        """Execute and score one request directly (no mailbox), writing its bundle."""
        config = self.config
        bundles = config.bundle_config()
        if bundles is None and type(self.loop) is FunctionLoop and not self.loop.is_async:
            # A plain FunctionLoop ignores heartbeats and budgets; without a bundle to
            # record, nothing may need its session either (execute_function decides).
            return execute_function(
                self.loop, self._scorer, request, timeout=config.timeout,
                record_transcript=config.record_transcript, delivery_count=delivery_count,
                clock=self._eval_clock, inputs=config.inputs,
                prices=self._prices,
            )  # fmt: skip
        if bundles is None:  # no recorder to set up per sample
            return execute_sample(
                self.loop, self._scorer, request, timeout=config.timeout, budget=config.budget,
                heartbeat=heartbeat, record_transcript=config.record_transcript,
                delivery_count=delivery_count, clock=self._eval_clock, inputs=config.inputs,
                prices=self._prices,
            )  # fmt: skip
        with self._recorder(bundles, request) as rec:
            rec.set_request(request)
            outcome = execute_sample(
                self.loop, self._scorer, request, timeout=config.timeout,
                budget=config.budget, heartbeat=heartbeat,
                record_transcript=config.record_transcript,
                delivery_count=delivery_count, clock=self._eval_clock,
                on_prepared=rec.set_session_before if rec.enabled else None, inputs=config.inputs,
                prices=self._prices,
            )  # fmt: skip
            record_outcome(rec, outcome)
        return with_bundle(outcome, rec)

    def _evaluate_in_time(
        self, request: EvalRequest[Any, Any], heartbeat: WorkerHeartbeat, delivery_count: int
    ) -> SampleOutcome:
        """`evaluate`, given up on after the per-sample timeout even when the agent hangs.

        The agent gets a `Deadline` it may honour; one that does not (a sync call that
        never returns) is left running in a thread that does not keep the worker
        process alive, and the request is answered with an error of kind `timeout`,
        so the slot and the message are free again.
        """
        timeout = self.config.timeout
        call = functools.partial(
            self.evaluate, request, heartbeat=heartbeat, delivery_count=delivery_count
        )
        if timeout is None:
            return call()
        start = self._eval_clock.monotonic()
        try:
            return call_abandonable(call, timeout)
        except TimeoutError:
            latency = (self._eval_clock.monotonic() - start) * 1000.0
            message = f"TimeoutError: the sample did not finish within its timeout of {timeout:g}s"
            _log.warning("%s: request %s: %s", self.name, request.request_id, message)
            result = error_result(request, message, "timeout", latency)
            return SampleOutcome(dataclasses.replace(result, delivery_count=delivery_count),
                                 None, None)  # fmt: skip

    def _recorder(self, bundles: DebugBundleConfig, request: EvalRequest[Any, Any]) -> BundleWriter:
        return bundle_recorder(
            bundles, request_id=str(request.request_id), kind="eval",
            clock=self._eval_clock, sample_id=request.sample.id,
            experiment=request.experiment.name, run_id=request.run_id,
        )  # fmt: skip

    def dead_letter_answer(
        self, message: Message[EvalRequest[Any, Any], EvalResult], letter: DeadLetter[Any]
    ) -> EvalResult | None:
        """The error result (kind `dead_letter`) that answers a request given up on.

        None when the body names no sample (it cannot be counted by any run).
        """
        return dead_letter_result(message, letter)
