"""`execute_sample` for async targets: await the agent, then score.

`EvalLoop` runs the samples of an async target (a `FunctionLoop` around an `async def`,
or an `AgentLoop` whose adapter is async: `loop.is_async`) as tasks on its event loop. The
result is the one the sync path gives for the same outputs (same `score_output` and
`score_finished`), with one difference that only the async path can offer: a per-sample
timeout cancels the function when it runs out, instead of waiting for it to return.

Scoring runs on the event loop when the evaluator is inline (built-ins and functions
marked `@inline_evaluator`: quick and non-blocking); anything else (a judge calling a
model, a user function that may block) runs in a worker thread, as in the local runner.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from weakincentives.adapters.pricing import PriceTable
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import DeadlineExceededError
from weakincentives.runtime.agent_loop import AgentLoop, FunctionLoop
from weakincentives.runtime.limits import Budget, Deadline

from .._records import EvalRequest, RecordInputs, Score
from ..scoring import is_inline_evaluator, is_session_aware, is_trajectory_scorer
from ._sample import SAMPLE_FAILURES, SampleOutcome, score_finished, score_output

if TYPE_CHECKING:
    from weakincentives.adapters import PromptResponse
    from weakincentives.runtime.session import Session

__all__ = ["AsyncFunctionExecutor", "scores_on_loop"]

T = TypeVar("T")


def scores_on_loop(scorer: Callable[..., Score]) -> bool:
    """Whether `scorer` may score on the event loop: marked inline, and reading no session.

    Session-aware and trajectory scorers read the session (and through it a sample's
    environment), which may block; they, and anything not marked inline, get a thread.
    """
    return (
        is_inline_evaluator(scorer)
        and not is_trajectory_scorer(scorer)
        and not is_session_aware(scorer)
    )


class AsyncFunctionExecutor:
    """Awaits an async target on a sample (`loop.aexecute`), then scores it.

    What the evaluator needs (a session? a thread?) is read once here, not per sample.

    Args:
        loop: An `AgentLoop` whose `is_async` is True: a `FunctionLoop` around an
            `async def`, or an agent on an async adapter (`OpenAIAdapter`, ...).
        evaluator: The scorer (see `prepare_scorer`).
        budget: Token budget per sample (for agents on an adapter).
    """

    def __init__(
        self,
        loop: AgentLoop[Any, Any],
        evaluator: Callable[..., Score],
        *,
        budget: Budget | None = None,
    ) -> None:
        self.loop = loop
        self.evaluator = evaluator
        self.budget = budget
        reads_session = is_trajectory_scorer(evaluator) or is_session_aware(evaluator)
        # Without a session reader no session is made, as in `execute_function`.
        self._plain = (
            isinstance(loop, FunctionLoop)
            and type(loop) is FunctionLoop
            and not loop.takes_session
            and not reads_session
        )
        self._fn: Callable[..., Any] = loop.fn if isinstance(loop, FunctionLoop) else loop.aexecute
        self._inline = scores_on_loop(evaluator)

    async def __call__(
        self,
        request: EvalRequest[Any, Any],
        *,
        timeout: float | None = None,
        record_transcript: bool = True,
        delivery_count: int = 1,
        clock: Clock = SYSTEM_CLOCK,
        on_prepared: Callable[[Session], None] | None = None,
        inputs: RecordInputs | None = None,
        prices: PriceTable | None = None,
    ) -> SampleOutcome:
        """Run and score `request.sample` (never raises: failures are results)."""
        loop, evaluator = self.loop, self.evaluator
        plain = self._plain and on_prepared is None
        deadline = Deadline.after(timeout, clock=clock) if timeout else None
        start = clock.monotonic()
        run: tuple[PromptResponse[Any], Session] | BaseException
        output: Any = None
        prepared: list[Session] = []  # the run's session, kept for a failure's evidence

        def keep(session: Session) -> None:
            prepared.append(session)
            if on_prepared is not None:
                on_prepared(session)

        try:
            if plain and timeout is None:  # the common case, without a wrapping coroutine
                output = await self._fn(request.sample.input)
            elif plain:
                output = await _cancel_after(self._fn(request.sample.input), timeout, loop.name)
            else:
                run = await _cancel_after(
                    loop.aexecute(
                        request.sample.input,
                        experiment=request.experiment,
                        deadline=deadline,
                        budget=self.budget,
                        on_prepared=keep,
                    ),
                    timeout,
                    loop.name,
                )  # fmt: skip
            if deadline is not None:  # as the sync path: a late answer on the run's clock
                deadline.check(f"function {loop.name}")
        except SAMPLE_FAILURES as exc:
            run = exc
            plain = False
        latency = (clock.monotonic() - start) * 1000.0
        if plain and self._inline:
            return score_output(
                output, evaluator, request, latency_ms=latency,
                record_transcript=record_transcript, delivery_count=delivery_count,
                inputs=inputs,
                prices=prices,
            )  # fmt: skip
        if plain:
            score: Callable[[], SampleOutcome] = functools.partial(
                score_output, output, evaluator, request, latency_ms=latency,
                record_transcript=record_transcript, delivery_count=delivery_count,
                inputs=inputs,
                prices=prices,
            )  # fmt: skip
        else:
            score = functools.partial(
                score_finished, run, evaluator, request, latency_ms=latency,
                record_transcript=record_transcript, delivery_count=delivery_count,
                inputs=inputs, failed_session=prepared[0] if prepared else None,
                prices=prices, session_read=not self._plain or on_prepared is not None,
            )  # fmt: skip
        if self._inline:
            return score()
        return await asyncio.to_thread(score)


async def _cancel_after(work: Awaitable[T], seconds: float | None, name: str) -> T:
    """Await `work`, cancelled after `seconds` (None: never) with `DeadlineExceededError`."""
    if seconds is None:
        return await work
    timeout = asyncio.timeout(seconds)
    try:
        async with timeout:
            return await work
    except TimeoutError as exc:
        if not timeout.expired():
            raise  # the function's own TimeoutError (or deadline), not ours
        raise DeadlineExceededError(
            f"function {name}: cancelled after its timeout of {seconds:g}s"
        ) from exc
