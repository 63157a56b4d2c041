"""Log capture for bundles: one handler on the root logger, routed by context.

Samples run concurrently (threads in a pool, or tasks), so a capture cannot simply take
every record the root logger sees. A `ContextVar` holds the captures active in the
current context; the handler hands each record to the captures of the context that
emitted it. Each thread starts with an empty context, so concurrent samples never mix
their logs; work a sample starts in another thread is captured when that thread runs
in a copy of the sample's context (`contextvars.copy_context().run`, `asyncio.to_thread`,
`anyio.to_thread.run_sync`), not when it runs in a bare thread.
"""

from __future__ import annotations

import logging
import threading
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any

__all__ = ["BUNDLE_LOGGER_NAME", "LogCapture"]

BUNDLE_LOGGER_NAME = "weakincentives.runtime.bundle"
"""Logger of the bundle machinery itself; never captured into a bundle."""

_ACTIVE: ContextVar[tuple[LogCapture, ...]] = ContextVar(
    "weakincentives_bundle_log_captures", default=()
)
_FORMATTER = logging.Formatter()


class LogCapture:
    """Collects the log records emitted in the current context while it is active.

    Args:
        level: Records below this level are ignored.
        max_records: Records past this many are counted in `dropped`, not kept.
    """

    def __init__(self, *, level: int, max_records: int) -> None:
        self._level = level
        self._max = max_records
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._dropped = 0
        self._token: Token[tuple[LogCapture, ...]] | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        """Captured records as dicts: time, level, logger, message, thread, exception."""
        with self._lock:
            return list(self._records)

    @property
    def dropped(self) -> int:
        """Records that were not kept because `max_records` was reached."""
        with self._lock:
            return self._dropped

    def start(self) -> None:
        """Start capturing records emitted in the current context."""
        _ROUTER.acquire(self._level)
        self._token = _ACTIVE.set((*_ACTIVE.get(), self))

    def stop(self) -> None:
        """Stop capturing (idempotent)."""
        if self._token is None:
            return
        try:
            _ACTIVE.reset(self._token)
        except ValueError:
            # Stopped from another context than the one that started it: drop just us.
            _ACTIVE.set(tuple(c for c in _ACTIVE.get() if c is not self))
        self._token = None
        _ROUTER.release()

    def add(self, record: logging.LogRecord) -> None:
        """Keep `record` if it is at or above the capture's level."""
        if record.levelno < self._level or record.name.startswith(BUNDLE_LOGGER_NAME):
            return
        with self._lock:
            if len(self._records) >= self._max:
                self._dropped += 1
                return
        row = _record_to_dict(record)
        with self._lock:
            self._records.append(row)


def _record_to_dict(record: logging.LogRecord) -> dict[str, Any]:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string must not lose the record
        message = f"{record.msg!r} % {record.args!r}"
    exception = None
    if record.exc_info:
        exception = _FORMATTER.formatException(record.exc_info)
    elif record.exc_text:
        exception = record.exc_text
    if record.stack_info:
        exception = f"{exception}\n{record.stack_info}" if exception else record.stack_info
    return {
        "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
        "level": record.levelname,
        "logger": record.name,
        "message": message,
        "thread": record.threadName,
        "exception": exception,
    }


class _RouterHandler(logging.Handler):
    """Hands each record to the captures active in the emitting context."""

    def handle(self, record: logging.LogRecord) -> bool:
        # No handler-wide lock (unlike `Handler.handle`): each capture locks itself, so
        # concurrent samples do not serialize their logging on this handler.
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        for capture in _ACTIVE.get():
            try:
                capture.add(record)
            except Exception:  # logging must never fail the code that logs
                self.handleError(record)


class _Router:
    """Installs the handler on the root logger while any capture is active.

    The root logger's level is lowered to the lowest requested capture level for as long
    as captures are active (records below a logger's effective level never reach any
    handler), and restored afterwards unless someone changed it meanwhile.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handler = _RouterHandler()
        self._users = 0
        self._saved_level: int | None = None
        self._set_level: int | None = None

    def acquire(self, level: int) -> None:
        root = logging.getLogger()
        with self._lock:
            if self._users == 0:
                root.addHandler(self._handler)
                self._saved_level = root.level
            self._users += 1
            if root.level != logging.NOTSET and root.level > level:
                root.setLevel(level)
                self._set_level = level

    def release(self) -> None:
        root = logging.getLogger()
        with self._lock:
            self._users -= 1
            if self._users > 0:
                return
            root.removeHandler(self._handler)
            if self._set_level is not None and root.level == self._set_level:
                root.setLevel(self._saved_level or logging.NOTSET)
            self._saved_level = self._set_level = None


_ROUTER = _Router()
