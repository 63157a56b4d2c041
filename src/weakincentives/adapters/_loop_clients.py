"""Async SDK clients kept per event loop, for the Anthropic and Gemini adapters.

An async HTTP client belongs to the event loop it first ran on: its pooled connections
cannot be reused from another loop (each `asyncio.run` is a new one). `PerLoop` makes
one client per running loop and closes it through an async generator parked on that
loop: `asyncio.run` (and anyio) finalize live async generators at shutdown, which closes
the client's connections before the loop closes. Under trio (no asyncio loop) one client
serves every run until `aclose`. (`OpenAIAdapter` has the same, in `_openai_client`.)
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["PerLoop"]

C = TypeVar("C")


class PerLoop(Generic[C]):
    """One async client per event loop (see the module docstring).

    Args:
        make: Makes a new client.
        close: Closes a client made by `make`.
    """

    def __init__(self, make: Callable[[], C], close: Callable[[C], Awaitable[object]]) -> None:
        self._make = make
        self._close = close
        # Weak keys: a loop that is gone takes its entry along; several loops (threads)
        # may be live at once.
        self._by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[C, AsyncGenerator[None, None]]
        ] = weakref.WeakKeyDictionary()
        self._unbound: C | None = None

    async def get(self) -> C:
        """The client of the running event loop (made on first use)."""
        loop = _running_loop()
        if loop is None:  # trio: one client for every run, closed by `aclose`
            if self._unbound is None:
                self._unbound = self._make()
            return self._unbound
        entry = self._by_loop.get(loop)
        if entry is None:
            client = self._make()
            closer = self._close_at_shutdown(client)
            await anext(closer)  # parked until the loop finalizes it at shutdown
            entry = self._by_loop[loop] = (client, closer)
        return entry[0]

    async def aclose(self) -> None:
        """Close the client of the running loop now (it is made again if used again)."""
        loop = _running_loop()
        if loop is None:
            client, self._unbound = self._unbound, None
            if client is not None:
                await self._close(client)
            return
        entry = self._by_loop.pop(loop, None)
        if entry is not None:
            await entry[1].aclose()  # runs its `finally`: closes the client

    async def _close_at_shutdown(self, client: C) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self._close(client)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
