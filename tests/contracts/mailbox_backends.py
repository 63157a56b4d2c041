"""The mailbox backends the contract suite runs against: add a backend here, once.

Each entry opens a `Harness`: it makes mailboxes of its backend and moves that
backend's time forward (a `FakeClock` for in-process backends; a real short sleep for
backends that use server time, such as Redis).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest

from weakincentives.clock import FakeClock
from weakincentives.runtime.mailbox import (
    CollectingMailbox,
    FakeMailbox,
    InMemoryMailbox,
    Mailbox,
    MailboxResolver,
)


class Harness(Protocol):
    """What the contract suite needs from a backend."""

    def new(
        self, name: str, *, reply_resolver: MailboxResolver[Any] | None = None
    ) -> Mailbox[Any, Any]:
        """Return a fresh, empty mailbox (names are unique within one test)."""
        ...

    def advance(self, seconds: float) -> None:
        """Move the backend's time forward by at least `seconds`."""
        ...

    def close(self) -> None:
        """Release everything the harness made."""
        ...


MailboxClass = Callable[..., Mailbox[Any, Any]]


class InProcessHarness:
    """Mailboxes held in this process, all on one `FakeClock`."""

    def __init__(self, mailbox_class: MailboxClass) -> None:
        self.clock = FakeClock()
        self._mailbox_class = mailbox_class
        self._made: list[Mailbox[Any, Any]] = []

    def new(
        self, name: str, *, reply_resolver: MailboxResolver[Any] | None = None
    ) -> Mailbox[Any, Any]:
        mailbox = self._mailbox_class(name, clock=self.clock, reply_resolver=reply_resolver)
        self._made.append(mailbox)
        return mailbox

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def close(self) -> None:
        for mailbox in self._made:
            mailbox.close()


@dataclass(frozen=True, slots=True)
class Backend:
    """One backend under contract."""

    id: str
    open: Callable[[], Harness]
    marks: tuple[pytest.MarkDecorator, ...] = field(default=())
    model_examples: int = 100
    """Examples for the state-machine test (lower it where `advance` really sleeps)."""


def redis_harness() -> Harness:
    """A `RedisMailbox` harness on the shared test server (skips without Redis, fails in CI)."""
    from tests.helpers.redis_server import RedisHarness  # imports redis only when used

    return RedisHarness.open()


BACKENDS: list[Backend] = [
    Backend("memory", lambda: InProcessHarness(InMemoryMailbox)),
    Backend("fake", lambda: InProcessHarness(FakeMailbox)),
    Backend("collecting", lambda: InProcessHarness(CollectingMailbox)),
    Backend("redis", redis_harness, marks=(pytest.mark.redis,), model_examples=10),
]
"""Every backend the mailbox contract suite and state machine run against."""


def backend_params() -> list[Any]:
    """`BACKENDS` as `pytest.param`s, for `@pytest.fixture(params=...)`."""
    return [pytest.param(backend, id=backend.id, marks=backend.marks) for backend in BACKENDS]
