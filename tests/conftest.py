"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import signal

import pytest

from tests.helpers.redis_server import RedisEndpoint, shared_redis

# A suite started in the background of a non-interactive shell (`make test &` in a
# script, some CI runners) inherits SIGINT ignored, and so would every `wink` it starts.
# The Ctrl-C tests check what a user at a terminal gets, where SIGINT raises
# KeyboardInterrupt: give the suite that, and its children inherit the default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def redis_server() -> RedisEndpoint:
    """The Redis server tests share: `REDIS_URL`, else a throwaway local redis-server.

    Skips the test when there is none (fails it under `CI=true`). Tests keep apart by
    using `tests.helpers.redis_server.unique_namespace()` for their keys.
    """
    return shared_redis()
