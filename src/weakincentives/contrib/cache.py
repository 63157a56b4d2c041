"""`RedisResponseCache`: the response cache shared by every worker that reaches one Redis.

It implements `weakincentives.adapters.ResponseCache`, so it plugs into any adapter's
`cache=` (and `cached_model_call`): keys are content hashes of what the model sees, so
a response one worker paid for is a hit for every other worker, on any machine. Like
`SQLiteResponseCache`, it never fails a model call: when Redis cannot be reached, a
lookup is a miss and a write is skipped (both logged). Needs the `[redis]` extra.

Examples:
    ```python
    cache = RedisResponseCache(redis_client("redis://cache:6379/0"), ttl=timedelta(days=7))
    adapter = OpenAIAdapter(model="gpt-4o-mini", cache=cache)
    ```
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Any

from weakincentives.adapters import CacheStats
from weakincentives.errors import ConfigurationError

try:
    import redis
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "RedisResponseCache needs the redis package; install it with "
        "`pip install 'weakincentives[redis]'`",
        name="redis",
    ) from exc

__all__ = ["RedisResponseCache"]

_log = logging.getLogger(__name__)

_SCAN_COUNT = 500
"""Keys asked for per SCAN step of `clear()` and `len()`."""


class RedisResponseCache:
    """Model responses in Redis, one string key per response: `<namespace>:<key>`.

    Thread-safe (redis-py clients are). `stats` counts this object's lookups and writes,
    not other processes'.

    Args:
        client: A redis-py client (`decode_responses=False`, the default); not closed here.
        namespace: Prefix of every key; caches with different namespaces do not meet.
        ttl: How long a response is kept after it is written (None: until evicted;
            give the server a `maxmemory-policy` such as `allkeys-lru` then).

    Raises:
        ConfigurationError: An empty namespace, a ttl under one millisecond, or a
            client that decodes responses.
    """

    def __init__(
        self,
        client: Any,
        *,
        namespace: str = "wink-cache",
        ttl: timedelta | float | None = None,
    ) -> None:
        seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else ttl
        if not namespace:
            raise ConfigurationError("RedisResponseCache needs a non-empty namespace")
        if seconds is not None and seconds < 0.001:
            raise ConfigurationError(
                f"ttl must be at least a millisecond or None, got {ttl!r}",
            )
        get_encoder = getattr(client, "get_encoder", None)
        if get_encoder is not None and getattr(get_encoder(), "decode_responses", False):
            raise ConfigurationError(
                "the Redis client decodes responses; create it with decode_responses=False "
                "(the default): cached values are bytes",
            )
        self._client = client
        self._namespace = namespace
        self._ttl_ms = None if seconds is None else int(seconds * 1000)
        self._lock = threading.Lock()
        self._hits = self._misses = self._writes = 0

    def __repr__(self) -> str:
        return f"RedisResponseCache(namespace={self._namespace!r})"

    @property
    def namespace(self) -> str:
        """The prefix of this cache's keys."""
        return self._namespace

    def get(self, key: str) -> bytes | None:
        """Return the response stored under `key` (None on a miss or a Redis error)."""
        try:
            value = self._client.get(self._key(key))
        except redis.RedisError as exc:
            _log.warning("%r: lookup failed (%s); treating it as a miss", self, exc)
            value = None
        with self._lock:
            if value is None:
                self._misses += 1
            else:
                self._hits += 1
        return None if value is None else bytes(value)

    def put(self, key: str, value: bytes) -> None:
        """Store `value` under `key`, replacing any previous one (skipped on a Redis error)."""
        try:
            self._client.set(self._key(key), value, px=self._ttl_ms)
        except redis.RedisError as exc:
            _log.warning("%r: write failed (%s); the response is not cached", self, exc)
            return
        with self._lock:
            self._writes += 1

    @property
    def stats(self) -> CacheStats:
        """Hits, misses and writes through this object."""
        with self._lock:
            return CacheStats(hits=self._hits, misses=self._misses, writes=self._writes)

    def __len__(self) -> int:
        """Responses stored under this namespace (a SCAN: slow on a large cache)."""
        return sum(1 for _ in self._client.scan_iter(match=self._pattern(), count=_SCAN_COUNT))

    def clear(self) -> int:
        """Delete every response under this namespace; return how many were deleted."""
        deleted = 0
        batch: list[bytes] = []
        for key in self._client.scan_iter(match=self._pattern(), count=_SCAN_COUNT):
            batch.append(key)
            if len(batch) >= _SCAN_COUNT:
                deleted += int(self._client.unlink(*batch))
                batch.clear()
        if batch:
            deleted += int(self._client.unlink(*batch))
        return deleted

    def _key(self, key: str) -> str:
        return f"{self._namespace}:{key}"

    def _pattern(self) -> str:
        # Escape glob characters so a namespace like "a*" matches only itself.
        escaped = "".join(f"\\{c}" if c in "*?[]\\" else c for c in self._namespace)
        return f"{escaped}:*"
