"""`execute_function` for an async `FunctionLoop`: await the function, then score.

`EvalLoop` runs the samples of an `async def` target as tasks on its event loop. The
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

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import DeadlineExceededError
from weakincentives.runtime.agent_loop import FunctionLoop
from weakincentives.runtime.limits import Deadline

from ._evaluator_core import is_inline_evaluator, is_session_aware
from ._execute import SampleOutcome, score_finished, score_output
from ._trajectory import is_trajectory_scorer
from ._types import EvalRequest, Score

if TYPE_CHECKING:
    from weakincentives.adapters import PromptResponse
    from weakincentives.runtime.session import Session

__all__ = ["execute_function_async"]

T = TypeVar("T")


async def execute_function_async(
    loop: FunctionLoop[Any, Any],
    evaluator: Callable[..., Score],
    request: EvalRequest[Any, Any],
    *,
    timeout: float | None = None,
    record_transcript: bool = True,
    delivery_count: int = 1,
    clock: Clock = SYSTEM_CLOCK,
    on_prepared: Callable[[Session], None] | None = None,
) -> SampleOutcome:
    """Await `loop`'s function on `request.sample`, then score it.

    Never raises for a failing function or evaluator (see `execute_sample`). Without
    a session reader (the function takes no `session`, the evaluator is plain, no
    `on_prepared`), no session is made, as in `execute_function`.
    """
    plain = (
        type(loop) is FunctionLoop
        and on_prepared is None
        and not loop.takes_session
        and not is_trajectory_scorer(evaluator)
        and not is_session_aware(evaluator)
    )
    sample = request.sample
    deadline = Deadline.after(timeout, clock=clock) if timeout else None
    start = clock.monotonic()
    run: tuple[PromptResponse[Any], Session] | Exception
    output: Any = None
    try:
        if plain:
            output = await _cancel_after(loop.fn(sample.input), timeout, loop.name)
        else:
            run = await _cancel_after(
                loop.aexecute(sample.input, experiment=request.experiment, on_prepared=on_prepared),
                timeout,
                loop.name,
            )
        if deadline is not None:  # as the sync path: a late answer on the run's clock
            deadline.check(f"function {loop.name}")
    except Exception as exc:
        run = exc
        plain = False
    latency = (clock.monotonic() - start) * 1000.0
    if plain:
        score: Callable[[], SampleOutcome] = functools.partial(
            score_output, output, evaluator, request, latency_ms=latency,
            record_transcript=record_transcript, delivery_count=delivery_count,
        )  # fmt: skip
    else:
        score = functools.partial(
            score_finished, run, evaluator, request, latency_ms=latency,
            record_transcript=record_transcript, delivery_count=delivery_count,
        )  # fmt: skip
    if is_inline_evaluator(evaluator) and not is_session_aware(evaluator):
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
