"""Reply-to resolvers and the in-memory mailbox factory."""

from __future__ import annotations

from typing import Any

import pytest

from weakincentives.clock import FakeClock
from weakincentives.errors import MailboxResolutionError
from weakincentives.runtime.mailbox import (
    CompositeResolver,
    InMemoryMailbox,
    InMemoryMailboxFactory,
    Mailbox,
    MailboxFactory,
    MailboxResolver,
    RegistryResolver,
)


def test_registry_resolver_finds_registered_mailboxes() -> None:
    first: InMemoryMailbox[str, None] = InMemoryMailbox("first")
    second: InMemoryMailbox[str, None] = InMemoryMailbox("second")
    resolver: RegistryResolver[str] = RegistryResolver({"first": first})
    resolver.register(second)
    resolver.register(second, name="alias")

    assert resolver.resolve("first") is first
    assert resolver.resolve("second") is second
    assert resolver.resolve("alias") is second
    assert resolver.get("missing") is None


def test_registry_resolver_names_what_it_knows_when_a_name_is_missing() -> None:
    resolver: RegistryResolver[str] = RegistryResolver({"a": InMemoryMailbox("a")})

    with pytest.raises(MailboxResolutionError, match=r"'missing'.*\['a'\]"):
        resolver.resolve("missing")


class RecordingFactory:
    def __init__(self) -> None:
        self.created: list[str] = []

    def create(self, name: str) -> Mailbox[str, Any]:
        self.created.append(name)
        return InMemoryMailbox(name)


def test_composite_resolver_prefers_the_registry_then_asks_the_factory() -> None:
    registered: InMemoryMailbox[str, None] = InMemoryMailbox("known")
    factory = RecordingFactory()
    resolver: CompositeResolver[str] = CompositeResolver(
        registry={"known": registered}, factory=factory
    )

    assert resolver.resolve("known") is registered
    made = resolver.resolve("eval-run-1")

    assert made.name == "eval-run-1"
    assert factory.created == ["eval-run-1"]


def test_composite_resolver_without_factory_explains_the_fix() -> None:
    resolver: CompositeResolver[str] = CompositeResolver(registry={})

    with pytest.raises(MailboxResolutionError, match="factory="):
        resolver.resolve("anything")


def test_composite_resolver_register_adds_to_its_registry() -> None:
    resolver: CompositeResolver[str] = CompositeResolver()
    mailbox: InMemoryMailbox[str, None] = InMemoryMailbox("late")
    resolver.register(mailbox)

    assert resolver.resolve("late") is mailbox


def test_factory_returns_one_shared_mailbox_per_name() -> None:
    factory: InMemoryMailboxFactory[str] = InMemoryMailboxFactory(clock=FakeClock(), max_size=3)

    results = factory.create("results")

    assert factory.create("results") is results
    assert factory.resolve("results") is results
    assert factory.names() == ["results"]
    assert isinstance(factory.create("other"), InMemoryMailbox)
    assert factory.names() == ["other", "results"]


def test_names_route_replies_between_factory_mailboxes() -> None:
    factory: InMemoryMailboxFactory[Any] = InMemoryMailboxFactory()
    requests = factory.create("requests")
    requests.send("question", reply_to="eval-run-7")

    message = requests.receive()[0]
    message.reply("answer")

    assert [m.body for m in factory.create("eval-run-7").receive()] == ["answer"]


def test_guide_wiring_resolves_names_through_a_factory() -> None:
    factory: InMemoryMailboxFactory[Any] = InMemoryMailboxFactory()
    resolver: CompositeResolver[Any] = CompositeResolver(registry={}, factory=factory)
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(
        name="eval-requests", reply_resolver=resolver
    )
    results = factory.create("eval-run-abc")
    requests.send("sample", reply_to=results)

    requests.receive()[0].reply("result")

    assert [m.body for m in results.receive()] == ["result"]


def test_resolvers_and_factories_satisfy_their_protocols() -> None:
    factory: InMemoryMailboxFactory[str] = InMemoryMailboxFactory()
    as_factory: MailboxFactory[str] = factory
    resolvers: list[MailboxResolver[str]] = [
        factory,
        RegistryResolver({"x": factory.create("x")}),
        CompositeResolver(factory=as_factory),
    ]

    assert all(r.resolve("x") is factory.create("x") for r in resolvers)
