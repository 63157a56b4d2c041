"""The git dirty flag of a new run, recorded when git answers (`LocalRun.attach`).

`git status` runs in the background as a run starts (`store.git_dirty_future()`); the
run does not wait for it. Its answer goes into `run.json` mid-run, so that a run that
crashes records it too, or, for a run that ends within `GRACE` of the answer, by
`finish` alone (one write of `run.json`, not two).
"""

from __future__ import annotations

import _thread
import logging
import threading
from concurrent.futures import Future
from typing import Any

from weakincentives.errors import RunStoreError

from ..store import RunHandle

__all__ = ["GRACE", "GitDirty"]

GRACE = 0.05
"""Seconds the run must still be going after git answered for a mid-run write."""

_log = logging.getLogger(__name__)


class GitDirty:
    """Records git's answer in `handle`'s manifest once, mid-run or at `final`.

    Args:
        handle: The new run.
        answer: git's pending answer (`True` dirty, `False` clean, `None` unknown).
    """

    def __init__(self, handle: RunHandle, answer: Future[bool | None]) -> None:
        self._handle = handle
        self._answer = answer
        self._finishing = threading.Event()  # `final` records the answer itself
        self._owner = threading.get_ident()  # the thread that attaches the run
        answer.add_done_callback(self._record)

    def _record(self, answer: Future[bool | None]) -> None:
        # In git's thread, a few milliseconds into the run. When git had answered already
        # (the callback runs at once, in the owner's thread), a helper thread waits out
        # the grace period instead: a short run then writes run.json once, at `finish`.
        # A failed write is no failure: `final` records it again.
        if threading.get_ident() == self._owner:
            _thread.start_new_thread(self._record, (answer,))
            return
        if self._finishing.wait(GRACE):
            return
        try:
            self._handle.record_provenance({"git_dirty": answer.result()})
        except RunStoreError as exc:
            _log.warning("cannot record the git dirty flag yet: %s", exc)

    def final(self) -> dict[str, Any]:
        """The manifest update `finish` writes: git's answer (waited for)."""
        self._finishing.set()
        return {"git_dirty": self._answer.result()}
