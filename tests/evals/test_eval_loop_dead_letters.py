"""Transient versus final failures on the mailbox path, on in-memory and Redis mailboxes.

An infrastructure failure that outlived the adapter's own retries (connection refused,
5xx, 429) is retried through the mailbox with backoff, dead-lettered per the
`DLQPolicy`, and answered with an error result of kind `dead_letter`: never lost. A
failure of the agent's logic is answered at once. A body that arrives as a plain dict
(a mailbox made without `body_type=`) is decoded into the loop's request type; one that
cannot be decoded is dead-lettered with a message naming that type, and answered when
it names its sample.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.backends import Backend
from weakincentives import serde
from weakincentives.errors import (
    AdapterConnectionError,
    ProviderServerError,
    RateLimitError,
)
from weakincentives.evals import (
    EvalLoop,
    EvalLoopConfig,
    EvalRequest,
    EvalResult,
    Sample,
    collect_results,
    exact_match,
    submit_dataset,
)
from weakincentives.experiment import BASELINE
from weakincentives.runtime import DLQPolicy, FunctionLoop, RetryPolicy

NO_WAIT = RetryPolicy(max_attempts=10, base_delay=0.0, jitter=0.0)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    made = Backend(request.param)
    yield made
    made.close()


def questions(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"Q{i}") for i in range(n)]


class Agent:
    """Answers `q<n>` with `Q<n>`; `q1` fails with `error` every time."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls: dict[str, int] = {}

    def __call__(self, question: str) -> str:
        self.calls[question] = self.calls.get(question, 0) + 1
        if question == "q1":
            raise self.error
        return question.upper()


def run(backend: Backend, agent: Agent, *, max_deliveries: int = 3) -> tuple[EvalLoop, Any]:
    requests = backend.mailbox("requests", EvalRequest[str, str])
    results = backend.mailbox("results", EvalResult)
    dead = backend.mailbox("dead")
    submit_dataset(questions(3), requests, reply_to=results, run_id="r")
    loop = EvalLoop(
        loop=FunctionLoop(agent, name="agent"), evaluator=exact_match, requests=requests,
        dlq=DLQPolicy(dead, max_deliveries=max_deliveries), retry=NO_WAIT,
    )  # fmt: skip
    loop.run(until_drained=True, wait_time_seconds=0)
    report = collect_results(results, 3, timeout_seconds=10, run_id="r")
    assert report.complete, f"{report.missing} missing"
    return loop, (report, dead.approximate_count())


@pytest.mark.parametrize(
    "error",
    [AdapterConnectionError("Connection refused"), ProviderServerError("502 Bad Gateway"),
     RateLimitError("429 Too Many Requests")],
    ids=["connection-refused", "5xx", "429"],
)  # fmt: skip
def test_infrastructure_failures_are_retried_dead_lettered_then_an_error_result(
    backend: Backend, error: Exception
) -> None:
    agent = Agent(error)
    loop, (report, dead) = run(backend, agent, max_deliveries=3)

    failed = {r.sample_id: r for r in report.results}["s1"]
    assert agent.calls["q1"] == 3  # retried through the mailbox, up to the DLQ policy
    assert dead == 1
    assert failed.error_kind == "dead_letter"
    assert failed.delivery_count == 3
    assert failed.error == (
        f"dead-lettered after 3 deliveries (exhausted): {type(error).__name__}: {error}"
    )
    assert loop.stats.dead_lettered == 1 and loop.stats.retried == 2
    assert report.pass_rate == pytest.approx(2 / 3)


def test_a_failure_of_the_agents_logic_is_recorded_at_once(backend: Backend) -> None:
    agent = Agent(ValueError("cannot parse the question"))
    loop, (report, dead) = run(backend, agent)

    failed = {r.sample_id: r for r in report.results}["s1"]
    assert (failed.error_kind, failed.delivery_count, agent.calls["q1"]) == ("agent", 1, 1)
    assert failed.error == "cannot parse the question"  # the message, as EVALS.md shows it
    assert dead == 0 and loop.stats.dead_lettered == 0


def test_a_dict_body_is_decoded_into_the_loops_request_type(backend: Backend) -> None:
    requests = backend.mailbox("requests")  # no body_type: bodies arrive as dicts
    results = backend.mailbox("results", EvalResult)
    for sample in questions(2):
        body = serde.dump(EvalRequest(sample=sample, experiment=BASELINE, run_id="r"))
        requests.send(body, reply_to=results)
    loop = EvalLoop(
        loop=FunctionLoop(str.upper, name="upper"), evaluator=exact_match, requests=requests,
        request_type=EvalRequest[str, str],
    )  # fmt: skip

    loop.run(until_drained=True, wait_time_seconds=0)

    report = collect_results(results, 2, timeout_seconds=10, run_id="r")
    assert report.complete and report.pass_rate == 1.0


def test_a_body_that_cannot_be_decoded_is_dead_lettered_and_answered(backend: Backend) -> None:
    requests = backend.mailbox("requests")
    results = backend.mailbox("results", EvalResult)
    dead = backend.mailbox("dead")
    body = serde.dump(EvalRequest(sample=questions(1)[0], experiment=BASELINE, run_id="r"))
    del body["experiment"]  # not an EvalRequest any more, but it names its sample
    requests.send(body, reply_to=results)
    requests.send({"nothing": "to say"}, reply_to=results)  # names no sample: no answer
    loop = EvalLoop(
        loop=FunctionLoop(str.upper, name="upper"), evaluator=exact_match, requests=requests,
        dlq=DLQPolicy(dead), retry=NO_WAIT,
    )  # fmt: skip

    loop.run(until_drained=True, wait_time_seconds=0)

    (result,) = collect_results(results, 1, timeout_seconds=2, run_id="r").results
    assert (result.sample_id, result.error_kind, result.epoch) == ("s0", "dead_letter", 0)
    assert "expected an EvalRequest[Any, Any]" in (result.error or "")
    assert "experiment" in (result.error or "")
    assert dead.approximate_count() == 2


def test_a_hung_sync_agent_is_answered_with_a_timeout_and_frees_its_slot(
    backend: Backend,
) -> None:
    release = threading.Event()

    def agent(question: str) -> str:
        if question == "q1":
            release.wait(60)  # hangs past the timeout (released at the end of the test)
        return question.upper()

    requests = backend.mailbox("requests", EvalRequest[str, str])
    results = backend.mailbox("results", EvalResult)
    submit_dataset(questions(3), requests, reply_to=results, run_id="r")
    loop = EvalLoop(
        loop=FunctionLoop(agent, name="agent"), evaluator=exact_match, requests=requests,
        config=EvalLoopConfig(timeout=0.3), max_concurrent=1,
    )  # fmt: skip
    try:
        loop.run(until_drained=True, wait_time_seconds=0)  # one slot: a hang would block it
        report = collect_results(results, 3, timeout_seconds=10, run_id="r")
    finally:
        release.set()
    assert report.complete
    failed = {r.sample_id: r for r in report.results}["s1"]
    assert failed.error_kind == "timeout"
    assert failed.error == "TimeoutError: the sample did not finish within its timeout of 0.3s"
    assert report.pass_rate == pytest.approx(2 / 3)
