"""A content-addressed cache of model responses.

A model call is identified by what the model sees: the model name, the messages, the tool
specs, the structured-output schema and the sampling parameters. `cache_key` hashes their
canonical JSON (sorted keys) with sha256, so equal calls share a key across processes and
machines, and any change gives a new key. `cached_model_call` wraps an adapter's
`ModelRequest -> ModelTurn` function with a `ResponseCache`:

- only successful calls are stored (an exception propagates and nothing is written);
- a non-deterministic call (`temperature > 0` in the parameters) bypasses the cache
  unless `cache_nondeterministic=True`: replaying one sample of a random process would
  silently turn a distribution into a constant;
- a cached value that no longer decodes (the `ModelTurn` shape changed) is a miss and is
  overwritten.

A hit replays the recorded turn exactly, token usage included, so a cached run reports the
same numbers as the run that filled the cache; `cache.stats` says how many calls were saved.

Examples:
    >>> from weakincentives.runtime.session import ChatMessage
    >>> cache = SQLiteResponseCache(":memory:")
    >>> def model(request: ModelRequest) -> ModelTurn:
    ...     return ModelTurn(message=ChatMessage(role="assistant", content="4"))
    >>> call = cached_model_call(model, cache, model_name="m")
    >>> request = ModelRequest(messages=(ChatMessage(role="user", content="2+2?"),))
    >>> call(request).message.content, call(request).message.content
    ('4', '4')
    >>> cache.stats
    CacheStats(hits=1, misses=1, writes=1)
    >>> cache.close()
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from weakincentives import serde
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError, SerdeError
from weakincentives.prompt import ToolSpec
from weakincentives.runtime.session import ChatMessage

from ._types import CacheStats, ModelRequest, ModelTurn, ResponseCache

__all__ = [
    "CACHE_KEY_VERSION",
    "NullCache",
    "SQLiteResponseCache",
    "acached_model_call",
    "cache_key",
    "cached_model_call",
    "is_deterministic",
]

CACHE_KEY_VERSION = 1
"""Part of every key; bump it when what a key covers changes, to start from an empty cache."""

_log = logging.getLogger(__name__)


class _Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hits = self._misses = self._writes = 0

    def record(self, *, hit: bool | None = None, write: bool = False) -> None:
        with self._lock:
            if hit is True:
                self._hits += 1
            elif hit is False:
                self._misses += 1
            if write:
                self._writes += 1

    def snapshot(self) -> CacheStats:
        with self._lock:
            return CacheStats(hits=self._hits, misses=self._misses, writes=self._writes)


class NullCache:
    """A cache that stores nothing: every lookup is a miss. The default when caching is off."""

    def __init__(self) -> None:
        self._counters = _Counters()

    def get(self, key: str) -> bytes | None:
        """Count a miss and return None."""
        self._counters.record(hit=False)
        return None

    def put(self, key: str, value: bytes) -> None:
        """Discard `value`."""

    @property
    def stats(self) -> CacheStats:
        """Misses so far (hits and writes stay 0)."""
        return self._counters.snapshot()


class SQLiteResponseCache:
    """A response cache in one SQLite file (WAL mode), shared by threads and processes.

    One connection guarded by a lock serves every thread; other processes on the same
    machine may open the same file (WAL lets readers and a writer proceed together, and
    writers wait up to `timeout` seconds for each other). A failing read or write (disk
    full, a lock held too long) is logged and treated as a miss: the cache never fails a
    model call.

    Args:
        path: The database file (parent directories are created), or `":memory:"`.
        clock: Clock for the `created_at` column.
        timeout: Seconds to wait for another process's write lock.

    Raises:
        ConfigurationError: when the file cannot be opened as a database.
    """

    def __init__(
        self, path: str | Path, *, clock: Clock = SYSTEM_CLOCK, timeout: float = 30.0
    ) -> None:
        self._path = str(path)
        self._clock = clock
        self._counters = _Counters()
        self._lock = threading.Lock()
        try:
            if self._path != ":memory:":
                Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            # check_same_thread=False: the lock below serializes use across threads.
            self._conn = sqlite3.connect(
                self._path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")  # a cache may lose its last writes
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS responses ("
                "key TEXT PRIMARY KEY, value BLOB NOT NULL, created_at TEXT NOT NULL)"
            )
        except (OSError, sqlite3.Error) as exc:
            raise ConfigurationError(
                f"cannot open response cache {self._path}: {exc}; delete the file or pick "
                "another cache path"
            ) from exc
        self._closed = False

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def get(self, key: str) -> bytes | None:
        """Return the value under `key`, or None (a miss, also on a database error)."""
        with self._lock:
            self._check_open()
            try:
                row = self._conn.execute(
                    "SELECT value FROM responses WHERE key = ?", (key,)
                ).fetchone()
            except sqlite3.Error as exc:
                _log.warning("response cache %s: lookup failed (%s); treating as miss", self, exc)
                row = None
        self._counters.record(hit=row is not None)
        return None if row is None else bytes(row[0])

    def put(self, key: str, value: bytes) -> None:
        """Store `value` under `key` (a database error is logged and ignored)."""
        with self._lock:
            self._check_open()
            try:
                self._conn.execute(
                    "INSERT OR REPLACE INTO responses (key, value, created_at) VALUES (?, ?, ?)",
                    (key, value, self._clock.now().isoformat()),
                )
            except sqlite3.Error as exc:
                _log.warning("response cache %s: write failed (%s); not cached", self, exc)
                return
        self._counters.record(write=True)

    @property
    def stats(self) -> CacheStats:
        """Hits, misses and writes through this object (not other processes')."""
        return self._counters.snapshot()

    def __len__(self) -> int:
        with self._lock:
            self._check_open()
            (count,) = self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()
        return int(count)

    def clear(self) -> None:
        """Delete every stored response."""
        with self._lock:
            self._check_open()
            self._conn.execute("DELETE FROM responses")

    def close(self) -> None:
        """Close the database (idempotent); later calls raise `ConfigurationError`."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __enter__(self) -> SQLiteResponseCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteResponseCache({self._path!r})"

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigurationError(f"response cache {self._path} is closed")


def cache_key(
    model: str,
    messages: Iterable[ChatMessage],
    tools: Iterable[ToolSpec] = (),
    parameters: Mapping[str, Any] | None = None,
    *,
    output_schema: Mapping[str, Any] | None = None,
) -> str:
    """sha256 (hex) of the canonical JSON of everything the model sees.

    Args:
        model: Model name as sent to the provider.
        messages: The conversation.
        tools: Tool specs offered to the model.
        parameters: Sampling and other request parameters (temperature, max tokens...).
        output_schema: JSON schema of the structured output, if any.
    """
    material = {
        "v": CACHE_KEY_VERSION,
        "model": model,
        "messages": serde.dump(tuple(messages)),
        "tools": serde.dump(tuple(tools)),
        "parameters": serde.dump(dict(parameters or {})),
        "output_schema": serde.dump(output_schema),
    }
    # Sorted keys and no whitespace: equal inputs always give equal bytes.
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def is_deterministic(parameters: Mapping[str, Any] | None) -> bool:
    """False when `parameters` ask for sampling (`temperature > 0`).

    A missing temperature counts as deterministic: adapters whose provider samples by
    default (OpenAI's default temperature is 1) must put the effective value in the
    parameters they pass to `cached_model_call`.
    """
    temperature = (parameters or {}).get("temperature")
    return temperature is None or float(temperature) <= 0.0


def cached_model_call(
    call: Callable[[ModelRequest], ModelTurn],
    cache: ResponseCache,
    *,
    model_name: str,
    parameters: Mapping[str, Any] | None = None,
    cache_nondeterministic: bool = False,
) -> Callable[[ModelRequest], ModelTurn]:
    """Wrap an adapter's model call with `cache` (see the module docstring).

    Args:
        call: The uncached call, `ModelRequest -> ModelTurn`.
        cache: Where responses are kept.
        model_name: The model, as part of the key.
        parameters: Request parameters that change the answer, as part of the key.
        cache_nondeterministic: Cache even when `temperature > 0`.
    """
    params = dict(parameters or {})
    if not cache_nondeterministic and not is_deterministic(params):
        return call

    def cached(request: ModelRequest) -> ModelTurn:
        key = _request_key(model_name, request, params)
        turn = _lookup(cache, key)
        if turn is None:
            turn = call(request)  # raises -> nothing is stored
            cache.put(key, serde.dumps(turn))
        return turn

    return cached


def acached_model_call(
    call: Callable[[ModelRequest], Awaitable[ModelTurn]],
    cache: ResponseCache,
    *,
    model_name: str,
    parameters: Mapping[str, Any] | None = None,
    cache_nondeterministic: bool = False,
) -> Callable[[ModelRequest], Awaitable[ModelTurn]]:
    """`cached_model_call` for an async model call (same keys, same entries).

    The cache itself is called inline on the event loop: a lookup in a local SQLite
    file or in memory is short next to a model call.
    """
    params = dict(parameters or {})
    if not cache_nondeterministic and not is_deterministic(params):
        return call

    async def cached(request: ModelRequest) -> ModelTurn:
        key = _request_key(model_name, request, params)
        turn = _lookup(cache, key)
        if turn is None:
            turn = await call(request)  # raises -> nothing is stored
            cache.put(key, serde.dumps(turn))
        return turn

    return cached


def _request_key(model_name: str, request: ModelRequest, params: Mapping[str, Any]) -> str:
    return cache_key(
        model_name, request.messages, request.tools, params, output_schema=request.output_schema
    )


def _lookup(cache: ResponseCache, key: str) -> ModelTurn | None:
    """The cached turn under `key`, or None (a value that no longer decodes is a miss)."""
    raw = cache.get(key)
    if raw is None:
        return None
    try:
        return serde.loads(ModelTurn, raw)
    except SerdeError as exc:
        _log.warning("cached response %s no longer decodes (%s); calling the model", key, exc)
        return None
