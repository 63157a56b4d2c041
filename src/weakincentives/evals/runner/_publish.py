"""A new run's manifest, written once its first samples are under way (`DeferredManifest`).

A fresh process pays once for what `run.json` holds: the provenance (the redactor that
cleans the command line and the adapters' descriptions, the serializers, `git status`).
`LocalRun` creates the run's directory and results file before any sample starts (a store
that cannot be written fails then) and writes `run.json` with `DeferredManifest.publish`
while the first samples wait on their calls: never after the first result, which the
handle holds back until it is written (`RunHandle.publish`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

import anyio.lowlevel

from weakincentives import serde

from ..store import RunHandle, RunProvenance, git_dirty_future
from ._git_dirty import GitDirty

__all__ = ["DeferredManifest"]


class DeferredManifest:
    """The provenance of a new run, collected when its `run.json` is written.

    Args:
        provenance: Collects the provenance (`RunProvenance.collect`), given git's dirty
            flag as `git_dirty=` when git has answered already (else None: `GitDirty`
            records it when it comes).
        ask_git: Whether to ask git for the dirty flag (the code is in a checkout).
    """

    def __init__(self, provenance: Callable[..., RunProvenance], *, ask_git: bool) -> None:
        self._provenance = provenance
        self._ask_git = ask_git
        self._dirty: Future[bool | None] | None = None
        self._included = False  # git's answer is in the provenance written
        self._published = False
        self._git_dirty: GitDirty | None = None
        self.handle: RunHandle | None = None
        """The run (set by `LocalRun.create`)."""

    def collect(self) -> Mapping[str, Any]:
        """The provenance, JSON form (called by the handle as it writes `run.json`)."""
        dirty, answer = self._dirty, None
        if dirty is not None and dirty.done():
            answer, self._included = dirty.result(), True
        provenance: Mapping[str, Any] = serde.dump(self._provenance(git_dirty=answer))
        return provenance

    def publish(self) -> None:
        """Ask git in the background and write `run.json` (once; see the module docs)."""
        handle = self.handle
        if self._published or handle is None:
            return
        self._published = True
        if self._ask_git:
            self._dirty = git_dirty_future()  # started now: it runs while samples wait
        handle.publish()  # calls `collect`, unless a result made the handle publish first
        if self._dirty is not None and not self._included:
            self._git_dirty = GitDirty(handle, self._dirty)

    async def publish_soon(self) -> None:
        """`publish` after one yield.

        Started before a run's worker tasks, it runs once each has taken its first step
        (its first sample waits on its call).
        """
        await anyio.lowlevel.checkpoint()
        self.publish()

    def final(self) -> dict[str, Any]:
        """What `finish` adds to the manifest: git's answer, if not recorded yet (waited for)."""
        return {} if self._git_dirty is None else {"provenance": self._git_dirty.final()}
