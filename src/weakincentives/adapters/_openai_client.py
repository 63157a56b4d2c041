"""The clients behind `OpenAIAdapter`: making them, and keeping the key out of the cache."""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import AsyncGenerator

import openai

from weakincentives.errors import ConfigurationError

__all__ = ["LoopClients", "make_client"]

_NO_KEY = "no-key"
"""Sent as the key to a `base_url` server when none is configured (local servers need none)."""
_log = logging.getLogger("weakincentives.adapters.openai")


def make_client(
    client: openai.OpenAI | None, *, base_url: str | None, api_key: str | None
) -> openai.OpenAI:
    if client is not None:
        if base_url is not None or api_key is not None:
            raise ConfigurationError(
                "OpenAIAdapter takes either client= or base_url=/api_key=, not both; "
                "configure the client instead",
            )
        # Retries are ours (clock-driven, deadline-aware); the SDK's would sleep for real.
        return client.with_options(max_retries=0)
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if api_key is None:
        if base_url is None:
            raise ConfigurationError(
                "OpenAIAdapter needs an API key for OpenAI: pass api_key='...' or set "
                "OPENAI_API_KEY (for a local server, pass base_url= or set OPENAI_BASE_URL)",
            )
        api_key = _NO_KEY
    try:
        return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0)
    except openai.OpenAIError as exc:
        raise ConfigurationError(f"cannot create the OpenAI client: {exc}") from exc


class LoopClients:
    """One `openai.AsyncOpenAI` per event loop, closed when its loop shuts down.

    An async HTTP client belongs to the event loop it first ran on: its pooled
    connections cannot be reused from another loop (each `asyncio.run` is a new one).
    The client made for a loop is closed by an async generator parked on that loop:
    `asyncio.run` (and anyio) finalize live async generators at shutdown, which closes
    the client's connections before the loop closes.

    Args:
        sync_client: The adapter's sync client, whose key, URL and timeout are copied.
        given: A ready async client to use on every loop instead (not closed here).
    """

    def __init__(self, sync_client: openai.OpenAI, given: openai.AsyncOpenAI | None) -> None:
        self._sync = sync_client
        self._given = given.with_options(max_retries=0) if given is not None else None
        # Per loop: its client and the parked generator that closes it. Weak keys: a
        # loop that is gone takes its entry along; several loops (threads) may be live.
        self._by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[openai.AsyncOpenAI, AsyncGenerator[None, None]]
        ] = weakref.WeakKeyDictionary()
        self._unbound: openai.AsyncOpenAI | None = None  # trio: no asyncio loop to bind to

    async def get(self) -> openai.AsyncOpenAI:
        """The async client of the running event loop (made on first use)."""
        if self._given is not None:
            return self._given
        loop = _running_loop()
        if loop is None:  # trio: one client for every run, closed by `aclose`
            if self._unbound is None:
                self._unbound = self._make()
            return self._unbound
        entry = self._by_loop.get(loop)
        if entry is None:
            client = self._make()
            closer = _close_at_shutdown(client)
            await anext(closer)  # parked until the loop finalizes it at shutdown
            entry = self._by_loop[loop] = (client, closer)
        return entry[0]

    async def aclose(self) -> None:
        """Close the client of the running loop now (it is remade if used again)."""
        loop = _running_loop()
        if loop is None:
            client, self._unbound = self._unbound, None
            if client is not None:
                await client.close()
            return
        entry = self._by_loop.pop(loop, None)
        if entry is not None:
            await entry[1].aclose()  # runs its `finally`: closes the client

    def _make(self) -> openai.AsyncOpenAI:
        sync = self._sync
        return openai.AsyncOpenAI(
            api_key=sync.api_key, base_url=sync.base_url, organization=sync.organization,
            project=sync.project, timeout=sync.timeout, max_retries=0,
        )  # fmt: skip


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _close_at_shutdown(client: openai.AsyncOpenAI) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.close()
