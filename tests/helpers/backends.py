"""Mailboxes of one test on one backend: in-memory, or a real Redis server.

Tests that must hold on both take a `backend` fixture made from `Backend` (parametrized
over `"memory"` and `"redis"`, the latter marked `redis`): every mailbox it makes lives
in a namespace of its own, deleted when the test ends.
"""

from __future__ import annotations

from typing import Any

from tests.helpers.redis_server import delete_namespace, shared_redis, unique_namespace
from weakincentives.runtime.mailbox import InMemoryMailbox, Mailbox

__all__ = ["Backend"]


class Backend:
    """Makes the mailboxes of one test on one backend (`"memory"` or `"redis"`)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.namespace = unique_namespace()
        self.client: Any = shared_redis().client() if kind == "redis" else None

    def mailbox(self, name: str, body_type: Any = None) -> Mailbox[Any, Any]:
        """A mailbox called `name`; on Redis, decoding bodies as `body_type`."""
        if self.kind == "memory":
            return InMemoryMailbox(name)
        from weakincentives.contrib.mailbox import RedisMailbox

        return RedisMailbox(name, client=self.client, namespace=self.namespace, body_type=body_type)

    def close(self) -> None:
        """Delete the test's Redis keys and close its connection."""
        if self.client is not None:
            delete_namespace(self.client, self.namespace)
            self.client.close()
