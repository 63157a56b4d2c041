"""The kind of an evaluator (plain, session-aware, trajectory scorer) is read from its
signature once per callable, then remembered: asked per sample, `inspect.signature` cost
more than the scoring. The remembered answers must be the right ones for every callable."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pytest

from weakincentives.evals import Sample, Score, Trajectory, is_session_aware, is_trajectory_scorer
from weakincentives.runtime import SessionView


def plain(output: str, expected: str) -> Score:
    return Score(value=1.0, passed=output == expected)


def aware(output: str, expected: str, session: SessionView) -> Score:
    return plain(output, expected)


def by_trajectory(trajectory: Trajectory, sample: Sample[Any, Any]) -> Score:
    return Score(value=1.0, passed=True)


class Methods:
    def plain(self, output: str, expected: str) -> Score:
        return plain(output, expected)

    def aware(self, output: str, expected: str, session: SessionView) -> Score:
        return plain(output, expected)


@dataclass(eq=True)  # eq without frozen: unhashable, so never remembered
class Unhashable:
    threshold: float = 0.5

    def __call__(self, trajectory: Trajectory, sample: Sample[Any, Any]) -> Score:
        return Score(value=1.0, passed=True)


@pytest.mark.parametrize("repeat", range(3))
def test_answers_stay_right_when_asked_again(repeat: int) -> None:
    methods = Methods()
    cases: list[tuple[Any, bool, bool]] = [
        (plain, False, False),
        (aware, True, False),
        (by_trajectory, False, True),
        (methods.plain, False, False),  # a new bound method each time
        (methods.aware, True, False),
        (functools.partial(aware), True, False),
        (Unhashable(), False, True),
        (lambda output, expected: plain(output, expected), False, False),
    ]
    for fn, session, trajectory in cases:
        assert is_session_aware(fn) is session, fn
        assert is_trajectory_scorer(fn) is trajectory, fn


def test_a_marker_set_later_still_wins() -> None:
    def later(output: str, expected: str) -> Score:
        return plain(output, expected)

    assert is_session_aware(later) is False
    later.__wink_session_aware__ = True  # type: ignore[attr-defined]  # what `session_aware` sets
    assert is_session_aware(later) is True
