"""`AgentLoopWorker` answers failures by the rule `EvalLoop` follows (issue #21 point 4).

On in-memory and Redis mailboxes: an infrastructure failure that outlived the adapter's
own retries (connection refused, 5xx, 429) is retried through the mailbox with backoff,
dead-lettered per the `DLQPolicy` (dropped without one), and answered with an error of
kind `dead_letter`: never lost. A failure of the agent's logic is answered at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.backends import Backend
from weakincentives import serde
from weakincentives.errors import AdapterConnectionError, ProviderServerError, RateLimitError
from weakincentives.runtime import (
    AgentLoopRequest,
    AgentLoopResult,
    AgentLoopWorker,
    DLQPolicy,
    FunctionLoop,
    Mailbox,
    RetryPolicy,
)
from weakincentives.runtime.answering import AnsweringWorker

NO_WAIT = RetryPolicy(max_attempts=10, base_delay=0.0, jitter=0.0)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    made = Backend(request.param)
    yield made
    made.close()


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


def answers_of(mailbox: Mailbox[Any, Any]) -> dict[uuid.UUID, AgentLoopResult[Any]]:
    out: dict[uuid.UUID, AgentLoopResult[Any]] = {}
    while batch := mailbox.receive(max_messages=10):
        for message in batch:
            out[message.body.request_id] = message.body
            message.acknowledge()
    return out


def serve(
    backend: Backend, agent: Agent, *, dlq: bool = True, max_deliveries: int = 3
) -> tuple[AgentLoopWorker, list[AgentLoopRequest[str]], dict[uuid.UUID, Any], int]:
    requests = backend.mailbox("requests", AgentLoopRequest[str])
    answers = backend.mailbox("answers", AgentLoopResult[str])
    dead = backend.mailbox("dead")
    sent = [AgentLoopRequest(f"q{i}") for i in range(3)]
    for request in sent:
        requests.send(request, reply_to=answers)
    worker = AgentLoopWorker(
        FunctionLoop(agent, name="agent"), requests=requests, retry=NO_WAIT,
        dlq=DLQPolicy(dead, max_deliveries=max_deliveries) if dlq else None,
    )  # fmt: skip
    worker.run(until_drained=True, wait_time_seconds=0)
    return worker, sent, answers_of(answers), dead.approximate_count()


@pytest.mark.parametrize(
    "error",
    [AdapterConnectionError("Connection refused"), ProviderServerError("502 Bad Gateway"),
     RateLimitError("429 Too Many Requests")],
    ids=["connection-refused", "5xx", "429"],
)  # fmt: skip
def test_infrastructure_failures_are_retried_dead_lettered_then_answered(
    backend: Backend, error: Exception
) -> None:
    agent = Agent(error)
    worker, sent, got, dead = serve(backend, agent, max_deliveries=3)

    assert agent.calls["q1"] == 3  # retried through the mailbox, up to the DLQ policy
    assert dead == 1
    failed = got[sent[1].request_id]
    assert (failed.error_kind, failed.delivery_count, failed.ok) == ("dead_letter", 3, False)
    assert failed.error == (
        f"dead-lettered after 3 deliveries (exhausted): {type(error).__name__}: {error}"
    )
    assert [got[r.request_id].output for r in (sent[0], sent[2])] == ["Q0", "Q2"]
    assert worker.stats.dead_lettered == 1 and worker.stats.retried == 2


def test_without_a_dlq_the_retry_limit_gives_up_and_still_answers(backend: Backend) -> None:
    agent = Agent(AdapterConnectionError("Connection refused"))
    worker, sent, got, dead = serve(backend, agent, dlq=False)

    failed = got[sent[1].request_id]
    assert agent.calls["q1"] == 10  # NO_WAIT's max_attempts
    assert (failed.error_kind, failed.delivery_count) == ("dead_letter", 10)
    assert failed.error.startswith("dead-lettered after 10 deliveries (exhausted)")
    assert dead == 0 and worker.stats.dropped == 1


def test_a_failure_of_the_agents_logic_is_answered_at_once(backend: Backend) -> None:
    agent = Agent(ValueError("cannot parse the question"))
    worker, sent, got, dead = serve(backend, agent)

    failed = got[sent[1].request_id]
    assert (failed.error_kind, failed.delivery_count, agent.calls["q1"]) == ("agent", 1, 1)
    assert failed.error == "ValueError: cannot parse the question"
    assert dead == 0 and worker.stats.retried == 0 and worker.stats.dead_lettered == 0


def test_a_request_sent_as_json_that_is_given_up_on_is_answered(backend: Backend) -> None:
    requests = backend.mailbox("requests")  # no body_type: a dict arrives, not a request
    answers = backend.mailbox("answers", AgentLoopResult[str])
    dead = backend.mailbox("dead")
    request = AgentLoopRequest("q0")
    requests.send(serde.dump(request), reply_to=answers)
    worker = AgentLoopWorker(
        FunctionLoop(Agent(ValueError()), name="agent"), requests=requests,
        dlq=DLQPolicy(dead), retry=NO_WAIT,
    )  # fmt: skip

    worker.run(until_drained=True, wait_time_seconds=0)

    (answer,) = answers_of(answers).values()
    assert (answer.request_id, answer.error_kind) == (request.request_id, "dead_letter")
    assert "(non_retryable): MessageDecodeError: expected an AgentLoopRequest" in str(answer.error)
    assert dead.approximate_count() == 1


def test_both_loops_share_one_implementation_of_the_rule() -> None:
    from weakincentives.evals import EvalLoop

    for worker in (AgentLoopWorker, EvalLoop):
        assert issubclass(worker, AnsweringWorker)
        for method in ("raise_if_transient", "on_dead_letter", "send_answer"):
            assert method not in vars(worker), f"{worker.__name__} redefines {method}"
