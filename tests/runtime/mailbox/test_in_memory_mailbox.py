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
