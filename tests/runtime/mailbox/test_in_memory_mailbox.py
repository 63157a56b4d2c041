"""InMemoryMailbox behaviour beyond the shared contract (tests/contracts)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from weakincentives.clock import SYSTEM_CLOCK, FakeClock
from weakincentives.errors import (
    MailboxArgumentError,
    MailboxClosedError,
    MailboxFullError,
    MailboxResolutionError,
)
from weakincentives.runtime.mailbox import InMemoryMailbox, Mailbox, Message


@dataclass(frozen=True)
class EvalRequest:
    sample_id: str


@dataclass(frozen=True)
class EvalResult:
    sample_id: str
    passed: bool


def test_generic_mailbox_satisfies_the_protocol() -> None:
    requests: Mailbox[EvalRequest, EvalResult] = InMemoryMailbox[EvalRequest, EvalResult](
        name="eval-requests"
    )
    results: InMemoryMailbox[EvalResult, None] = InMemoryMailbox(name="eval-results")
    requests.send(EvalRequest("s1"), reply_to=results)

    message = requests.receive()[0]
    message.reply(EvalResult(message.body.sample_id, passed=True))

    assert isinstance(requests, Mailbox)
    assert [m.body for m in results.receive()] == [EvalResult("s1", passed=True)]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"name": ""}, "non-empty name"), ({"name": "x", "max_size": 0}, "max_size")],
)
def test_bad_construction_is_rejected(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(MailboxArgumentError, match=match):
        InMemoryMailbox(**kwargs)


def test_max_size_bounds_held_messages() -> None:
    mailbox: InMemoryMailbox[int, None] = InMemoryMailbox("small", max_size=2)
    mailbox.send(1)
    mailbox.send(2)

    with pytest.raises(MailboxFullError, match="max_size of 2"):
        mailbox.send(3)
    mailbox.receive()[0].acknowledge()
    mailbox.send(3)
    assert mailbox.approximate_count() == 2


def test_empty_reply_to_name_is_rejected() -> None:
    mailbox: InMemoryMailbox[str, str] = InMemoryMailbox("requests")

    with pytest.raises(MailboxArgumentError, match="reply_to"):
        mailbox.send("q", reply_to="")


def test_reply_to_name_without_a_resolver_says_what_to_configure() -> None:
    mailbox: InMemoryMailbox[str, str] = InMemoryMailbox("requests")
    mailbox.send("q", reply_to="results")
    message = mailbox.receive()[0]

    assert message.reply_to_name == "results"
    with pytest.raises(MailboxResolutionError, match="reply_resolver="):
        message.reply("a")


class CountingResolver:
    def __init__(self, mailbox: Mailbox[str, Any]) -> None:
        self.mailbox = mailbox
        self.calls = 0

    def resolve(self, name: str) -> Mailbox[str, Any]:
        self.calls += 1
        return self.mailbox


def test_reply_to_name_is_resolved_once_per_delivery() -> None:
    results: InMemoryMailbox[str, None] = InMemoryMailbox("results")
    resolver = CountingResolver(results)
    requests: InMemoryMailbox[str, str] = InMemoryMailbox("requests", reply_resolver=resolver)
    requests.send("q", reply_to="results")
    message = requests.receive()[0]

    for step in ("progress", "done"):
        message.reply(step)

    assert resolver.calls == 1
    assert results.approximate_count() == 2


def test_nacked_message_queues_behind_already_visible_ones() -> None:
    clock = FakeClock()
    mailbox: InMemoryMailbox[str, None] = InMemoryMailbox("order", clock=clock)
    mailbox.send("a")
    first = mailbox.receive()[0]
    mailbox.send("b")
    clock.advance(1)

    first.nack()  # visible from now on: after "b", visible since its send

    assert [m.body for m in mailbox.receive(max_messages=10)] == ["b", "a"]


def test_sends_delays_and_nacks_interleave_by_the_time_they_became_visible() -> None:
    clock = FakeClock()
    mailbox: InMemoryMailbox[str, None] = InMemoryMailbox("interleave", clock=clock)
    mailbox.send("late", delay=5)  # visible at 5
    mailbox.send("a")  # visible at 0
    clock.advance(1)
    mailbox.send("b")  # visible at 1
    taken = mailbox.receive()[0]
    assert taken.body == "a"
    clock.advance(1)
    taken.nack()  # "a" visible again at 2
    clock.advance(1)
    mailbox.send("c")  # visible at 3
    clock.advance(3)
    mailbox.send("d")  # visible at 6

    bodies = [m.body for m in mailbox.receive(max_messages=10)]

    assert bodies == ["b", "a", "c", "late", "d"]


def test_settled_deliveries_do_not_pile_up_while_one_stays_in_flight() -> None:
    clock = FakeClock()
    mailbox: InMemoryMailbox[int, None] = InMemoryMailbox("churn", clock=clock)
    mailbox.send(-1)
    kept = mailbox.receive(visibility_timeout=60)[0]
    for i in range(1000):
        mailbox.send(i)
        mailbox.receive(visibility_timeout=60)[0].acknowledge()

    # One delivery in flight: the deadline heap was rebuilt from it, not grown to 1001
    # (white box: memory of a long-running worker's mailbox is the point).
    assert len(mailbox._expiries) <= 2 * 1 + 64
    clock.advance(61)
    again = mailbox.receive()  # the kept delivery still expires
    assert [m.body for m in again] == [-1]
    assert again[0].delivery_count == 2
    assert kept.receipt_handle != again[0].receipt_handle


def test_send_many_is_send_for_each_body_in_order() -> None:
    clock = FakeClock()
    mailbox: InMemoryMailbox[int, None] = InMemoryMailbox("many", clock=clock)
    assert mailbox.send_many([]) == []
    mailbox.send(0)

    ids = mailbox.send_many(range(1, 4), reply_to="answers")
    later = mailbox.send_many([9], delay=5)

    assert len(set(ids + later)) == 4
    got = mailbox.receive(max_messages=10)
    assert [(m.body, m.id, m.reply_to_name) for m in got[1:]] == [
        (i, ids[i - 1], "answers") for i in range(1, 4)
    ]
    assert got[0].body == 0
    clock.advance(5)
    assert [(m.body, m.id) for m in mailbox.receive()] == [(9, later[0])]


def test_send_many_rejects_bad_arguments_and_stops_at_max_size() -> None:
    mailbox: InMemoryMailbox[int, None] = InMemoryMailbox("bounded", max_size=3)
    with pytest.raises(MailboxArgumentError, match="delay"):
        mailbox.send_many([1], delay=-1)
    with pytest.raises(MailboxArgumentError, match="reply_to"):
        mailbox.send_many([1], reply_to="")
    assert mailbox.approximate_count() == 0

    with pytest.raises(MailboxFullError, match="3 of a batch of 5 were sent"):
        mailbox.send_many(range(5))

    assert [m.body for m in mailbox.receive(max_messages=10)] == [0, 1, 2]
    mailbox.close()
    with pytest.raises(MailboxClosedError):
        mailbox.send_many([1])


@pytest.mark.parametrize("delay", [None, "0"])
def test_a_delay_that_is_not_a_number_stores_nothing(delay: Any) -> None:
    mailbox: InMemoryMailbox[int, None] = InMemoryMailbox("typed")
    with pytest.raises(TypeError):
        mailbox.send(1, delay=delay)
    with pytest.raises(TypeError):
        mailbox.send_many([1], delay=delay)
    assert mailbox.approximate_count() == 0


def test_send_many_wakes_a_long_poll() -> None:
    mailbox: InMemoryMailbox[int, None] = InMemoryMailbox("wake")
    got: list[int] = []
    poller = threading.Thread(
        target=lambda: got.extend(m.body for m in mailbox.receive(wait_time_seconds=10))
    )
    poller.start()
    deadline = time.monotonic() + 10
    while not mailbox._waiting and time.monotonic() < deadline:  # the poll is waiting
        time.sleep(0.001)
    started = time.monotonic()
    mailbox.send_many([7, 8])
    poller.join()
    assert got == [7]
    assert time.monotonic() - started < 5  # woken, not timed out


def test_settled_and_repr_describe_the_delivery() -> None:
    mailbox: InMemoryMailbox[str, None] = InMemoryMailbox("repr")
    mailbox.send("x")
    message = mailbox.receive()[0]

    assert not message.settled
    assert repr(message).startswith(f"Message(id={message.id!r}, delivery_count=1")
    assert repr(mailbox) == "InMemoryMailbox(name='repr')"
    message.nack()
    assert message.settled


def test_long_poll_wakes_when_a_delayed_message_becomes_visible() -> None:
    mailbox: InMemoryMailbox[str, None] = InMemoryMailbox("delayed", clock=SYSTEM_CLOCK)
    mailbox.send("soon", delay=0.05)
    started = time.monotonic()

    messages = mailbox.receive(wait_time_seconds=5)

    assert [m.body for m in messages] == ["soon"]
    assert 0.04 <= time.monotonic() - started < 2


def test_long_poll_under_a_fake_clock_ends_after_its_real_wait() -> None:
    mailbox: InMemoryMailbox[str, None] = InMemoryMailbox("fake-poll", clock=FakeClock())
    mailbox.send("later", delay=60)
    started = time.monotonic()

    assert mailbox.receive(wait_time_seconds=0.05) == []
    assert time.monotonic() - started < 2


def test_concurrent_consumers_each_get_a_message_exactly_once() -> None:
    mailbox: InMemoryMailbox[int, None] = InMemoryMailbox("busy")
    total = 300
    seen: list[int] = []
    lock = threading.Lock()

    def consume() -> None:
        while True:
            batch: list[Message[int, None]] = list(
                mailbox.receive(max_messages=3, visibility_timeout=60, wait_time_seconds=0.05)
            )
            if not batch:
                return
            for message in batch:
                with lock:
                    seen.append(message.body)
                message.acknowledge()

    consumers = [threading.Thread(target=consume) for _ in range(4)]
    for thread in consumers:
        thread.start()
    for n in range(total):
        mailbox.send(n)
    for thread in consumers:
        thread.join(timeout=30)

    assert sorted(seen) == list(range(total))
    assert mailbox.approximate_count() == 0
