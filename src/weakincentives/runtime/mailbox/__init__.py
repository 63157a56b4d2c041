"""Mailboxes: point-to-point queues with visibility timeouts and reply-to routing.

`Mailbox` is the protocol every backend implements (`InMemoryMailbox` here,
`RedisMailbox` in `weakincentives.contrib.mailbox`). Delivery is at-least-once: a
received message stays invisible until it is acknowledged, nacked, or its visibility
timeout passes. Replies go to the sender's `reply_to`, a mailbox or a name resolved by a
`MailboxResolver`. `CollectingMailbox` and `FakeMailbox` are test doubles.
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from weakincentives.runtime.mailbox._in_memory import InMemoryMailbox, InMemoryMailboxFactory
    from weakincentives.runtime.mailbox._limits import (
        MAX_MESSAGES,
        MAX_TIMEOUT_SECONDS,
        MAX_WAIT_SECONDS,
        check_receive_arguments,
        check_timeout,
    )
    from weakincentives.runtime.mailbox._resolvers import CompositeResolver, RegistryResolver
    from weakincentives.runtime.mailbox._testing import (
        CollectingMailbox,
        FakeMailbox,
        MailboxOperation,
    )
    from weakincentives.runtime.mailbox._types import (
        Mailbox,
        MailboxFactory,
        MailboxResolver,
        Message,
        ReceiptSettler,
        SupportsAcknowledgeMany,
        SupportsSendAndAcknowledge,
        SupportsSendMany,
        acknowledge_all,
        send_and_acknowledge,
    )


__all__ = [
    "MAX_MESSAGES",
    "MAX_TIMEOUT_SECONDS",
    "MAX_WAIT_SECONDS",
    "CollectingMailbox",
    "CompositeResolver",
    "FakeMailbox",
    "InMemoryMailbox",
    "InMemoryMailboxFactory",
    "Mailbox",
    "MailboxFactory",
    "MailboxOperation",
    "MailboxResolver",
    "Message",
    "ReceiptSettler",
    "RegistryResolver",
    "SupportsAcknowledgeMany",
    "SupportsSendAndAcknowledge",
    "SupportsSendMany",
    "acknowledge_all",
    "check_receive_arguments",
    "check_timeout",
    "send_and_acknowledge",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.runtime.mailbox._in_memory": ("InMemoryMailbox", "InMemoryMailboxFactory"),
        "weakincentives.runtime.mailbox._limits": (
            "MAX_MESSAGES",
            "MAX_TIMEOUT_SECONDS",
            "MAX_WAIT_SECONDS",
            "check_receive_arguments",
            "check_timeout",
        ),
        "weakincentives.runtime.mailbox._resolvers": ("CompositeResolver", "RegistryResolver"),
        "weakincentives.runtime.mailbox._testing": (
            "CollectingMailbox",
            "FakeMailbox",
            "MailboxOperation",
        ),
        "weakincentives.runtime.mailbox._types": (
            "Mailbox",
            "MailboxFactory",
            "MailboxResolver",
            "Message",
            "ReceiptSettler",
            "SupportsAcknowledgeMany",
            "SupportsSendAndAcknowledge",
            "SupportsSendMany",
            "acknowledge_all",
            "send_and_acknowledge",
        ),
    },
)
