"""What a run prepares once, before its first sample: the scorer, and its overrides check."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from weakincentives.errors import ConfigurationError
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.runtime.agent_loop import AgentLoop, FunctionLoop

from .._records import Score
from ..scoring import (
    INLINE_ATTR,
    SESSION_AWARE_ATTR,
    TRAJECTORY_SCORER_ATTR,
    evaluator_name,
    is_inline_evaluator,
    is_session_aware,
    is_trajectory_scorer,
)
from ..store import qualified_name

__all__ = ["check_overrides_tags", "prepare_scorer"]


def prepare_scorer(
    evaluator: Callable[..., Score], judge_concurrency: int | None
) -> Callable[..., Score]:
    """Wrap `evaluator` once: its kind decided up front, calls limited to `judge_concurrency`.

    Deciding the kind (plain, session-aware, trajectory) reads the signature; doing it once
    here keeps it off the per-sample path. Evaluators run in worker threads, so a
    `threading.BoundedSemaphore` bounds concurrent judge calls. The scorer is inline
    (`inline_evaluator`: may run on the event loop) when `evaluator` is and no semaphore
    is involved: waiting for one would block the event loop.
    """
    if not callable(evaluator):
        raise ConfigurationError(
            f"evaluator must be callable, got {type(evaluator).__name__}; pass a function "
            "(output, expected) -> Score or a trajectory scorer (trajectory, sample) -> Score"
        )
    by_trajectory = is_trajectory_scorer(evaluator)
    aware = not by_trajectory and is_session_aware(evaluator)
    if judge_concurrency is None:

        def scorer(*args: Any) -> Score:
            return evaluator(*args)

    else:
        gate = threading.BoundedSemaphore(judge_concurrency)

        def scorer(*args: Any) -> Score:
            with gate:
                return evaluator(*args)

    scorer.__name__ = scorer.__qualname__ = evaluator_name(evaluator)
    setattr(scorer, SESSION_AWARE_ATTR, aware)
    setattr(scorer, TRAJECTORY_SCORER_ATTR, by_trajectory)
    setattr(scorer, INLINE_ATTR, judge_concurrency is None and is_inline_evaluator(evaluator))
    return scorer


def check_overrides_tags(target: object, experiments: Iterable[Experiment]) -> None:
    """Refuse experiments whose `overrides_tag` no override of the target's store has.

    Applies to an `AgentLoop` (not a task function, which applies no prompt overrides)
    whose overrides store can list its tags (`LocalPromptOverridesStore` can). The
    default tag `latest` needs no file: without one the prompts run as written.

    Raises:
        ConfigurationError: naming the experiment, its tag and the tags that exist.
    """
    if not isinstance(target, AgentLoop) or isinstance(target, FunctionLoop):
        return
    store = target.overrides_store
    tags = getattr(store, "tags", None)
    for experiment in experiments:
        tag = experiment.overrides_tag
        if tag == BASELINE.overrides_tag:
            continue
        if store is None:
            raise ConfigurationError(
                f"experiment {experiment.name!r} asks for prompt overrides tag {tag!r}, but "
                f"{qualified_name(target)} has no overrides store; pass overrides_store= "
                "to the loop"
            )
        if callable(tags):
            known = sorted(tags())
            if tag not in known:
                raise ConfigurationError(
                    f"experiment {experiment.name!r} asks for prompt overrides tag {tag!r}, "
                    f"which no override has; tags that exist: {', '.join(known) or 'none'}"
                )
