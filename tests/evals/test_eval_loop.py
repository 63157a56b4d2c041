"""EvalLoop: a mailbox worker over real AgentLoops (FunctionAdapter models with tools).

Every outcome becomes a result (never lost), results are routed to reply_to or to
`results`, concurrency is bounded, transient failures are retried through the retry and
dead-letter policies, debug bundles are written per sample, and a stopped loop can be
restarted without the report counting any sample twice.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.evals.bundles import open_checked_bundles
from tests.helpers import CalcParams, calculate, calculator_model
from tests.runtime.workers import run_in_thread, wait_for
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.clock import SYSTEM_CLOCK, Clock, FakeClock
from weakincentives.debug import DebugBundle
from weakincentives.errors import (
    AdapterConnectionError,
    AdapterTimeoutError,
    ConfigurationError,
    RateLimitError,
)
from weakincentives.evals import (
    BASELINE,
    Dataset,
    EvalLoop,
    EvalLoopConfig,
    EvalRequest,
    EvalResult,
    Experiment,
    Sample,
    Score,
    adapt,
    all_of,
    collect_results,
    exact_match,
    llm_judge,
    submit_dataset,
    tool_called,
)
from weakincentives.prompt import (
    MarkdownSection,
    Prompt,
    PromptTemplate,
    Tool,
    ToolContext,
    ToolResult,
)
from weakincentives.runtime import (
    AgentLoop,
    Budget,
    DeadLetter,
    DLQPolicy,
    InMemoryMailbox,
    RetryPolicy,
    Session,
    SessionView,
    TokenUsage,
    ToolInvoked,
)
from weakincentives.runtime.mailbox import FakeMailbox, RegistryResolver
from weakincentives.runtime.session import PromptFailed

TOOL_LOG = logging.getLogger("tests.evals.calculator")


def logging_calculate(params: CalcParams, context: ToolContext) -> ToolResult:
    """The calculator, logging what it computes (debug bundles capture it)."""
    TOOL_LOG.info("computing %g %s %g", params.a, params.op, params.b)
    return calculate(params, context)


@dataclass(frozen=True, slots=True)
class Question:
    text: str


TEMPLATE = PromptTemplate[str](
    ns="tests",
    key="eval-loop",
    sections=(
        MarkdownSection("Rules", "rules", "Use the calculate tool for arithmetic."),
        MarkdownSection("Question", "question", "$text", Question, role="user"),
    ),
    tools=(Tool("calculate", "Compute `a op b`.", CalcParams, logging_calculate),),
)

Hook = Callable[[ModelRequest], "FunctionReply | str | None"]


class Model:
    """`calculator_model` with an optional hook; counts runs per question (thread-safe).

    A hook returning None lets the calculator answer.
    """

    def __init__(self, hook: Hook | None = None) -> None:
        self.hook = hook
        self.runs: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, request: ModelRequest) -> FunctionReply | str:
        if request.turn == 0:
            with self._lock:
                self.runs[question(request)] += 1
        if self.hook is not None:
            reply = self.hook(request)
            if reply is not None:
                return reply
        return calculator_model(request)


def question(request: ModelRequest) -> str:
    return request.last_user_text().rsplit("\n", 1)[-1]


class CalcLoop(AgentLoop[str, str]):
    def create_prompt(self, request: str) -> Prompt[str]:
        return Prompt(TEMPLATE).bind(Question(request))


def agent(model: Model, clock: Clock = SYSTEM_CLOCK) -> CalcLoop:
    return CalcLoop(adapter=FunctionAdapter(model, clock=clock), clock=clock)


def arithmetic(n: int) -> Dataset[str, str]:
    return Dataset(
        samples=tuple(Sample(id=f"s{i}", input=f"{i} + {i}", expected=f"{2 * i}") for i in range(n))
    )


def mailboxes(clock: Clock = SYSTEM_CLOCK) -> tuple[InMemoryMailbox[Any, Any], ...]:
    return tuple(InMemoryMailbox(name, clock=clock) for name in ("eval-requests", "eval-results"))


def eval_loop(requests: Any, model: Model | None = None, **options: Any) -> EvalLoop:
    """An EvalLoop over the calculator agent, scoring with `exact_match` unless told."""
    options.setdefault("evaluator", exact_match)
    return EvalLoop(loop=agent(model or Model()), requests=requests, **options)


def drain(loop: EvalLoop) -> None:
    loop.run(until_drained=True, wait_time_seconds=0)


def by_sample(results: Sequence[EvalResult]) -> dict[str, EvalResult]:
    return {r.sample_id: r for r in results}


NO_WAIT = RetryPolicy(max_attempts=10, base_delay=0.0, jitter=0.0)


# -- every outcome is a result --------------------------------------------------------


def test_every_outcome_is_recorded_with_its_kind() -> None:
    clock = FakeClock()

    def hook(request: ModelRequest) -> FunctionReply | str | None:
        text = question(request)
        if text.startswith("explode"):
            raise RuntimeError("model exploded")
        if text.startswith("silent"):
            return FunctionReply()
        if text.startswith("slow") and request.turn == 0:
            clock.advance(60.0)
        if text.startswith("verbose"):
            return FunctionReply(text="2", usage=TokenUsage(input_tokens=9_000, output_tokens=1))
        return None

    judge = llm_judge(FunctionAdapter(lambda request: "not json at all"), "is correct")

    def evaluator(output: str, expected: str) -> Score:
        if expected == "evaluator":
            raise ValueError("evaluator exploded")
        if expected == "judge":
            return judge(output, expected)
        return exact_match(output, expected)

    cases = {
        "pass": ("2 + 2", "4", None),
        "fail": ("3 * 3", "8", None),
        "agent": ("explode 1 + 1", "2", "agent"),
        "no_output": ("silent 1 + 1", "2", "no_output"),
        "evaluator": ("5 - 1", "evaluator", "evaluator"),
        "judge": ("6 / 2", "judge", "judge"),
        "timeout": ("slow 1 + 1", "2", "timeout"),
        "budget": ("verbose 1 + 1", "2", "budget"),
    }
    dataset = Dataset(
        samples=tuple(Sample(id=k, input=q, expected=e) for k, (q, e, _) in cases.items())
    )
    requests, results = mailboxes(clock)
    config = EvalLoopConfig(timeout=30.0, budget=Budget(max_total_tokens=2_000))
    loop = EvalLoop(loop=agent(Model(hook), clock), evaluator=evaluator, requests=requests,
                    results=results, config=config, clock=clock)  # fmt: skip
    # No reply_to on the requests: results go to the loop's results mailbox.
    assert submit_dataset(dataset, BASELINE, requests) == len(cases)

    drain(loop)
    report = collect_results(
        results, len(cases), timeout_seconds=1, clock=clock, wait_time_seconds=0
    )

    got = by_sample(report.results)
    assert report.complete and set(got) == set(cases)
    assert {k: got[k].error_kind for k in cases} == {k: kind for k, (_, _, kind) in cases.items()}
    assert got["pass"].passed and got["pass"].output == "4"
    assert not got["fail"].passed and got["fail"].error is None
    assert got["agent"].error == "model exploded"  # the message, as EVALS.md shows it
    assert got["evaluator"].output == "4"  # the agent's answer is kept when scoring fails
    assert "could not be parsed as JudgeOutput" in (got["judge"].error or "")
    assert got["timeout"].latency_ms == pytest.approx(60_000.0)
    assert "budget" in (got["budget"].error or "")
    assert all(not got[k].passed and got[k].score.value == 0.0 for k in cases if cases[k][2])
    assert loop.stats.succeeded == len(cases) and mailbox_empty(requests)


def mailbox_empty(mailbox: InMemoryMailbox[Any, Any]) -> bool:
    return mailbox.approximate_count() == 0


@pytest.mark.parametrize("max_concurrent", [1, 3, 8])
def test_no_result_is_lost_and_no_sample_runs_twice(max_concurrent: int) -> None:
    model = Model()
    scored: Counter[str] = Counter()
    lock = threading.Lock()

    def counting(output: str, expected: str) -> Score:
        with lock:
            scored[expected] += 1
        return exact_match(output, expected)

    dataset = arithmetic(12)
    requests, results = mailboxes()
    submit_dataset(dataset, requests, reply_to=results)
    loop = eval_loop(requests, model, evaluator=counting, max_concurrent=max_concurrent)

    drain(loop)

    report = collect_results(results, len(dataset), timeout_seconds=5)
    assert report.complete and report.total == 12 and report.pass_rate == 1.0
    assert set(model.runs.values()) == {1} and len(model.runs) == 12
    assert set(scored.values()) == {1} and len(scored) == 12
    assert results.approximate_count() == 0  # exactly one reply per sample was sent
    assert all(r.delivery_count == 1 and r.request_id for r in report.results)


def test_session_aware_evaluators_get_the_run_session() -> None:
    seen: list[tuple[type[Any], tuple[ToolInvoked, ...]]] = []

    def calls_recorded(output: str, expected: str, session: SessionView) -> Score:
        calls = session[ToolInvoked].all()
        seen.append((type(session), calls))
        return Score(value=1.0, passed=len(calls) == 1, reason=f"{len(calls)} tool calls")

    evaluator = all_of(adapt(exact_match), tool_called("calculate"), calls_recorded)
    requests, results = mailboxes()
    submit_dataset(arithmetic(2), requests, reply_to=results)
    loop = eval_loop(requests, evaluator=evaluator)

    drain(loop)

    report = collect_results(results, 2, timeout_seconds=5)
    assert report.pass_rate == 1.0
    assert [kind for kind, _ in seen] == [SessionView, SessionView]
    assert [(c.name, dict(c.params)) for _, calls in seen for c in calls] == [
        ("calculate", {"a": 0.0, "op": "+", "b": 0.0}),
        ("calculate", {"a": 1.0, "op": "+", "b": 1.0}),
    ]
    assert [t.name for t in report.results[1].tool_calls] == ["calculate"]


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        EvalLoopConfig(timeout=0)


# -- routing ---------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["reply_to object", "reply_to name", "results mailbox"])
def test_results_reach_the_requested_destination(route: str) -> None:
    results: InMemoryMailbox[EvalResult, None] = InMemoryMailbox("eval-results")
    fallback: InMemoryMailbox[EvalResult, None] = InMemoryMailbox("fallback")
    resolver: RegistryResolver[Any] = RegistryResolver({"eval-results": results})
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-requests", reply_resolver=resolver)
    reply_to: Any = {"reply_to object": results, "reply_to name": "eval-results"}.get(route)
    submit_dataset(arithmetic(3), requests, reply_to=reply_to)
    loop = eval_loop(requests, results=results if route == "results mailbox" else fallback)

    drain(loop)

    assert collect_results(results, 3, timeout_seconds=5).complete
    assert fallback.approximate_count() == 0  # reply_to wins over the results mailbox


def test_an_unresolvable_reply_to_fails_before_the_sample_runs() -> None:
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(
        "eval-requests", reply_resolver=RegistryResolver()
    )
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead")
    submit_dataset(arithmetic(1), requests, reply_to="nowhere")
    model = Model()
    loop = eval_loop(requests, model, dlq=DLQPolicy(dead, max_deliveries=2), retry=NO_WAIT)

    drain(loop)

    (letter,) = [m.body for m in dead.receive(max_messages=10)]
    assert letter.reason == "exhausted" and letter.delivery_count == 2
    assert "nowhere" in letter.error_message and letter.reply_to == "nowhere"
    assert model.runs == Counter()  # no work was spent on a request nobody can receive


def test_a_result_with_nowhere_to_go_is_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    requests, _ = mailboxes()
    submit_dataset(arithmetic(1), requests)
    loop = eval_loop(requests)

    with caplog.at_level(logging.WARNING, logger="weakincentives.evals"):
        drain(loop)

    assert "its answer is dropped" in caplog.text
    assert loop.stats.succeeded == 1 and mailbox_empty(requests)


# -- concurrency -----------------------------------------------------------------------


@pytest.mark.parametrize("max_concurrent", [2, 3])
def test_up_to_max_concurrent_samples_run_at_once(max_concurrent: int) -> None:
    barrier = threading.Barrier(max_concurrent, timeout=10)
    lock = threading.Lock()
    running = peak = 0

    def hook(request: ModelRequest) -> None:
        nonlocal running, peak
        if request.turn != 0:
            return
        with lock:
            running += 1
            peak = max(peak, running)
        try:
            barrier.wait()  # breaks (and fails the sample) unless max_concurrent run together
        finally:
            with lock:
                running -= 1

    requests, results = mailboxes()
    submit_dataset(arithmetic(2 * max_concurrent), requests, reply_to=results)
    loop = eval_loop(requests, Model(hook), max_concurrent=max_concurrent)

    drain(loop)

    report = collect_results(results, 2 * max_concurrent, timeout_seconds=5)
    assert report.complete and report.error_count == 0
    assert peak == max_concurrent


# -- transient failures, retries and the dead-letter queue ----------------------------


def failing(error: Exception, times: int) -> Hook:
    """A hook that raises `error` on the first `times` runs of each question."""
    calls: Counter[str] = Counter()

    def hook(request: ModelRequest) -> None:
        if request.turn == 0:
            calls[question(request)] += 1
            if calls[question(request)] <= times:
                raise error

    return hook


@pytest.mark.parametrize(
    ("error", "retry", "max_deliveries", "runs"),
    [
        (AdapterConnectionError("refused"), NO_WAIT, 3, 3),
        (RateLimitError("429"), NO_WAIT, 4, 4),
        (AdapterTimeoutError("read timed out"), NO_WAIT, 2, 2),
        # The lower of the two limits counts: no delivery is dead-lettered unanswered.
        (AdapterConnectionError("refused"), RetryPolicy(max_attempts=2, base_delay=0.0), 5, 2),
    ],
    ids=["connection", "rate-limit", "provider-timeout", "retry-policy-is-lower"],
)
def test_transient_failures_are_retried_dead_lettered_then_answered(
    error: Exception, retry: RetryPolicy, max_deliveries: int, runs: int
) -> None:
    model = Model(failing(error, times=99))
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead")
    requests, results = mailboxes()
    submit_dataset(arithmetic(1), requests, reply_to=results)
    loop = eval_loop(
        requests, model, retry=retry, dlq=DLQPolicy(dead, max_deliveries=max_deliveries)
    )

    drain(loop)

    (result,) = collect_results(results, 1, timeout_seconds=5).results
    assert model.runs["0 + 0"] == runs
    assert result.delivery_count == runs and result.error_kind == "dead_letter"
    assert f"{type(error).__name__}: {error}" in (result.error or "")
    assert dead.approximate_count() == 1 and mailbox_empty(requests)
    assert loop.stats.retried == runs - 1


def test_a_transient_failure_that_clears_is_a_normal_result() -> None:
    model = Model(failing(AdapterConnectionError("blip"), times=1))
    requests, results = mailboxes()
    submit_dataset(arithmetic(2), requests, reply_to=results)
    loop = eval_loop(requests, model, retry=NO_WAIT)

    drain(loop)

    report = collect_results(results, 2, timeout_seconds=5)
    assert report.pass_rate == 1.0
    assert sorted(r.delivery_count for r in report.results) == [2, 2]


def test_never_dead_letter_errors_are_retried_past_max_deliveries() -> None:
    model = Model(failing(RateLimitError("429"), times=3))
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead")
    requests, results = mailboxes()
    submit_dataset(arithmetic(1), requests, reply_to=results)
    policy = DLQPolicy(dead, max_deliveries=2, never_dead_letter=(RateLimitError,))
    loop = eval_loop(requests, model, dlq=policy, retry=NO_WAIT)

    drain(loop)

    (result,) = collect_results(results, 1, timeout_seconds=5).results
    assert result.passed and result.delivery_count == 4
    assert dead.approximate_count() == 0


def test_non_transient_agent_errors_are_answered_at_once() -> None:
    model = Model(failing(ValueError("bad input"), times=99))
    requests, results = mailboxes()
    submit_dataset(arithmetic(1), requests, reply_to=results)
    loop = eval_loop(requests, model, retry=NO_WAIT)

    drain(loop)

    (result,) = collect_results(results, 1, timeout_seconds=5).results
    assert (result.error_kind, result.delivery_count, model.runs["0 + 0"]) == ("agent", 1, 1)


def test_a_body_that_is_not_an_eval_request_is_dead_lettered_at_once() -> None:
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead")
    requests: FakeMailbox[Any, Any] = FakeMailbox("eval-requests")
    requests.send({"sample": "not an EvalRequest"})
    requests.send_undecodable(b"\xff not json")
    loop = eval_loop(requests, dlq=DLQPolicy(dead, max_deliveries=5), retry=NO_WAIT)

    drain(loop)

    letters = sorted((m.body for m in dead.receive(max_messages=10)), key=lambda d: d.reason)
    assert [(d.reason, d.delivery_count) for d in letters] == [
        ("non_retryable", 1),
        ("undecodable", 1),
    ]
    assert letters[0].body == {"sample": "not an EvalRequest"}
    assert "expected an EvalRequest[Any, Any]: " in letters[0].error_message
    assert requests.approximate_count() == 0


# -- debug bundles ---------------------------------------------------------------------


def test_each_sample_gets_a_verified_bundle_with_sessions_logs_and_eval(tmp_path: Path) -> None:
    bundles = tmp_path / "bundles"
    requests, results = mailboxes()
    dataset = Dataset(
        samples=(
            Sample(id="good", input="20 + 22", expected="42"),
            Sample(id="bad", input="explode 1 + 1", expected="2"),
            Sample(id="other", input="7 * 6", expected="42"),
        )
    )

    def hook(request: ModelRequest) -> None:
        if question(request).startswith("explode"):
            raise RuntimeError("model exploded")

    submit_dataset(dataset, requests, reply_to=results, run_id="run-1")
    config = EvalLoopConfig(debug_bundle_dir=bundles)
    loop = eval_loop(requests, Model(hook), config=config, max_concurrent=3)

    drain(loop)

    collected = collect_results(results, 3, timeout_seconds=5).results
    _, opened = open_checked_bundles(collected, bundles, run_id="run-1")
    assert set(opened) == {"good", "bad", "other"}
    good, bad, other = opened["good"], opened["bad"], opened["other"]
    # Each bundle holds the tool log of its own sample only, though samples ran at once.
    assert tool_logs(good) == ["computing 20 + 22"]
    assert tool_logs(other) == ["computing 7 * 6"]
    assert tool_logs(bad) == []
    after = good.session_after
    assert good.manifest.status == "ok" and after is not None
    assert [call.name for call in Session.restore(after)[ToolInvoked].all()] == ["calculate"]
    assert good.eval == {**(good.eval or {}), "error": None, "passed": True}
    # The failed run's session is kept: its PromptFailed holds the partial transcript.
    assert bad.manifest.status == "error" and bad.session_after is not None
    failed = Session.restore(bad.session_after)[PromptFailed].latest()
    assert failed is not None and failed.error == "model exploded"
    assert bad.error is not None and "model exploded" in bad.error["message"]
    assert "Traceback" in (bad.error["traceback"] or "")
    assert (bad.eval or {})["error_kind"] == "agent"


def tool_logs(bundle: DebugBundle) -> list[str]:
    return [row["message"] for row in bundle.logs if row["logger"] == TOOL_LOG.name]


def test_a_bundle_that_cannot_be_written_does_not_fail_the_sample(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("in the way")
    requests, results = mailboxes()
    submit_dataset(arithmetic(2), requests, reply_to=results)
    loop = eval_loop(requests, config=EvalLoopConfig(debug_bundle_dir=not_a_directory))

    drain(loop)

    report = collect_results(results, 2, timeout_seconds=5)
    assert report.pass_rate == 1.0 and report.error_count == 0
    assert [r.bundle_path for r in report.results] == [None, None]


def test_evaluate_runs_one_request_without_a_mailbox() -> None:
    loop = eval_loop(None)
    sample = Sample(id="x", input="2 * 21", expected="42")

    outcome = loop.evaluate(EvalRequest(sample=sample, experiment=Experiment(name="direct")))

    assert outcome.result.passed and outcome.result.experiment_name == "direct"
    assert outcome.session is not None and outcome.failed_stage is None
    with pytest.raises(ConfigurationError, match="no requests mailbox"):
        loop.run()


# -- stop and restart ------------------------------------------------------------------


def test_a_stopped_loop_restarts_and_the_report_counts_each_sample_once() -> None:
    gate = threading.Event()
    lock = threading.Lock()
    blocked = 0

    def hook(request: ModelRequest) -> None:
        nonlocal blocked
        if request.turn == 0 and not gate.is_set():
            with lock:
                blocked += 1
            assert gate.wait(10), "the test never opened the gate"

    model = Model(hook)
    dataset = arithmetic(5)
    requests, results = mailboxes()
    submit_dataset(dataset, requests, reply_to=results)
    first = eval_loop(requests, model, max_concurrent=2, name="first")
    thread = run_in_thread(first, wait_time_seconds=0)
    wait_for(lambda: blocked == 2)

    assert first.shutdown(timeout=0.05) is False  # two samples still in flight
    thread.join(5)
    assert not thread.is_alive() and first.stats.returned == 2
    # The abandoned samples finish now and still reply: at-least-once delivery.
    gate.set()
    second = eval_loop(requests, model, name="second")
    drain(second)
    wait_for(lambda: results.approximate_count() == 7)

    report = collect_results(results, len(dataset), timeout_seconds=5)
    assert report.complete and report.total == 5 and report.pass_rate == 1.0
    assert sorted(r.sample_id for r in report.results) == [s.id for s in dataset]
    assert sum(model.runs.values()) == 7 and max(model.runs.values()) == 2
    assert second.stats.succeeded == 5 and mailbox_empty(requests)
