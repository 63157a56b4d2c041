"""Retries, failure translation and key-free caching shared by the HTTP adapters.

An adapter tells `send_with_retries` how to make one attempt (`send(timeout)`) and how to
translate what the SDK raised into a `Failure`; this module owns the rest, the same for
every provider: 429, 5xx and connection failures are retried up to `max_retries` times
with exponential backoff and jitter, or after the server's `Retry-After`, sleeping on
the injected clock and never past the run's deadline; other 4xx answers fail at once; a
request that times out is not retried. The key is redacted from every message.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from weakincentives.clock import Clock, async_sleep
from weakincentives.errors import (
    AdapterConnectionError,
    AdapterError,
    AdapterTimeoutError,
    ConfigurationError,
    DeadlineExceededError,
    ProviderRequestError,
    ProviderServerError,
    RateLimitError,
)

from ._types import CacheStats, ResponseCache

__all__ = [
    "Failure",
    "KeyFreeCache",
    "RetryPolicy",
    "asend_with_retries",
    "check_limits",
    "connection_failure",
    "left",
    "plan_retry",
    "send_with_retries",
    "status_failure",
    "timeout_failure",
]

T = TypeVar("T")

BASE_BACKOFF = 0.5
"""Seconds before the first retry when the server gives no `Retry-After`."""
MAX_BACKOFF = 8.0
"""Cap of the exponential backoff, in seconds."""
MAX_RETRY_AFTER = 300.0
"""A longer `Retry-After` is not waited out: the adapter gives up at once."""
MIN_GUARDED_KEY = 8
"""Keys at least this long are kept out of cached values (a shorter one matches too much)."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt, translated."""

    error: type[AdapterError]
    """The error to raise if the adapter gives up."""
    message: str
    """What went wrong, where."""
    retryable: bool
    """Whether another attempt may succeed."""
    retry_after: float | None = None
    """Seconds the server asked to wait, if it said."""
    cause: BaseException | None = None
    """The SDK's exception (None when its text quotes the key)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How one adapter retries."""

    max_retries: int
    """Retries after a retryable failure (0: none)."""
    timeout: float
    """Seconds one HTTP request may take; the run's deadline may shorten it."""
    clock: Clock
    """Clock for backoff sleeps and deadlines."""
    rng: random.Random
    """Random source for backoff jitter."""


def status_failure(
    status: int,
    body: str,
    where: str,
    *,
    retry_after: float | None,
    cause: BaseException | None,
) -> Failure:
    """The `Failure` for an HTTP error status (429, 5xx retryable; other 4xx not)."""
    if status == 429:
        return Failure(
            RateLimitError,
            f"{where}: rate limited (HTTP 429): {body}",
            retryable=True,
            retry_after=retry_after,
            cause=cause,
        )
    if status >= 500:
        return Failure(
            ProviderServerError,
            f"{where}: server error (HTTP {status}): {body}",
            retryable=True,
            retry_after=retry_after,
            cause=cause,
        )
    return Failure(
        ProviderRequestError,
        f"{where}: request rejected (HTTP {status}): {body}; "
        "check the model name, the API key and the request options",
        retryable=False,
        cause=cause,
    )


def timeout_failure(where: str, timeout: float, cause: BaseException | None) -> Failure:
    """The `Failure` for a request that got no answer in time (not retried)."""
    return Failure(
        AdapterTimeoutError,
        f"{where}: no answer within {timeout:.2f}s; raise timeout= or the run's deadline",
        retryable=False,
        cause=cause,
    )


def connection_failure(where: str, detail: object, cause: BaseException | None) -> Failure:
    """The `Failure` for a server that could not be reached (retried)."""
    return Failure(
        AdapterConnectionError,
        f"{where}: cannot reach the server ({detail}); check base_url and that it runs",
        retryable=True,
        cause=cause,
    )


def send_with_retries(
    send: Callable[[float], T],
    translate: Callable[[Exception, float], Failure | None],
    *,
    where: str,
    budget: float | None,
    policy: RetryPolicy,
    redact: Callable[[str], str],
) -> T:
    """Call `send(timeout)` until it returns, retrying what `translate` calls retryable.

    Args:
        send: One attempt; gets the seconds it may take.
        translate: Maps an exception `send` raised to a `Failure` (None: not ours, re-raise).
        where: Names the call in messages.
        budget: Seconds left before the run's deadline (None: no deadline).
        policy: Retries, per-request timeout, clock and jitter.
        redact: Removes the key from a message.

    Raises:
        DeadlineExceededError: the deadline passed before an answer.
        AdapterError: the translated failure, once the adapter gives up.
    """
    clock = policy.clock
    started = clock.monotonic()
    attempt = 0
    while True:
        attempt += 1
        remaining = left(budget, started, clock)
        timeout = policy.timeout if remaining is None else min(policy.timeout, remaining)
        if timeout <= 0:
            raise DeadlineExceededError(
                f"{where}: the run's deadline passed before the model answered "
                f"({attempt - 1} attempts)",
            )
        try:
            return send(timeout)
        except Exception as exc:
            failure = translate(exc, timeout)
            if failure is None:
                raise
            delay, reason = plan_retry(failure, attempt, left(budget, started, clock), policy)
            if delay is None:
                raise failure.error(redact(f"{failure.message}{reason}")) from failure.cause
            clock.sleep(delay)


async def asend_with_retries(
    send: Callable[[float], Awaitable[T]],
    translate: Callable[[Exception, float], Failure | None],
    *,
    where: str,
    budget: float | None,
    policy: RetryPolicy,
    redact: Callable[[str], str],
) -> T:
    """`send_with_retries` for an async `send`: the backoff is awaited, not slept.

    Raises:
        DeadlineExceededError: the deadline passed before an answer.
        AdapterError: the translated failure, once the adapter gives up.
    """
    clock = policy.clock
    started = clock.monotonic()
    attempt = 0
    while True:
        attempt += 1
        remaining = left(budget, started, clock)
        timeout = policy.timeout if remaining is None else min(policy.timeout, remaining)
        if timeout <= 0:
            raise DeadlineExceededError(
                f"{where}: the run's deadline passed before the model answered "
                f"({attempt - 1} attempts)",
            )
        try:
            return await send(timeout)
        except Exception as exc:
            failure = translate(exc, timeout)
            if failure is None:
                raise
            delay, reason = plan_retry(failure, attempt, left(budget, started, clock), policy)
            if delay is None:
                raise failure.error(redact(f"{failure.message}{reason}")) from failure.cause
            await async_sleep(clock, delay)


def plan_retry(
    failure: Failure, attempt: int, left: float | None, policy: RetryPolicy
) -> tuple[float | None, str]:
    """Seconds to sleep before the next attempt, or None and why the adapter gives up."""
    if not failure.retryable:
        return None, ""
    if attempt > policy.max_retries:
        return None, f" (gave up after {attempt} attempts; raise max_retries to try longer)"
    if failure.retry_after is not None:
        delay = failure.retry_after
        if delay > MAX_RETRY_AFTER:
            return None, (
                f" (gave up after {attempt} attempts: the server asked to wait {delay:.0f}s, "
                f"more than the {MAX_RETRY_AFTER:.0f}s this adapter waits)"
            )
    else:
        # Exponential backoff with "equal jitter": half fixed, half random, so clients
        # that failed together do not all come back together.
        ceiling = min(MAX_BACKOFF, BASE_BACKOFF * 2 ** (attempt - 1))
        delay = ceiling / 2 + policy.rng.uniform(0, ceiling / 2)
    if left is not None and delay >= left:
        return None, (
            f" (gave up after {attempt} attempts: the run's deadline leaves {left:.2f}s, "
            f"less than the {delay:.2f}s wait before the next one)"
        )
    return delay, ""


def left(budget: float | None, started: float, clock: Clock) -> float | None:
    """Seconds left of a request's deadline budget, measured from `started`."""
    return None if budget is None else budget - (clock.monotonic() - started)


def check_limits(*, max_turns: int, max_retries: int, timeout: float) -> None:
    """Raise `ConfigurationError` for a limit no run could satisfy."""
    if max_turns < 1:
        raise ConfigurationError(f"max_turns must be at least 1, got {max_turns}")
    if max_retries < 0:
        raise ConfigurationError(f"max_retries must be 0 or more, got {max_retries}")
    if not timeout > 0:
        raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout}")


class KeyFreeCache:
    """`cache`, except that a value quoting the API key is not stored.

    A model can only echo the key if the conversation holds it, but a cache file is easy
    to share and outlives the run: it must never carry the key.
    """

    def __init__(self, cache: ResponseCache, secret: str) -> None:
        self._cache = cache
        self._secret = secret.encode() if len(secret) >= MIN_GUARDED_KEY else b""

    def get(self, key: str) -> bytes | None:
        """The stored value (see `ResponseCache.get`)."""
        return self._cache.get(key)

    def put(self, key: str, value: bytes) -> None:
        """Store `value` unless it quotes the key."""
        if self._secret and self._secret in value:
            _log.warning("a model turn quoting the API key was not cached (key %s)", key)
            return
        self._cache.put(key, value)

    @property
    def stats(self) -> CacheStats:
        """The wrapped cache's counters."""
        return self._cache.stats
