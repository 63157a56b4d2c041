"""Redis clients that ride out outages, and the backoff the distributed side waits with.

Three layers keep a distributed run going while Redis restarts or the network blips:

1. the client (`redis_client`): redis-py retries a command that failed on a connection
   or timeout error a few times, reconnecting, with jittered exponential backoff
   (about three seconds in all), so a short blip is invisible;
2. the worker loop (`MailboxWorker`): a receive that still fails is retried with its
   own backoff (up to two seconds apart) for as long as the outage lasts; a result that
   cannot be sent fails the delivery, which comes back once Redis does (connection
   errors are never dead-lettered);
3. the submitting side (`run_distributed`): sends and receives that fail are retried
   with `Backoff` until the run's timeout.

Commands may therefore run twice (a reply lost with the connection): delivery is
at-least-once, and results are de-duplicated by request id.
"""

from __future__ import annotations

from typing import Any

from weakincentives.clock import Clock
from weakincentives.errors import ConfigurationError, MailboxConnectionError

try:
    import redis
    from redis.backoff import EqualJitterBackoff
    from redis.retry import Retry
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "distributed evaluation needs the redis package; install it with "
        "`pip install 'weakincentives[redis]'`",
        name="redis",
    ) from exc

__all__ = ["Backoff", "check_reachable", "describe", "redis_client"]

_MIN_SOCKET_TIMEOUT = 2.0
"""`RedisMailbox` long polls block on the server for up to one second per call."""


def redis_client(
    url: str,
    *,
    retries: int = 6,
    backoff_base: float = 0.05,
    backoff_cap: float = 1.0,
    socket_timeout: float = 5.0,
    connect_timeout: float = 2.0,
) -> redis.Redis[bytes]:
    """Return a redis-py client for `url` that reconnects and retries (see the module).

    Args:
        url: `redis://[user:password@]host:port/db` (or `rediss://`, `unix://`).
        retries: Retries of a command that failed on a connection error or timeout.
        backoff_base: Seconds of the first retry's (jittered) backoff; it doubles.
        backoff_cap: Longest backoff between two retries.
        socket_timeout: Seconds a command may wait for its reply (above 2: long polls
            block on the server for up to one second).
        connect_timeout: Seconds to wait for a connection.

    Raises:
        ConfigurationError: The URL cannot be parsed or a setting is out of range.
    """
    if retries < 0 or not 0 < backoff_base <= backoff_cap:
        raise ConfigurationError(
            f"need retries >= 0 and 0 < backoff_base <= backoff_cap, got retries={retries}, "
            f"backoff_base={backoff_base}, backoff_cap={backoff_cap}",
        )
    if socket_timeout < _MIN_SOCKET_TIMEOUT or connect_timeout <= 0:
        raise ConfigurationError(
            f"socket_timeout must be >= {_MIN_SOCKET_TIMEOUT:g} s (long polls block up to 1 s)"
            f" and connect_timeout > 0, got {socket_timeout} and {connect_timeout}",
        )
    retry = Retry(EqualJitterBackoff(cap=backoff_cap, base=backoff_base), retries)
    try:
        client: redis.Redis[bytes] = redis.Redis.from_url(
            url,
            retry=retry,
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            health_check_interval=30,
        )
    except ValueError as exc:
        raise ConfigurationError(
            f"cannot use Redis URL {url!r}: {exc}; write it as redis://host:port/db",
        ) from exc
    return client


class Backoff:
    """Exponential waits between attempts at something that keeps failing.

    `wait()` sleeps on `clock` for `base * 2 ** (failures - 1)` seconds (at most `cap`,
    and never past `deadline`) and counts a failure; `reset()` after a success.

    Args:
        clock: What to sleep on (a `FakeClock` in tests).
        base: The first wait, in seconds.
        cap: The longest wait.
    """

    def __init__(self, clock: Clock, *, base: float = 0.05, cap: float = 2.0) -> None:
        if not 0 < base <= cap:
            raise ConfigurationError(f"Backoff needs 0 < base <= cap, got {base} and {cap}")
        self._clock = clock
        self._base = base
        self._cap = cap
        self.failures = 0

    def next_delay(self) -> float:
        """The wait the next `wait()` will make (without its deadline cut)."""
        return min(self._cap, self._base * 2.0 ** min(self.failures, 32))

    def wait(self, deadline: float | None = None) -> None:
        """Count a failure and sleep for the next delay (cut short at `deadline`)."""
        delay = self.next_delay()
        self.failures += 1
        if deadline is not None:
            delay = min(delay, max(0.0, deadline - self._clock.monotonic()))
        if delay > 0:
            self._clock.sleep(delay)

    def reset(self) -> None:
        """Forget past failures (call after a success)."""
        self.failures = 0


def describe(client: Any) -> str:
    """`host:port/db` of a redis-py client, for log lines (never the password)."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


def check_reachable(connection: Any) -> None:
    """Raise `MailboxConnectionError` (and close `connection`) when Redis does not answer.

    The client's own retries (a few seconds) come first, so a blip passes.
    """
    try:
        connection.ping()
    except redis.RedisError as exc:
        connection.close()
        raise MailboxConnectionError(
            f"cannot reach Redis at {describe(connection)}: {exc}; check the URL and that "
            "the server runs"
        ) from exc
