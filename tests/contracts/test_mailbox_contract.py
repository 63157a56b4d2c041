"""The mailbox contract: every backend in `mailbox_backends.BACKENDS` must pass it.

Only the `Mailbox` protocol and the harness (`new`, `advance`) are used here, so a
backend with server-side time (Redis) runs the same tests with real short sleeps.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from tests.contracts.mailbox_backends import Backend, Harness, backend_params
from weakincentives.errors import (
    MailboxArgumentError,
    MailboxClosedError,
    MailboxResolutionError,
    NoReplyToError,
    ReceiptHandleExpiredError,
)
from weakincentives.runtime.mailbox import (
    Mailbox,
    Message,
    RegistryResolver,
    SupportsSendMany,
    acknowledge_all,
)

SHORT = 0.2
"""A visibility timeout or delay that a test lets pass with `advance(PAST)`."""
PAST = 0.3
LONG = 60.0
"""A visibility timeout that never passes within a test."""


@pytest.fixture(params=backend_params())
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    backend: Backend = request.param
    opened = backend.open()
    yield opened
    opened.close()


def receive_all(mailbox: Mailbox[Any, Any], visibility_timeout: float = LONG) -> list[Any]:
    return list(mailbox.receive(max_messages=10, visibility_timeout=visibility_timeout))


def only(messages: Any) -> Message[Any, Any]:
    assert len(messages) == 1, messages
    result: Message[Any, Any] = messages[0]
    return result


def test_plain_sends_are_received_in_send_order(harness: Harness) -> None:
    mailbox = harness.new("fifo")
    ids = [mailbox.send(body) for body in ("a", "b", "c")]

    received = receive_all(mailbox)

    assert [m.body for m in received] == ["a", "b", "c"]
    assert [m.id for m in received] == ids
    assert len(set(ids)) == 3


def test_first_delivery_has_count_one_and_utc_enqueue_time(harness: Harness) -> None:
    mailbox = harness.new("meta")
    mailbox.send({"k": [1, 2]})

    message = only(mailbox.receive())

    assert message.body == {"k": [1, 2]}
    assert message.delivery_count == 1
    assert isinstance(message.enqueued_at, datetime)
    assert message.enqueued_at.utcoffset() == UTC.utcoffset(None)
    assert message.reply_to is None
    assert message.reply_to_name is None


def test_max_messages_bounds_each_batch(harness: Harness) -> None:
    mailbox = harness.new("batches")
    for n in range(5):
        mailbox.send(n)

    first = mailbox.receive(max_messages=2, visibility_timeout=LONG)
    rest = mailbox.receive(max_messages=10, visibility_timeout=LONG)

    assert [m.body for m in first] == [0, 1]
    assert [m.body for m in rest] == [2, 3, 4]
    assert mailbox.receive(max_messages=10) == []


def test_delayed_send_becomes_visible_after_its_delay(harness: Harness) -> None:
    mailbox = harness.new("delayed")
    mailbox.send("later", delay=SHORT)
    mailbox.send("now")

    assert [m.body for m in receive_all(mailbox)] == ["now"]
    assert mailbox.approximate_count() == 2

    harness.advance(PAST)

    assert [m.body for m in receive_all(mailbox)] == ["later"]


def test_expired_visibility_redelivers_with_a_new_handle(harness: Harness) -> None:
    mailbox = harness.new("redeliver")
    mailbox.send("job")
    first = only(mailbox.receive(visibility_timeout=SHORT))
    assert mailbox.receive() == []  # invisible while in flight

    harness.advance(PAST)
    second = only(mailbox.receive(visibility_timeout=LONG))

    assert (second.id, second.body, second.delivery_count) == (first.id, "job", 2)
    assert second.receipt_handle != first.receipt_handle
    with pytest.raises(ReceiptHandleExpiredError):
        first.acknowledge()
    with pytest.raises(ReceiptHandleExpiredError):
        first.nack()
    with pytest.raises(ReceiptHandleExpiredError):
        first.extend_visibility(LONG)
    second.acknowledge()
    assert mailbox.approximate_count() == 0


def test_handle_is_stale_once_its_visibility_timeout_passed(harness: Harness) -> None:
    mailbox = harness.new("expired")
    mailbox.send("job")
    message = only(mailbox.receive(visibility_timeout=SHORT))

    harness.advance(PAST)

    with pytest.raises(ReceiptHandleExpiredError):
        message.acknowledge()
    assert only(mailbox.receive()).delivery_count == 2


def test_acknowledge_deletes_and_a_second_acknowledge_is_rejected(harness: Harness) -> None:
    mailbox = harness.new("ack")
    mailbox.send("job")
    message = only(mailbox.receive(visibility_timeout=SHORT))

    message.acknowledge()

    assert message.settled
    assert mailbox.approximate_count() == 0
    with pytest.raises(ReceiptHandleExpiredError):
        message.acknowledge()
    harness.advance(PAST)
    assert mailbox.receive() == []


def test_nack_returns_the_message_after_its_timeout(harness: Harness) -> None:
    mailbox = harness.new("nack")
    mailbox.send("job")
    first = only(mailbox.receive(visibility_timeout=LONG))

    first.nack()
    second = only(mailbox.receive(visibility_timeout=LONG))
    second.nack(visibility_timeout=SHORT)

    assert first.settled
    assert second.delivery_count == 2
    assert mailbox.receive() == []
    with pytest.raises(ReceiptHandleExpiredError):
        second.acknowledge()
    harness.advance(PAST)
    third = only(mailbox.receive())
    assert (third.id, third.delivery_count) == (first.id, 3)


def test_extend_visibility_keeps_the_message_hidden(harness: Harness) -> None:
    mailbox = harness.new("extend")
    mailbox.send("job")
    message = only(mailbox.receive(visibility_timeout=SHORT))

    message.extend_visibility(LONG)
    harness.advance(PAST)

    assert mailbox.receive() == []
    message.acknowledge()
    assert mailbox.approximate_count() == 0


def test_extend_visibility_to_zero_releases_the_message(harness: Harness) -> None:
    mailbox = harness.new("release")
    mailbox.send("job")
    message = only(mailbox.receive(visibility_timeout=LONG))

    message.extend_visibility(0.0)

    assert only(mailbox.receive()).delivery_count == 2


def test_long_poll_returns_as_soon_as_another_thread_sends(harness: Harness) -> None:
    mailbox = harness.new("poll")
    timer = threading.Timer(0.03, mailbox.send, args=("wake",))
    started = time.monotonic()
    timer.start()
    try:
        messages = mailbox.receive(wait_time_seconds=10)
    finally:
        timer.cancel()
        timer.join(timeout=30)  # the send may still be reading its reply at teardown

    assert [m.body for m in messages] == ["wake"]
    assert time.monotonic() - started < 5


def test_long_poll_on_an_empty_mailbox_returns_nothing(harness: Harness) -> None:
    mailbox = harness.new("quiet")
    started = time.monotonic()

    assert mailbox.receive(wait_time_seconds=0.05) == []
    assert time.monotonic() - started >= 0.04


def test_long_poll_returns_when_the_mailbox_is_closed(harness: Harness) -> None:
    mailbox = harness.new("closing")
    timer = threading.Timer(0.03, mailbox.close)
    started = time.monotonic()
    timer.start()
    try:
        assert mailbox.receive(wait_time_seconds=10) == []
    finally:
        timer.cancel()
        timer.join(timeout=30)
    assert time.monotonic() - started < 5


def test_reply_to_a_mailbox_object(harness: Harness) -> None:
    requests = harness.new("requests")
    replies = harness.new("client-123")
    requests.send("question", reply_to=replies)

    message = only(requests.receive())
    message.reply("progress")
    message.reply("answer")
    message.acknowledge()

    assert message.reply_to_name == "client-123"
    assert [m.body for m in receive_all(replies)] == ["progress", "answer"]


def test_reply_to_a_name_resolved_by_the_resolver(harness: Harness) -> None:
    replies = harness.new("results")
    requests = harness.new("requests", reply_resolver=RegistryResolver({"results": replies}))
    requests.send("question", reply_to="results")

    message = only(requests.receive())
    reply_id = message.reply("answer")

    assert message.reply_to_name == "results"
    assert [(m.id, m.body) for m in receive_all(replies)] == [(reply_id, "answer")]


def test_reply_without_reply_to_is_rejected(harness: Harness) -> None:
    mailbox = harness.new("no-reply")
    mailbox.send("question")

    with pytest.raises(NoReplyToError, match="without reply_to"):
        only(mailbox.receive()).reply("answer")


def test_reply_to_an_unknown_name_is_rejected(harness: Harness) -> None:
    mailbox = harness.new("unknown", reply_resolver=RegistryResolver({}))
    mailbox.send("question", reply_to="nowhere")

    with pytest.raises(MailboxResolutionError, match="nowhere"):
        only(mailbox.receive()).reply("answer")


def test_purge_deletes_everything_and_stales_handles(harness: Harness) -> None:
    mailbox = harness.new("purge")
    for n in range(3):
        mailbox.send(n)
    in_flight = only(mailbox.receive(visibility_timeout=LONG))
    assert mailbox.approximate_count() == 3

    assert mailbox.purge() == 3

    assert mailbox.approximate_count() == 0
    assert mailbox.receive(max_messages=10) == []
    with pytest.raises(ReceiptHandleExpiredError):
        in_flight.acknowledge()


def test_closed_mailbox_rejects_every_call(harness: Harness) -> None:
    mailbox = harness.new("closed")
    assert not mailbox.closed

    mailbox.close()
    mailbox.close()  # idempotent

    assert mailbox.closed
    for call in (
        lambda: mailbox.send("x"),
        lambda: mailbox.receive(),
        mailbox.approximate_count,
        mailbox.purge,
    ):
        with pytest.raises(MailboxClosedError):
            call()


BAD_RECEIVES: dict[str, dict[str, Any]] = {
    "no-messages": {"max_messages": 0},
    "too-many-messages": {"max_messages": 11},
    "negative-visibility": {"visibility_timeout": -1.0},
    "nan-visibility": {"visibility_timeout": float("nan")},
    "huge-visibility": {"visibility_timeout": 43_201.0},
    "negative-wait": {"wait_time_seconds": -0.5},
    "too-long-wait": {"wait_time_seconds": 21.0},
}


@pytest.mark.parametrize("kwargs", BAD_RECEIVES.values(), ids=BAD_RECEIVES.keys())
def test_out_of_range_receive_arguments_are_rejected(
    harness: Harness, kwargs: dict[str, Any]
) -> None:
    mailbox = harness.new("args")
    mailbox.send("kept")

    with pytest.raises(MailboxArgumentError):
        mailbox.receive(**kwargs)
    assert [m.body for m in mailbox.receive()] == ["kept"]


SettleCall = Callable[[Message[Any, Any]], object]
BAD_SETTLES: dict[str, SettleCall] = {
    "negative-nack": lambda m: m.nack(visibility_timeout=-1.0),
    "infinite-nack": lambda m: m.nack(visibility_timeout=float("inf")),
    "negative-extend": lambda m: m.extend_visibility(-1.0),
}


@pytest.mark.parametrize("call", BAD_SETTLES.values(), ids=BAD_SETTLES.keys())
def test_out_of_range_settle_arguments_are_rejected(harness: Harness, call: SettleCall) -> None:
    mailbox = harness.new("settle-args")
    mailbox.send("job")
    message = only(mailbox.receive(visibility_timeout=LONG))

    with pytest.raises(MailboxArgumentError):
        call(message)
    message.acknowledge()  # the failed call left the delivery untouched


@pytest.mark.parametrize("delay", [-1.0, float("nan"), 43_201.0])
def test_out_of_range_delay_is_rejected(harness: Harness, delay: float) -> None:
    mailbox = harness.new("delay-args")

    with pytest.raises(MailboxArgumentError, match="delay"):
        mailbox.send("x", delay=delay)
    assert mailbox.approximate_count() == 0


# -- the same contract as a state machine against a reference model -------------------

MODEL_SHORT = 0.05
"""A short timeout: unknown whether it passed until the next `advance`."""
MODEL_ADVANCE = 0.1
"""Each `advance` step: longer than `MODEL_SHORT`, so short timeouts have passed."""
MODEL_LONG = 3600.0
"""A long timeout: never passes during one run."""

Visibility = str
"""Where the model knows a message is (see `Tracked.state`)."""


@dataclass(slots=True)
class Tracked:
    """The reference model's view of one message.

    `state` is one of: "visible" (pending and surely visible), "maybe" (pending with a
    short timeout: it may or may not be visible yet), "hidden" (pending with a long
    timeout), "inflight" (delivered with a long timeout: `handle` surely owns it),
    "maybe-inflight" (delivered with a short timeout: `handle` may have expired).
    """

    body: int
    state: Visibility
    deliveries: int = 0
    handle: str | None = None


AFTER_TIMEOUT = {0.0: "visible", MODEL_SHORT: "maybe", MODEL_LONG: "hidden"}
IN_FLIGHT = {0.0: "maybe-inflight", MODEL_SHORT: "maybe-inflight", MODEL_LONG: "inflight"}
TIMEOUTS = st.sampled_from([0.0, MODEL_SHORT, MODEL_LONG])


class MailboxModel(RuleBasedStateMachine):
    """No loss, no delivery while invisible, stale handles rejected, counts monotone."""

    harness: Harness
    deliveries = Bundle("deliveries")

    def __init__(self) -> None:
        super().__init__()
        self.mailbox = self.harness.new(f"model-{uuid.uuid4().hex[:8]}")
        self.model: dict[str, Tracked] = {}
        self.sent = 0

    @rule(delay=TIMEOUTS)
    def send(self, delay: float) -> None:
        self.sent += 1
        message_id = self.mailbox.send(self.sent, delay=delay)
        assert message_id not in self.model
        self.model[message_id] = Tracked(body=self.sent, state=AFTER_TIMEOUT[delay])

    @rule(target=deliveries, limit=st.integers(1, 4), timeout=TIMEOUTS)
    def receive(self, limit: int, timeout: float) -> Any:
        received = self.mailbox.receive(max_messages=limit, visibility_timeout=timeout)
        visible = {i for i, t in self.model.items() if t.state == "visible"}
        assert min(limit, len(visible)) <= len(received) <= limit
        if len(received) < limit:  # nothing surely visible was left behind
            assert visible <= {m.id for m in received}
        for message in received:
            tracked = self.model[message.id]
            assert tracked.state in {"visible", "maybe", "maybe-inflight"}, tracked
            assert message.body == tracked.body
            assert message.delivery_count == tracked.deliveries + 1
            tracked.deliveries = message.delivery_count
            tracked.handle = message.receipt_handle
            tracked.state = IN_FLIGHT[timeout]
        return multiple(*received)

    def _settle(self, message: Message[Any, Any], call: Callable[[], object]) -> bool:
        """Run `call` and check it against the model; return whether it succeeded."""
        tracked = self.model.get(message.id)
        owns = tracked is not None and tracked.handle == message.receipt_handle
        try:
            call()
        except ReceiptHandleExpiredError:
            assert tracked is None or tracked.state != "inflight" or not owns
            if owns and tracked is not None:  # its short timeout had passed: requeued
                tracked.state, tracked.handle = "visible", None
            return False
        assert owns, "a stale receipt handle settled a message"
        return True

    @rule(message=deliveries)
    def acknowledge(self, message: Message[Any, Any]) -> None:
        if self._settle(message, message.acknowledge):
            del self.model[message.id]

    @rule(message=deliveries, timeout=TIMEOUTS)
    def nack(self, message: Message[Any, Any], timeout: float) -> None:
        if self._settle(message, lambda: message.nack(visibility_timeout=timeout)):
            tracked = self.model[message.id]
            tracked.state, tracked.handle = AFTER_TIMEOUT[timeout], None

    @rule(message=deliveries, timeout=TIMEOUTS)
    def extend(self, message: Message[Any, Any], timeout: float) -> None:
        if self._settle(message, lambda: message.extend_visibility(timeout)):
            tracked = self.model[message.id]
            if timeout == 0.0:
                tracked.state, tracked.handle = "visible", None
            else:
                tracked.state = IN_FLIGHT[timeout]

    @rule()
    def advance(self) -> None:
        self.harness.advance(MODEL_ADVANCE)
        for tracked in self.model.values():
            if tracked.state in {"maybe", "maybe-inflight"}:
                tracked.state, tracked.handle = "visible", None

    @invariant()
    def nothing_lost_or_duplicated(self) -> None:
        assert self.mailbox.approximate_count() == len(self.model)


@pytest.mark.parametrize("backend", backend_params())
def test_mailbox_matches_reference_model(backend: Backend) -> None:
    harness = backend.open()
    machine = type("BoundMailboxModel", (MailboxModel,), {"harness": harness})
    try:
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=backend.model_examples,
                stateful_step_count=30,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
    finally:
        harness.close()


def test_send_many_is_send_for_each_body_in_order(harness: Harness) -> None:
    mailbox = harness.new("many")
    replies = harness.new("many-replies")
    if not isinstance(mailbox, SupportsSendMany):
        pytest.skip("this backend has no send_many")

    assert mailbox.send_many([]) == []
    ids = mailbox.send_many([f"b{i}" for i in range(25)], reply_to=replies)

    got: list[Message[Any, Any]] = []
    while batch := receive_all(mailbox):
        got += batch
    assert [m.body for m in got] == [f"b{i}" for i in range(25)]
    assert [m.id for m in got] == ids
    assert {m.reply_to_name for m in got} == {replies.name}
    later = mailbox.send_many(["late"], delay=SHORT)
    assert receive_all(mailbox) == []
    harness.advance(PAST)
    assert [m.id for m in receive_all(mailbox)] == later


def test_acknowledge_all_settles_a_batch_and_returns_the_stale(harness: Harness) -> None:
    mailbox = harness.new("ack-all")
    for body in ("a", "b", "c", "d"):
        mailbox.send(body)
    first = receive_all(mailbox, visibility_timeout=SHORT)
    first[0].acknowledge()  # its handle is stale for the batch below
    harness.advance(PAST)  # the other three come back under new handles
    second = receive_all(mailbox)

    stale = acknowledge_all([*first, *second])

    assert sorted(m.body for m in stale) == ["a", "b", "c", "d"]  # every first delivery
    assert [m.settled for m in second] == [True, True, True]
    assert mailbox.approximate_count() == 0
    assert acknowledge_all([]) == []
