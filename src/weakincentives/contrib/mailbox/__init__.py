"""Redis-backed mailboxes: the same `Mailbox` protocol, shared across processes.

Use `RedisMailbox` when workers run on several machines (or must survive a restart);
`RedisMailboxFactory` creates them by name and resolves reply-to names. They pass the
same contract suite as `weakincentives.runtime.mailbox.InMemoryMailbox`. Needs the
`[redis]` extra (`pip install 'weakincentives[redis]'`).
"""

from weakincentives.contrib.mailbox._codec import JsonCodec, MailboxCodec
from weakincentives.contrib.mailbox._redis import (
    DEFAULT_QUEUE_TTL,
    RedisMailbox,
    RedisMailboxFactory,
)

__all__ = [
    "DEFAULT_QUEUE_TTL",
    "JsonCodec",
    "MailboxCodec",
    "RedisMailbox",
    "RedisMailboxFactory",
]
