"""Trajectories and RL-style scorers: `(trajectory, sample) -> Score`.

Besides evaluators (`(output, expected) -> Score`, optionally with the session), the
runners accept *trajectory scorers* in the shape of `spec/evaluation-abstractions.md`:
`score_fn(trajectory, sample) -> Score`. A `Trajectory` is built from the finished run:
its transcript, tool calls, output, token usage and session. `Score.reward` (the weighted
mean of the metrics with weight > 0) is the signal an RL loop consumes.

A scorer is recognized, in order, by the `trajectory_scorer` marker, or by the annotation
of its first positional parameter being `Trajectory` (string annotations included).

Examples:
    >>> from weakincentives.evals import Metric, Sample, Score
    >>> @trajectory_scorer
    ... def score_fn(trajectory, sample):
    ...     correct = trajectory.output == sample.expected
    ...     return Score(metrics=(
    ...         Metric("correct", float(correct), weight=1.0),
    ...         Metric("turns", float(len(trajectory.messages))),
    ...     ))
    >>> traj = Trajectory(output="4")
    >>> score_fn(traj, Sample(id="a", input="2+2", expected="4")).reward
    1.0
"""

from __future__ import annotations

import inspect
import re
import weakref
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from typing_extensions import TypeVar as DefaultTypeVar

from .._records import Sample, Score, Trajectory
from ._protocols import remember_kind

__all__ = [
    "TRAJECTORY_SCORER_ATTR",
    "Trajectory",
    "TrajectoryScorer",
    "is_trajectory_scorer",
    "trajectory_scorer",
]

CallableT = TypeVar("CallableT", bound=Callable[..., Any])

TRAJECTORY_SCORER_ATTR = "__wink_trajectory_scorer__"
"""Attribute that, when present on a scorer, decides whether it takes `(trajectory, sample)`."""

_WORD = re.compile(r"\bTrajectory\b")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


SampleInputT = DefaultTypeVar("SampleInputT", default=Any)
SampleExpectedT = DefaultTypeVar("SampleExpectedT", default=Any)


class TrajectoryScorer(Protocol[SampleInputT, SampleExpectedT]):
    """A scorer of whole runs: `(trajectory, sample) -> Score`.

    Optionally parametrized by the sample's types (`TrajectoryScorer[dict, str]`); a bare
    `TrajectoryScorer` scores samples of any type.
    """

    def __call__(
        self, trajectory: Trajectory, sample: Sample[SampleInputT, SampleExpectedT], /
    ) -> Score:
        """Score the run of `sample`."""
        ...


def trajectory_scorer(fn: CallableT) -> CallableT:
    """Mark `fn` as a trajectory scorer `(trajectory, sample) -> Score` (decorator).

    Needed only when the first parameter is not annotated as `Trajectory`. Callables that
    do not take attributes (bound methods) are wrapped.
    """
    try:
        setattr(fn, TRAJECTORY_SCORER_ATTR, True)
    except (AttributeError, TypeError):
        inner = fn

        def wrapper(trajectory: Trajectory, sample: Sample[Any, Any]) -> Score:
            return inner(trajectory, sample)  # type: ignore[no-any-return]  # inner is Any-typed

        wrapper.__name__ = getattr(inner, "__name__", type(inner).__name__)
        wrapper.__qualname__ = getattr(inner, "__qualname__", wrapper.__name__)
        setattr(wrapper, TRAJECTORY_SCORER_ATTR, True)
        return wrapper  # type: ignore[return-value]  # same call shape as fn
    return fn


def is_trajectory_scorer(fn: Callable[..., Any]) -> bool:
    """Whether `fn` takes `(trajectory, sample)` rather than `(output, expected[, session])`.

    Decided by the `__wink_trajectory_scorer__` attribute when present (set by
    `trajectory_scorer`), else by the first positional parameter's annotation naming
    `Trajectory`.
    """
    marker = getattr(fn, TRAJECTORY_SCORER_ATTR, None)
    if isinstance(marker, bool):
        return marker
    return remember_kind(_BY_SIGNATURE, fn, _takes_trajectory)  # asked per sample


_BY_SIGNATURE: weakref.WeakKeyDictionary[Any, tuple[object, bool]] = weakref.WeakKeyDictionary()


def _takes_trajectory(fn: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    positional = [p for p in signature.parameters.values() if p.kind in _POSITIONAL]
    if not positional:
        return False
    annotation = positional[0].annotation
    if annotation is Trajectory:
        return True
    if isinstance(annotation, str):
        # `from __future__ import annotations` leaves the name as text; "Trajectory" or
        # "evals.Trajectory" both mean this class here.
        return bool(_WORD.search(annotation))
    return False
