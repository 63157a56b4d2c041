"""Dead-letter policy: what goes to the DLQ, when, and what the record holds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.runtime.workers import FnWorker, fail_with, succeed
from weakincentives.clock import FakeClock
from weakincentives.errors import ConfigurationError, MailboxConnectionError
from weakincentives.runtime.dlq import DeadLetter, DLQPolicy, RetryPolicy
from weakincentives.runtime.mailbox import FakeMailbox, InMemoryMailbox, Message
from weakincentives.runtime.worker import WorkerStats

START = datetime(2024, 1, 1, tzinfo=UTC)
QUICK = RetryPolicy(max_attempts=100, base_delay=0.0, jitter=0.0)


class Setup:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.requests: FakeMailbox[Any, Any] = FakeMailbox("requests", clock=self.clock)
        self.dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox(
            "dead", clock=self.clock
        )

    def letters(self) -> list[DeadLetter[Any]]:
        return [m.body for m in self.dead.receive(max_messages=10)]


def test_exhausted_message_is_dead_lettered_with_its_history() -> None:
    s = Setup()
    replies: InMemoryMailbox[Any, None] = InMemoryMailbox("replies")
    s.requests.send({"q": 1}, reply_to=replies)
    worker = FnWorker(
        s.requests,
        fail_with(ValueError("bad answer")),
        retry=QUICK,
        dlq=DLQPolicy(s.dead, max_deliveries=3),
        clock=s.clock,
    )

    worker.run(until_drained=True, wait_time_seconds=0)

    [letter] = s.letters()
    assert letter == DeadLetter(
        message_id=letter.message_id,
        source="requests",
        body={"q": 1},
        raw_body=None,
        delivery_count=3,
        reason="exhausted",
        error_type="builtins.ValueError",
        error_message="bad answer",
        enqueued_at=START,
        dead_lettered_at=START,
        reply_to="replies",
    )
    assert [count for _, count in worker.seen] == [1, 2, 3]
    assert s.requests.approximate_count() == 0
    assert worker.stats == WorkerStats(received=3, failed=3, retried=2, dead_lettered=1)


@pytest.mark.parametrize(("max_attempts", "max_deliveries"), [(2, 4), (4, 2)])
def test_the_lower_of_retry_and_dlq_limits_wins(max_attempts: int, max_deliveries: int) -> None:
    s = Setup()
    s.requests.send("x")
    retry = RetryPolicy(max_attempts=max_attempts, base_delay=0.0, jitter=0.0)
    dlq = DLQPolicy(s.dead, max_deliveries=max_deliveries)
    worker = FnWorker(s.requests, fail_with(RuntimeError("no")), retry=retry, dlq=dlq)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert [letter.delivery_count for letter in s.letters()] == [2]


def test_dead_letter_on_errors_skip_retries() -> None:
    s = Setup()
    s.requests.send("malformed")
    dlq = DLQPolicy(s.dead, dead_letter_on=(KeyError,))
    worker = FnWorker(s.requests, fail_with(KeyError("sample")), retry=QUICK, dlq=dlq)

    worker.run(until_drained=True, wait_time_seconds=0)

    [letter] = s.letters()
    assert (letter.reason, letter.delivery_count, letter.error_type) == (
        "non_retryable",
        1,
        "builtins.KeyError",
    )


def test_never_dead_letter_errors_are_retried_past_the_limit() -> None:
    s = Setup()
    s.requests.send("rate limited")
    dlq = DLQPolicy(s.dead, max_deliveries=2, never_dead_letter=(ConnectionError,))
    handler = fail_with(ConnectionError("429"), times=4)
    worker = FnWorker(s.requests, handler, retry=QUICK, dlq=dlq)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert [count for _, count in worker.seen] == [1, 2, 3, 4, 5]
    assert s.letters() == []
    assert worker.stats.succeeded == 1


def test_poison_message_goes_to_the_dlq_and_the_worker_keeps_going() -> None:
    s = Setup()
    s.requests.send_undecodable(b'{"sample": \xff', reason="invalid UTF-8 at byte 11")
    s.requests.send("good")
    worker = FnWorker(s.requests, succeed, dlq=DLQPolicy(s.dead))

    worker.run(until_drained=True, wait_time_seconds=0)

    [letter] = s.letters()
    assert letter.body is None
    assert letter.raw_body == '{"sample": \\xff'
    assert letter.reason == "undecodable"
    assert letter.error_type == "weakincentives.errors.MessageDecodeError"
    assert "invalid UTF-8 at byte 11" in letter.error_message
    assert worker.seen == [("good", 1)]
    assert s.requests.approximate_count() == 0


def test_poison_message_without_dlq_is_dropped() -> None:
    s = Setup()
    s.requests.send_undecodable("not json")
    worker = FnWorker(s.requests, succeed)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.seen == []
    assert worker.stats == WorkerStats(received=1, failed=1, dropped=1)
    assert s.requests.approximate_count() == 0


def test_a_refused_dead_letter_leaves_the_message_queued() -> None:
    s = Setup()
    dead: FakeMailbox[DeadLetter[Any], None] = FakeMailbox("dead", clock=s.clock)
    dead.fail_next_send(MailboxConnectionError("dlq down"))
    s.requests.send("x")
    dlq = DLQPolicy(dead, dead_letter_on=(ValueError,))
    worker = FnWorker(s.requests, fail_with(ValueError("bad")), dlq=dlq, retry=QUICK)

    worker.run(max_iterations=1, wait_time_seconds=0)

    assert s.requests.approximate_count() == 1
    assert worker.stats.dead_lettered == 0
    worker.run(until_drained=True, wait_time_seconds=0)
    assert [m.body.delivery_count for m in dead.receive()] == [2]


def test_dead_letter_keeps_undecodable_bytes_readable() -> None:
    s = Setup()
    s.requests.send_undecodable(b"\x80abc")
    message: Message[Any, Any] = s.requests.receive()[0]
    assert message.decode_error is not None

    letter = DeadLetter.from_message(
        message, message.decode_error, reason="undecodable", source="requests", now=START
    )

    assert letter.raw_body == "\\x80abc"
    assert letter.reply_to is None


def test_max_deliveries_must_be_positive() -> None:
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox("dead")
    with pytest.raises(ConfigurationError, match="max_deliveries"):
        DLQPolicy(dead, max_deliveries=0)


# -- the requester hears of a message given up on ----------------------------------------


class AnsweringWorker(FnWorker):
    """Replies to the sender of every message it gives up on (as `EvalLoop` does)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given_up: list[DeadLetter[Any]] = []

    def on_dead_letter(self, message: Message[Any, Any], letter: DeadLetter[Any]) -> None:
        self.given_up.append(letter)
        if message.reply_to is not None:
            message.reply_to.send(f"gave up: {letter.reason} after {letter.delivery_count}")


@pytest.mark.parametrize("with_dlq", [True, False], ids=["dead-lettered", "dropped"])
def test_a_message_given_up_on_is_answered_before_it_is_acknowledged(with_dlq: bool) -> None:
    s = Setup()
    replies: InMemoryMailbox[Any, None] = InMemoryMailbox("replies")
    s.requests.send("q", reply_to=replies)
    s.requests.send_undecodable(b"\xff")
    dlq = DLQPolicy(s.dead, max_deliveries=2) if with_dlq else None
    retry = RetryPolicy(max_attempts=2, base_delay=0.0, jitter=0.0)
    worker = AnsweringWorker(s.requests, fail_with(ValueError("bad")), retry=retry, dlq=dlq)

    worker.run(until_drained=True, wait_time_seconds=0)

    assert sorted(letter.reason for letter in worker.given_up) == ["exhausted", "undecodable"]
    assert [m.body for m in replies.receive(max_messages=10)] == ["gave up: exhausted after 2"]
    assert len(s.letters()) == (2 if with_dlq else 0)
    assert s.requests.approximate_count() == 0


def test_an_answer_that_cannot_be_sent_leaves_the_message_for_a_later_attempt() -> None:
    s = Setup()
    replies: FakeMailbox[Any, None] = FakeMailbox("replies", clock=s.clock)
    replies.fail_next_send(MailboxConnectionError("replies down"))
    s.requests.send("q", reply_to=replies)
    dlq = DLQPolicy(s.dead, dead_letter_on=(ValueError,))
    worker = AnsweringWorker(s.requests, fail_with(ValueError("bad")), retry=QUICK, dlq=dlq)

    worker.run(max_iterations=1, wait_time_seconds=0)

    assert s.letters() == [] and s.requests.approximate_count() == 1  # not lost, not settled
    worker.run(until_drained=True, wait_time_seconds=0)
    assert [m.body for m in replies.receive()] == ["gave up: non_retryable after 2"]
    assert [letter.delivery_count for letter in s.letters()] == [2]
