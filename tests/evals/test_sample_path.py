"""The per-sample fast paths record exactly what the general path records.

`execute_function` (a sync function run without a session), `score_finished` (an awaited
async function's run) and `slim` (the report's copy of a stored result) exist to save
microseconds per sample; these tests pin that they change no field of any result.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from weakincentives import serde
from weakincentives.clock import FakeClock
from weakincentives.errors import InvalidScoreError
from weakincentives.evals import (
    BASELINE,
    EvalRequest,
    EvalResult,
    Fingerprint,
    Metric,
    RunStore,
    Sample,
    Score,
    ToolCallRecord,
    TurnUsage,
    exact_match,
    run_eval,
)
from weakincentives.evals.runner._sample import execute_function, execute_sample
from weakincentives.evals.runner._scheduler import slim
from weakincentives.runtime import FunctionLoop, PromptExecuted, Session
from weakincentives.runtime.session import ChatMessage, TokenUsage


def _slow(clock: FakeClock) -> Callable[[str], str]:
    def slow(question: str) -> str:
        clock.advance(0.5)  # past the 0.1 s timeout below
        return question

    return slow


def _raises(question: str) -> str:
    raise ValueError(f"no answer to {question}")


FUNCTIONS: dict[str, Callable[[FakeClock], Callable[[str], Any]]] = {
    "text": lambda clock: lambda q: "a" + q[1:],
    "wrong text": lambda clock: lambda q: "nope",
    "empty text": lambda clock: lambda q: "",
    "number": lambda clock: lambda q: 42,
    "mapping": lambda clock: lambda q: {"answer": q, "n": [1, 2]},
    "no output": lambda clock: lambda q: None,
    "raises": lambda clock: _raises,
    "past its deadline": _slow,
}


def _explodes(output: object, expected: object) -> Score:
    raise RuntimeError(f"cannot compare {output!r}")


def _not_a_score(output: object, expected: object) -> Score:
    return True  # type: ignore[return-value]  # the point: a sloppy evaluator


EVALUATORS: dict[str, Callable[..., Score]] = {
    "exact_match": exact_match,
    "raises": _explodes,
    "returns a bool": _not_a_score,
}


@pytest.mark.parametrize("record_transcript", [True, False])
@pytest.mark.parametrize("evaluator", EVALUATORS.values(), ids=EVALUATORS.keys())
@pytest.mark.parametrize("function", FUNCTIONS.values(), ids=FUNCTIONS.keys())
def test_execute_function_records_what_execute_sample_records(
    function: Callable[[FakeClock], Callable[[str], Any]],
    evaluator: Callable[..., Score],
    record_transcript: bool,
) -> None:
    sample = Sample(id="s1", input="q1", expected="a1", metadata={"topic": "x"})
    request = EvalRequest(sample, BASELINE, epoch=2, run_id="run-1")
    outcomes = []
    for execute in (execute_sample, execute_function):
        clock = FakeClock()
        loop: FunctionLoop[str, Any] = FunctionLoop(function(clock), name="fn", clock=clock)
        options: dict[str, Any] = {"timeout": 0.1, "record_transcript": record_transcript}
        outcome = execute(loop, evaluator, request, delivery_count=3, clock=clock, **options)
        outcomes.append(outcome)
    general, fast = outcomes
    assert fast.result == general.result
    assert serde.dumps(fast.result) == serde.dumps(general.result)
    # The general path made a session nothing reads: like the fast path, it names none.
    assert general.session is not None and fast.session is None
    assert general.result.session_id is None
    assert type(fast.exception) is type(general.exception)
    assert fast.failed_stage == general.failed_stage


def _aware(output: str, expected: str, session: Session) -> Score:
    return Score(value=float(len(session[PromptExecuted])), passed=output == expected)


def _with_session(question: str, session: Session) -> str:
    return f"{question} in {len(session[PromptExecuted])}"


@pytest.mark.parametrize(
    ("fn", "evaluator"),
    [(str.upper, _aware), (_with_session, exact_match)],
    ids=["session-aware evaluator", "function taking the session"],
)
def test_execute_function_makes_the_session_when_it_is_read(
    fn: Callable[..., str], evaluator: Callable[..., Score]
) -> None:
    request = EvalRequest(Sample(id="s1", input="q1", expected="Q1"), BASELINE, run_id="run-1")
    clock = FakeClock()
    loop: FunctionLoop[str, str] = FunctionLoop(fn, clock=clock)
    fast = execute_function(loop, evaluator, request, clock=clock)
    general = execute_sample(loop, evaluator, request, clock=clock)
    assert fast.session is not None and general.session is not None
    assert fast.session[PromptExecuted].latest() is not None
    assert fast.result.session_id == fast.session.session_id
    assert fast.result == dataclasses.replace(general.result, session_id=fast.session.session_id)


def _full_result(score: Score, *, error: str | None = None) -> EvalResult:
    """A result with no field at its default."""
    return EvalResult(
        sample_id="s1", experiment_name="exp", score=score, latency_ms=12, error=error,
        bundle_path=Path("bundles/s1"), error_kind="agent" if error else None, epoch=3,
        request_id="req-1", run_id="run-1", usage=TokenUsage(1, 2, 3),
        metadata={"topic": "x"}, output={"answer": 1},
        messages=(ChatMessage(role="assistant", content="hi"),),
        tool_calls=(ToolCallRecord("search", {"q": "x"}, "found", True),),
        delivery_count=2, environment={"state": 1}, session_id="session-1",
        turns=(TurnUsage(1, 2, 0.5),),
    )  # fmt: skip


SLIMMED = {"messages", "tool_calls", "output", "request_id", "session_id", "turns"}


@pytest.mark.parametrize(
    ("score", "error"),
    [
        (Score(value=0.0, passed=False, reason="wrong"), None),
        (Score(value=1.0, passed=True, reason="right", metrics=(Metric("m", 1.0),)), None),
        (Score(value=0.0, passed=False, reason="boom"), "ValueError: boom"),
    ],
    ids=["failed", "passed with metrics", "error"],
)
def test_slim_drops_the_transcript_and_keeps_every_other_field(
    score: Score, error: str | None
) -> None:
    full = _full_result(score, error=error)
    assert {f.name for f in dataclasses.fields(EvalResult)} - SLIMMED, "fields to check"
    slimmed = slim(full)
    for f in dataclasses.fields(EvalResult):
        expected = f.default if f.name in SLIMMED else getattr(full, f.name)
        assert getattr(slimmed, f.name) == expected, f.name


def test_slim_shares_a_passed_score_without_metrics_and_empty_values() -> None:
    a = dataclasses.replace(
        _full_result(Score(value=1.0, passed=True, reason="right")),
        usage=TokenUsage(), metadata={},
    )  # fmt: skip
    b = dataclasses.replace(a, sample_id="s2")
    assert slim(a).score == Score(value=1.0, passed=True)
    assert slim(a).score is slim(b).score
    assert slim(a).usage is slim(b).usage
    assert slim(a).metadata is slim(b).metadata


class _Usage(TokenUsage):
    pass


LINES = {
    "full": _full_result(Score(value=1.0, passed=True, reason="ok", metrics=(Metric("m", 1),))),
    "error": _full_result(Score(value=0.0, passed=False, reason="x"), error="ValueError: x"),
    "non-finite output": dataclasses.replace(
        _full_result(Score(value=1, passed=True)), output=[float("nan"), float("inf")]
    ),
    "a subclass where a dataclass is declared": dataclasses.replace(
        _full_result(Score(value=1.0, passed=True)), usage=_Usage(1, 2, 3)
    ),
    "a list where a tuple is declared": dataclasses.replace(
        _full_result(Score(value=1.0, passed=True)),
        messages=[ChatMessage(role="user", content="hi")],  # type: ignore[arg-type]
    ),
}


@pytest.mark.parametrize("result", LINES.values(), ids=LINES.keys())
def test_a_run_store_line_is_what_serde_dumps_writes(tmp_path: Path, result: EvalResult) -> None:
    run = RunStore(tmp_path).create(Fingerprint(dataset_sha256="0" * 64), run_id="run-1")
    run.append(result)
    run.finish()
    assert (run.path / "results.jsonl").read_bytes() == serde.dumps(result) + b"\n"


def test_a_run_store_line_keeps_the_transcript_of_a_function_target(tmp_path: Path) -> None:
    samples = [Sample(id=f"s{i}", input=f"q{i}", expected=f"a{i}") for i in range(3)]
    report = run_eval(samples, lambda q: "a" + q[1:], exact_match, store=tmp_path)
    assert report.pass_rate == 1.0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    stored = [
        serde.loads(EvalResult, line)
        for line in (run_dir / "results.jsonl").read_bytes().splitlines()
    ]
    assert sorted(r.output for r in stored) == ["a0", "a1", "a2"]
    assert all(r.messages == (ChatMessage(role="assistant", content=r.output),) for r in stored)
    assert all(r.request_id and r.usage == TokenUsage() for r in stored)


def test_a_session_aware_evaluator_of_a_function_target_still_gets_the_session() -> None:
    seen: list[tuple[PromptExecuted, ...]] = []

    def aware(output: str, expected: str, session: Session) -> Score:
        seen.append(session[PromptExecuted].all())
        return exact_match(output, expected)

    report = run_eval([Sample(id="s", input="q", expected="q")], lambda q: q, aware)
    assert report.pass_rate == 1.0
    (events,) = seen
    assert [e.output for e in events] == ["q"]


# -- ids and scores made per sample -----------------------------------------------------


def test_request_ids_are_unique_random_version_4_uuids() -> None:
    ids = [
        EvalRequest(Sample(id="s", input=1, expected=1), BASELINE).request_id for _ in range(600)
    ]
    assert len(set(ids)) == len(ids)
    assert all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)
    assert all(uuid.UUID(str(i)) == i for i in ids)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_other_request_ids_than_its_parent() -> None:
    def new_id() -> str:
        return str(EvalRequest(Sample(id="s", input=1, expected=1), BASELINE).request_id)

    new_id()  # the parent holds a batch of randomness
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child process
        os.write(write, new_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert child and child != new_id()


def test_session_ids_are_unique_random_version_4_uuids() -> None:
    # Made in batches of 256 (`weakincentives._ids`): more than two batches here.
    ids = [Session().session_id for _ in range(600)]
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(i).version == 4 and uuid.UUID(i).variant == uuid.RFC_4122 for i in ids)
    assert all(str(uuid.UUID(i)) == i for i in ids)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_other_session_ids_than_its_parent() -> None:
    assert Session().session_id  # the parent holds a batch of randomness
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child process
        os.write(write, Session().session_id.encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert child and child != Session().session_id


def test_a_session_id_is_made_once_even_when_threads_ask_at_once() -> None:
    session = Session()
    barrier = threading.Barrier(8)
    seen: list[str] = []

    def read() -> None:
        barrier.wait()
        seen.append(session.session_id)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 1
    assert session.snapshot().session_id == seen[0] == session.view().session_id


@pytest.mark.parametrize("value", [0, 1, 0.25, 1e300, -3.0])
def test_scores_take_finite_numbers(value: float) -> None:
    assert Score(value=value, passed=True).value == value


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (float("nan"), "must be finite"),
        (float("inf"), "must be finite"),
        (-float("inf"), "must be finite"),
        (True, "must be a number"),
        ("1", "must be a number"),
    ],
)
def test_scores_reject_values_that_are_not_finite_numbers(value: Any, match: str) -> None:
    with pytest.raises(InvalidScoreError, match=match):
        Score(value=value, passed=True)


def test_scores_reject_duplicate_metric_names() -> None:
    with pytest.raises(InvalidScoreError, match="duplicate metric names"):
        Score(metrics=(Metric("m", 1.0), Metric("n", 0.0), Metric("m", 0.5)))
