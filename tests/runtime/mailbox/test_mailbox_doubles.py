"""The shipped mailbox test doubles: CollectingMailbox and FakeMailbox."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from weakincentives.clock import FakeClock
from weakincentives.errors import (
    MailboxConnectionError,
    MailboxFullError,
    MessageDecodeError,
    ReceiptHandleExpiredError,
)
from weakincentives.runtime.mailbox import (
    CollectingMailbox,
    FakeMailbox,
    MailboxOperation,
    Message,
)


def test_collecting_mailbox_records_successful_sends_only() -> None:
    mailbox: CollectingMailbox[str, None] = CollectingMailbox(max_size=2)
    mailbox.send("a")
    mailbox.send("b", delay=5)

    with pytest.raises(MailboxFullError):
        mailbox.send("c")

    assert mailbox.sent == ["a", "b"]
    assert [m.body for m in mailbox.receive(max_messages=10)] == ["a"]
    assert repr(mailbox) == "CollectingMailbox(name='collecting')"


def in_flight(mailbox: FakeMailbox[str, None]) -> Message[str, None]:
    mailbox.send("job")
    return mailbox.receive(visibility_timeout=60)[0]


FAULTS: dict[MailboxOperation, Callable[[FakeMailbox[str, None]], object]] = {
    "send": lambda mb: mb.send("x"),
    "receive": lambda mb: mb.receive(),
    "approximate_count": lambda mb: mb.approximate_count(),
    "purge": lambda mb: mb.purge(),
    "acknowledge": lambda mb: in_flight(mb).acknowledge(),
    "nack": lambda mb: in_flight(mb).nack(),
    "extend_visibility": lambda mb: in_flight(mb).extend_visibility(10),
}


@pytest.mark.parametrize("operation", FAULTS)
def test_fail_next_fails_exactly_the_next_calls(operation: MailboxOperation) -> None:
    mailbox: FakeMailbox[str, None] = FakeMailbox(clock=FakeClock())
    mailbox.fail_next(operation, MailboxConnectionError("down"), times=2)
    call = FAULTS[operation]

    for _ in range(2):
        with pytest.raises(MailboxConnectionError, match="down"):
            call(mailbox)
    call(mailbox)

    assert mailbox.calls[operation] == 3


def test_failed_acknowledge_leaves_the_message_in_flight() -> None:
    mailbox: FakeMailbox[str, None] = FakeMailbox(clock=FakeClock())
    mailbox.fail_next_ack(MailboxConnectionError("lost"))
    message = in_flight(mailbox)

    with pytest.raises(MailboxConnectionError):
        message.acknowledge()
    assert not message.settled
    message.acknowledge()
    assert mailbox.approximate_count() == 0
    with pytest.raises(ReceiptHandleExpiredError):
        message.acknowledge()


def test_convenience_helpers_target_their_operation() -> None:
    mailbox: FakeMailbox[str, None] = FakeMailbox(clock=FakeClock())
    mailbox.fail_next_send(ValueError("no send"))
    mailbox.fail_next_receive(TimeoutError("no receive"))

    with pytest.raises(ValueError, match="no send"):
        mailbox.send("x")
    with pytest.raises(TimeoutError, match="no receive"):
        mailbox.receive()
    assert mailbox.approximate_count() == 0


def test_send_undecodable_delivers_a_poison_message() -> None:
    mailbox: FakeMailbox[dict[str, Any], str] = FakeMailbox(clock=FakeClock())
    mailbox.send_undecodable(b"\x00{not json", reason="bad JSON at byte 1", reply_to="results")
    mailbox.send({"ok": True})

    poison, good = mailbox.receive(max_messages=2)

    assert poison.raw_body == b"\x00{not json"
    assert poison.decode_error is not None
    assert poison.reply_to_name == "results"
    with pytest.raises(MessageDecodeError, match="bad JSON at byte 1"):
        _ = poison.body
    assert "decodable=False" in repr(poison)
    assert good.body == {"ok": True}
    assert good.decode_error is None
    poison.acknowledge()
    assert mailbox.approximate_count() == 1


class NullSettler:
    def acknowledge(self, receipt_handle: str) -> None:
        del receipt_handle

    def nack(self, receipt_handle: str, visibility_timeout: float) -> None:
        del receipt_handle, visibility_timeout

    def extend_visibility(self, receipt_handle: str, timeout: float) -> None:
        del receipt_handle, timeout


def test_backends_build_undecodable_messages_with_the_raw_payload() -> None:
    error = MessageDecodeError("field 'sample' is missing")
    message = Message[dict[str, Any], None].undecodable(
        id="m1",
        raw_body='{"sampel": 1}',
        error=error,
        receipt_handle="h1",
        delivery_count=3,
        enqueued_at=datetime(2024, 1, 1, tzinfo=UTC),
        settler=NullSettler(),
    )

    assert (message.raw_body, message.decode_error, message.delivery_count) == (
        '{"sampel": 1}',
        error,
        3,
    )
    with pytest.raises(MessageDecodeError) as raised:
        _ = message.body
    assert raised.value is error
