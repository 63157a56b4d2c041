"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import pytest

from tests.helpers.redis_server import RedisEndpoint, shared_redis


@pytest.fixture(scope="session")
def redis_server() -> RedisEndpoint:
    """The Redis server tests share: `REDIS_URL`, else a throwaway local redis-server.

    Skips the test when there is none (fails it under `CI=true`). Tests keep apart by
    using `tests.helpers.redis_server.unique_namespace()` for their keys.
    """
    return shared_redis()
