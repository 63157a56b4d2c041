"""The viewer's data while it is being built: `wink debug` serves its page meanwhile.

Reading and indexing a run of 100,000 results takes a second or two. `ViewerServer`
checks the target at once (`ViewerData.prepare`: a missing path or a directory without
runs is refused before anything is served), then builds the index on a background
thread while it binds, prints its URL and serves: the browser loads the page and its
scripts in the meantime, and its first API requests wait for the index
(`PendingData.get`). `/api/info` answers at once from what `prepare` found.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from weakincentives.errors import ViewerError

from ._viewer_data import ViewerData

__all__ = ["PendingData"]


class PendingData:
    """A `ViewerData` built on a background thread (then warmed, `ViewerData.warm`).

    Args:
        target: What to show (see `ViewerData.open`).
        on_error: Called (on the background thread) with the error when the build fails.

    Raises:
        ViewerError: `target` is none of the accepted kinds (checked before returning).
    """

    def __init__(
        self, target: str | Path, *, on_error: Callable[[ViewerError], None] | None = None
    ) -> None:
        self.info, build = ViewerData.prepare(target)
        """What `ViewerData.info` will give, known before the index is built."""
        self._data: ViewerData | None = None
        self._error: ViewerError | None = None
        self._done = threading.Event()
        self._on_error = on_error
        self._thread = threading.Thread(
            target=self._build, args=(build,), name="wink-debug-index", daemon=True
        )
        self._thread.start()

    def _build(self, build: Callable[[], ViewerData]) -> None:
        try:
            data = build()
        except ViewerError as exc:
            self._fail(exc)
        except Exception as exc:  # reported to every request, and to the command
            self._fail(ViewerError(f"cannot index {self.info['target']}: {exc!r}"))
        else:
            self._data = data
            self._done.set()
            data.warm()  # the landing page is made while the browser asks for it

    def _fail(self, error: ViewerError) -> None:
        self._error = error
        self._done.set()
        if self._on_error is not None:
            self._on_error(error)

    @property
    def error(self) -> ViewerError | None:
        """Why the build failed (None while it runs, or when it succeeded)."""
        return self._error

    def get(self, timeout: float | None = None) -> ViewerData:
        """The data, once built (waits for it).

        Raises:
            ViewerError: the build failed (its message), or `timeout` passed first.
        """
        if not self._done.wait(timeout):
            raise ViewerError(f"the index of {self.info['target']} is not built yet")
        if self._data is None:
            assert self._error is not None  # done, and not built: it failed
            raise ViewerError(str(self._error)) from self._error
        return self._data
