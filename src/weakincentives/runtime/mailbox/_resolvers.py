"""Reply-to resolvers: from a mailbox name to a mailbox."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from weakincentives.errors import MailboxResolutionError
from weakincentives.runtime.mailbox._types import Mailbox, MailboxFactory

__all__ = ["CompositeResolver", "RegistryResolver"]

T = TypeVar("T")


class RegistryResolver(Generic[T]):
    """Resolves names from a fixed set of mailboxes.

    Args:
        registry: Mailboxes by name (copied).
    """

    def __init__(self, registry: Mapping[str, Mailbox[T, Any]] | None = None) -> None:
        self._lock = threading.Lock()
        self._registry: dict[str, Mailbox[T, Any]] = dict(registry or {})

    def register(self, mailbox: Mailbox[T, Any], *, name: str | None = None) -> None:
        """Add `mailbox` under `name` (default: its own name), replacing any previous one."""
        with self._lock:
            self._registry[name or mailbox.name] = mailbox

    def get(self, name: str) -> Mailbox[T, Any] | None:
        """Return the mailbox registered as `name`, or None."""
        with self._lock:
            return self._registry.get(name)

    def resolve(self, name: str) -> Mailbox[T, Any]:
        """Return the mailbox registered as `name`.

        Raises:
            MailboxResolutionError: No mailbox is registered under that name.
        """
        mailbox = self.get(name)
        if mailbox is None:
            with self._lock:
                known = sorted(self._registry)
            raise MailboxResolutionError(
                f"no mailbox named {name!r} is registered (known: {known}); register it "
                "or use a CompositeResolver with a factory that can create it",
            )
        return mailbox


class CompositeResolver(Generic[T]):
    """Resolves names from a registry first, then by asking a factory to create them.

    Args:
        registry: Mailboxes by name, consulted first (copied).
        factory: Creates mailboxes for names the registry does not hold.

    Examples:
        ```python
        resolver = CompositeResolver(registry={}, factory=InMemoryMailboxFactory())
        ```
    """

    def __init__(
        self,
        registry: Mapping[str, Mailbox[T, Any]] | None = None,
        factory: MailboxFactory[T] | None = None,
    ) -> None:
        self._registry = RegistryResolver(registry)
        self._factory = factory

    def register(self, mailbox: Mailbox[T, Any], *, name: str | None = None) -> None:
        """Add `mailbox` to the registry under `name` (default: its own name)."""
        self._registry.register(mailbox, name=name)

    def resolve(self, name: str) -> Mailbox[T, Any]:
        """Return the registered mailbox called `name`, else the factory's.

        Raises:
            MailboxResolutionError: Neither the registry nor a factory has it.
        """
        mailbox = self._registry.get(name)
        if mailbox is not None:
            return mailbox
        if self._factory is None:
            raise MailboxResolutionError(
                f"no mailbox named {name!r} is registered and this CompositeResolver has "
                "no factory; pass factory= to create mailboxes on demand",
            )
        return self._factory.create(name)
