"""Inline evaluators: the markers, their propagation, and scoring on the event loop.

An evaluator marked `inline_evaluator` (every built-in output evaluator is) never blocks,
so the local runner scores an `async def` target's output with it on the event loop; every
other evaluator is scored in a worker thread. Results are the same either way.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.clock import FakeClock
from weakincentives.evals import (
    EvalResult,
    JudgeOutput,
    Sample,
    Score,
    Trajectory,
    adapt,
    all_of,
    any_of,
    contains,
    contains_ci,
    evaluate,
    exact_match,
    inline_evaluator,
    is_inline_evaluator,
    is_session_aware,
    json_equal,
    llm_judge,
    not_,
    numeric_close,
    pairwise_judge,
    regex_match,
    regex_search,
    run_eval,
    session_aware,
    threshold,
    tool_called,
)
from weakincentives.evals.runner._setup import prepare_scorer
from weakincentives.evals.scoring._protocols import INLINE_ATTR
from weakincentives.runtime.session import Session, SessionView

BACKENDS = ["asyncio", "trio"]


def _model(request: ModelRequest) -> FunctionReply:
    return FunctionReply(output=JudgeOutput("looks right", "good"))


JUDGE = llm_judge(FunctionAdapter(_model), "is helpful")


def user_check(output: object, expected: object) -> Score:
    """An unmarked user evaluator: may block, so it is not inline."""
    return exact_match(output, expected)


@inline_evaluator
def user_inline(output: object, expected: object) -> Score:
    return exact_match(output, expected)


# -- markers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "evaluator",
    [
        exact_match,
        contains,
        contains_ci,
        json_equal,
        regex_match("[0-9]+"),
        regex_match(),
        regex_search("x"),
        regex_search(),
        numeric_close(),
        numeric_close(rel_tol=0.1, abs_tol=1.0),
        functools.partial(contains, case_sensitive=False),
        functools.partial(functools.partial(json_equal, ignore_extra_keys=True)),
        user_inline,
    ],
    ids=lambda e: getattr(e, "__name__", type(e).__name__),
)
def test_builtin_output_evaluators_are_inline(evaluator: Callable[..., Score]) -> None:
    assert is_inline_evaluator(evaluator)


@pytest.mark.parametrize(
    "evaluator",
    [
        JUDGE,
        pairwise_judge(FunctionAdapter(_model), "is clearer"),
        user_check,
        lambda output, expected: exact_match(output, expected),
        functools.partial(user_check),
        tool_called("search"),
    ],
    ids=["llm_judge", "pairwise_judge", "user", "lambda", "partial", "tool_called"],
)
def test_judges_user_functions_and_session_checks_are_not_inline(
    evaluator: Callable[..., Any],
) -> None:
    assert not is_inline_evaluator(evaluator)


@pytest.mark.parametrize(
    ("evaluator", "inline"),
    [
        (all_of(exact_match, contains), True),
        (any_of(regex_search("4"), numeric_close()), True),
        (not_(contains), True),
        (threshold(json_equal, 0.5), True),
        (all_of(not_(exact_match), threshold(any_of(contains, user_inline), 1.0)), True),
        (all_of(exact_match, adapt(contains)), True),
        (all_of(exact_match, user_check), False),
        (any_of(user_check, contains), False),
        (not_(user_check), False),
        (threshold(JUDGE, 0.5), False),
        (all_of(exact_match, JUDGE), False),
        (any_of(contains, threshold(JUDGE, 0.5)), False),
        (all_of(exact_match, tool_called("search")), False),
        (not_(all_of(exact_match, JUDGE)), False),
    ],
)
def test_combinators_are_inline_only_when_every_child_is(
    evaluator: Callable[..., Any], inline: bool
) -> None:
    assert is_inline_evaluator(evaluator) is inline


def test_adapt_keeps_the_marker() -> None:
    assert is_inline_evaluator(adapt(exact_match))
    assert not is_inline_evaluator(adapt(user_check))


def test_the_decorator_marks_the_function_itself() -> None:
    def check(output: str, expected: str) -> Score:
        return exact_match(output, expected)

    assert not is_inline_evaluator(check)
    assert inline_evaluator(check) is check
    assert is_inline_evaluator(check) and not is_session_aware(check)


def test_the_decorator_keeps_session_awareness() -> None:
    @inline_evaluator
    @session_aware
    def aware(output: str, expected: str, session: Any) -> Score:
        return exact_match(output, expected)

    assert is_inline_evaluator(aware) and is_session_aware(aware)


class _Checker:
    def check(self, output: str, expected: str, session: SessionView) -> Score:
        return exact_match(output, expected)


def test_the_decorator_wraps_what_takes_no_attributes() -> None:
    bound = _Checker().check

    marked = inline_evaluator(bound)

    assert marked is not bound and is_inline_evaluator(marked)
    assert not is_inline_evaluator(_Checker().check)
    assert is_session_aware(marked)  # the signature is still read through the wrapper
    assert marked("a", "a", Session().view()).passed


@inline_evaluator  # frozen instances take no attributes; the class does
@dataclass(frozen=True)
class _Prefix:
    prefix: str

    def __call__(self, output: str, expected: str) -> Score:
        ok = output.startswith(self.prefix)
        return Score(value=float(ok), passed=ok)


def test_the_decorator_marks_a_class_of_callables() -> None:
    assert is_inline_evaluator(_Prefix("a"))
    assert is_inline_evaluator(all_of(_Prefix("a"), exact_match))


# -- prepare_scorer ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("evaluator", "judge_concurrency", "inline"),
    [
        (exact_match, None, True),
        (all_of(exact_match, regex_search("a")), None, True),
        (user_check, None, False),
        (all_of(exact_match, JUDGE), None, False),
        # A judge gate is a threading semaphore: waiting for it would block the loop.
        (exact_match, 4, False),
        (all_of(exact_match, JUDGE), 4, False),
    ],
)
def test_prepare_scorer_keeps_the_marker_unless_gated(
    evaluator: Callable[..., Score], judge_concurrency: int | None, inline: bool
) -> None:
    scorer = prepare_scorer(evaluator, judge_concurrency)

    assert is_inline_evaluator(scorer) is inline
    assert getattr(scorer, INLINE_ATTR) is inline


# -- where scoring runs -----------------------------------------------------------------


def samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"Q{i}") for i in range(n)]


class ThreadLog:
    """Records the thread the agent ran in and the threads the evaluator ran in."""

    def __init__(self) -> None:
        self.agent: set[int] = set()
        self.evaluator: set[int] = set()

    async def agent_fn(self, question: str) -> str:
        await anyio.sleep(0)
        self.agent.add(threading.get_ident())
        return question.upper()

    def evaluator_fn(self, output: object, expected: object) -> Score:
        self.evaluator.add(threading.get_ident())
        return exact_match(output, expected)


def _run(backend: str, target: Any, evaluator: Any, **kwargs: Any) -> list[EvalResult]:
    run = functools.partial(evaluate, samples(6), target, evaluator, **kwargs)
    report = anyio.run(run, backend=backend)
    return sorted(report.results, key=lambda r: r.sample_id)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_inline_evaluator_runs_on_the_event_loop_thread(backend: str) -> None:
    log = ThreadLog()

    results = _run(backend, log.agent_fn, all_of(inline_evaluator(log.evaluator_fn), contains))

    assert all(r.passed for r in results)
    assert log.evaluator == log.agent == {threading.get_ident()}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "wrap",
    [
        lambda ev: ev,
        lambda ev: all_of(inline_evaluator(ev), JUDGE, exact_match),
        lambda ev: inline_evaluator(session_aware(lambda o, e, s: ev(o, e))),
    ],
    ids=["unmarked", "judge-combinator", "session-aware"],
)
def test_other_evaluators_run_in_a_worker_thread(
    backend: str, wrap: Callable[[Callable[..., Score]], Callable[..., Score]]
) -> None:
    log = ThreadLog()
    results = _run(backend, log.agent_fn, wrap(log.evaluator_fn))

    assert all(r.passed for r in results)
    assert log.evaluator and threading.get_ident() not in log.evaluator
    assert log.agent == {threading.get_ident()}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_trajectory_scorer_marked_inline_runs_in_a_worker_thread(backend: str) -> None:
    log = ThreadLog()

    @inline_evaluator
    def scorer(trajectory: Trajectory, sample: Sample[str, str]) -> Score:
        return log.evaluator_fn(trajectory.output, sample.expected)

    results = _run(backend, log.agent_fn, scorer)

    assert all(r.passed for r in results)
    assert log.evaluator and threading.get_ident() not in log.evaluator


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_judge_gated_inline_evaluator_runs_in_a_worker_thread(backend: str) -> None:
    log = ThreadLog()

    _run(backend, log.agent_fn, inline_evaluator(log.evaluator_fn), judge_concurrency=2)

    assert log.evaluator and threading.get_ident() not in log.evaluator


class _Env:
    async def serialize(self) -> dict[str, Any]:
        return {"env_kind": "test", "version": "1"}

    @staticmethod
    async def deserialize(data: dict[str, Any]) -> _Env:
        return _Env()


@pytest.mark.parametrize("backend", BACKENDS)
def test_with_an_environment_scoring_stays_in_a_worker_thread(backend: str) -> None:
    log = ThreadLog()

    results = _run(
        backend, log.agent_fn, inline_evaluator(log.evaluator_fn),
        environment_factory=lambda sample: _Env(),
    )  # fmt: skip

    assert all(r.passed for r in results)
    assert log.evaluator and threading.get_ident() not in log.evaluator


# -- same results either way ----------------------------------------------------------


def _comparable(result: EvalResult) -> dict[str, Any]:
    """Every field but the request and session ids (fresh per request; a session's presence)."""
    record = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    del record["request_id"]
    record["session_id"] = record["session_id"] is not None
    return record


def _mixed_agent(clock: FakeClock) -> Callable[[str], Any]:
    async def agent(question: str) -> Any:
        await anyio.sleep(0)
        clock.advance(0.125)
        if question == "q1":
            raise RuntimeError("agent broke")
        if question == "q2":
            return None
        if question == "q3":
            return "wrong"
        return question.upper()

    return agent


def _mixed_evaluator(*, inline: bool) -> Callable[..., Any]:
    def mixed(output: object, expected: object) -> Any:
        if output == "Q4":
            raise KeyError("evaluator broke")
        if output == "Q5":
            return "not a score"
        return exact_match(output, expected)

    return inline_evaluator(mixed) if inline else mixed


@pytest.mark.parametrize("backend", BACKENDS)
def test_results_are_the_same_inline_or_in_a_thread(backend: str) -> None:
    runs = []
    for evaluator in (_mixed_evaluator(inline=False), _mixed_evaluator(inline=True)):
        clock = FakeClock()
        runs.append(_run(backend, _mixed_agent(clock), evaluator, clock=clock, max_concurrent=1))
    threaded, inline = runs

    assert [_comparable(r) for r in inline] == [_comparable(r) for r in threaded]
    kinds = [r.error_kind for r in inline]
    assert kinds == [None, "agent", "no_output", None, "evaluator", "evaluator"]
    assert [r.passed for r in inline] == [True, False, False, False, False, False]
    assert "evaluator broke" in (inline[4].error or "")
    assert "not a Score" in (inline[5].error or "")
    assert {r.latency_ms for r in inline} == {125.0}


# -- the event loop keeps turning -----------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_that_never_awaits_can_still_be_cancelled(backend: str) -> None:
    """Inline scoring keeps the checkpoint the thread hop was, so a cancel gets through."""
    scored: list[str] = []

    async def instant(question: str) -> str:
        return question.upper()  # never awaits

    async def main() -> None:
        with anyio.CancelScope() as scope:

            @inline_evaluator
            def cancel_after_three(output: str, expected: str) -> Score:
                scored.append(output)
                if len(scored) == 3:
                    scope.cancel()
                return exact_match(output, expected)

            await evaluate(samples(50), instant, cancel_after_three, max_concurrent=1)

    anyio.run(main, backend=backend)

    assert len(scored) == 3


def test_sync_targets_are_unaffected() -> None:
    log = ThreadLog()

    def agent(question: str) -> str:
        log.agent.add(threading.get_ident())
        return question.upper()

    report = run_eval(samples(4), agent, inline_evaluator(log.evaluator_fn))

    assert report.pass_rate == 1.0
    assert threading.get_ident() not in log.agent
