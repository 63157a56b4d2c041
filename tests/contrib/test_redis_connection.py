"""`RedisMailbox` when Redis is away: errors are translated, and it recovers after a restart.

Each test owns its redis-server (an `appendonly` one in `tmp_path`), so stopping and
restarting it disturbs no other test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.helpers.redis_server import (
    RedisEndpoint,
    RedisServer,
    find_redis_server,
    free_port,
    missing_redis,
)
from weakincentives.contrib.mailbox import RedisMailbox
from weakincentives.errors import MailboxConnectionError

pytestmark = pytest.mark.redis

Call = Callable[[RedisMailbox[Any, Any]], object]
CALLS: dict[str, Call] = {
    "send": lambda mailbox: mailbox.send("job"),
    "receive": lambda mailbox: mailbox.receive(),
    "long-poll": lambda mailbox: mailbox.receive(wait_time_seconds=1),
    "approximate_count": lambda mailbox: mailbox.approximate_count(),
    "purge": lambda mailbox: mailbox.purge(),
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    executable = find_redis_server()
    if executable is None:
        missing_redis("no redis-server binary to start a private server")
    with RedisServer(executable, tmp_path / "redis", appendonly=True) as started:
        yield started


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_a_closed_port_raises_mailbox_connection_error(call: Call) -> None:
    nowhere = RedisEndpoint(f"redis://127.0.0.1:{free_port()}/0")
    with nowhere.client(socket_connect_timeout=1.0) as client:
        mailbox: RedisMailbox[Any, Any] = RedisMailbox("queue", client=client)

        with pytest.raises(MailboxConnectionError, match="could not reach Redis") as caught:
            call(mailbox)

    assert isinstance(caught.value, ConnectionError)
    assert isinstance(caught.value.__cause__, redis.ConnectionError)


def eventually(call: Callable[[], Any]) -> Any:
    """Run `call`; a connection the restart broke may fail it once, not twice."""
    try:
        return call()
    except MailboxConnectionError:
        return call()


def test_settling_while_the_server_is_down_fails_and_works_after_it_is_back(
    server: RedisServer,
) -> None:
    with server.client() as client:
        mailbox: RedisMailbox[str, Any] = RedisMailbox("queue", client=client)
        mailbox.send("job")
        (message,) = mailbox.receive(visibility_timeout=600)

        server.stop()
        with pytest.raises(MailboxConnectionError):
            message.acknowledge()
        server.start()

        eventually(message.acknowledge)
        assert mailbox.approximate_count() == 0


def test_messages_and_handles_survive_a_restart_with_appendonly(server: RedisServer) -> None:
    with server.client() as client:
        mailbox: RedisMailbox[str, Any] = RedisMailbox("queue", client=client)
        first_id = mailbox.send("first", reply_to="replies")
        mailbox.send("second")
        (in_flight,) = mailbox.receive(visibility_timeout=600)

        server.restart()

        assert eventually(mailbox.approximate_count) == 2
        (pending,) = mailbox.receive(max_messages=10)
        in_flight.acknowledge()  # its handle and deadline were persisted
        pending.acknowledge()
        assert (in_flight.id, in_flight.reply_to_name) == (first_id, "replies")
        assert pending.body == "second"
        assert mailbox.approximate_count() == 0
        mailbox.send("after")  # scripts are reloaded transparently after the restart
        assert [m.body for m in mailbox.receive()] == ["after"]


def test_a_long_poll_fails_cleanly_when_the_server_goes_away(server: RedisServer) -> None:
    with server.client() as client:
        mailbox: RedisMailbox[str, Any] = RedisMailbox("queue", client=client)
        stopper = threading.Timer(0.1, server.stop)
        started = time.monotonic()
        stopper.start()
        try:
            with pytest.raises(MailboxConnectionError, match="waiting for messages"):
                mailbox.receive(wait_time_seconds=10)
        finally:
            stopper.join()

    assert time.monotonic() - started < 5
