"""`RedisMailbox` beyond the shared contract: keys, TTLs, server time, poison messages.

The contract suite (tests/contracts) checks the `Mailbox` semantics; these tests check
what is particular to Redis, against a real redis-server.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from redis.crc import key_slot

from tests.helpers.redis_server import (
    RedisEndpoint,
    delete_namespace,
    iter_namespace_keys,
    unique_namespace,
)
from weakincentives.clock import FakeClock
from weakincentives.contrib.mailbox import JsonCodec, RedisMailbox, RedisMailboxFactory
from weakincentives.contrib.mailbox._redis import SEND_CHUNK
from weakincentives.errors import (
    MailboxArgumentError,
    MailboxClosedError,
    MailboxConnectionError,
    MailboxError,
    MailboxFullError,
    MessageDecodeError,
    ReceiptHandleExpiredError,
)
from weakincentives.evals import EvalRequest, Sample
from weakincentives.experiment import Experiment
from weakincentives.runtime.dlq import DeadLetter
from weakincentives.runtime.mailbox import CompositeResolver, Message, acknowledge_all

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

    def _make(name: str = "queue", **kwargs: Any) -> RedisMailbox[Any, Any]:
        kwargs.setdefault("client", client)
        kwargs.setdefault("namespace", namespace)
        mailbox: RedisMailbox[Any, Any] = RedisMailbox(name, **kwargs)
        made.append(mailbox)
        return mailbox

    yield _make
    for mailbox in made:
        mailbox.close()


def only(messages: Any) -> Message[Any, Any]:
    assert len(messages) == 1, messages
    result: Message[Any, Any] = messages[0]
    return result


def members(client: redis.Redis[bytes], mailbox: RedisMailbox[Any, Any]) -> list[bytes]:
    """The queue's message members (`<member>:b` fields of its messages hash)."""
    return sorted(f[:-2] for f in client.hkeys(mailbox.keys[2]) if f.endswith(b":b"))


# -- server time -----------------------------------------------------------------------


def test_visibility_deadlines_follow_the_server_clock_not_the_injected_one(
    make: Callable[..., RedisMailbox[Any, Any]],
) -> None:
    clock = FakeClock()
    mailbox = make(clock=clock)
    mailbox.send("job")
    message = only(mailbox.receive(visibility_timeout=60))

    clock.advance(3600)  # the local clock racing ahead expires nothing...
    message.extend_visibility(0.1)
    time.sleep(0.15)  # ...while real (server) time passing does

    with pytest.raises(ReceiptHandleExpiredError, match="stale"):
        message.acknowledge()
    again = only(mailbox.receive())
    assert (again.id, again.delivery_count) == (message.id, 2)


def test_enqueued_at_is_the_server_time_of_the_send(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    mailbox = make(clock=FakeClock())  # 2024-01-01: must not leak into enqueued_at
    seconds, micros = client.time()
    mailbox.send("job")

    sent_at = only(mailbox.receive()).enqueued_at

    server_now = datetime.fromtimestamp(seconds + micros / 1e6, UTC)
    assert sent_at.tzinfo is not None
    assert timedelta(0) <= sent_at - server_now < timedelta(seconds=5)


def test_a_long_poll_ends_under_a_clock_that_does_not_move(
    make: Callable[..., RedisMailbox[Any, Any]],
) -> None:
    mailbox = make(clock=FakeClock())
    started = time.monotonic()

    assert mailbox.receive(wait_time_seconds=0.05) == []
    assert time.monotonic() - started < 2


# -- keys and TTLs ---------------------------------------------------------------------


def exercise(mailbox: RedisMailbox[Any, Any]) -> None:
    """Touch every key of a queue: sends (one and a batch), a delivery in flight, a nack,
    a batch acknowledged at once, a wake-up."""
    mailbox.send("a", reply_to="replies")
    mailbox.send("b", delay=30)
    only(mailbox.receive(visibility_timeout=60))
    mailbox.send("c")
    only(mailbox.receive(visibility_timeout=60)).nack(visibility_timeout=30)
    mailbox.send_many(["d", "e"], reply_to="replies")
    assert acknowledge_all(mailbox.receive(max_messages=2, visibility_timeout=60)) == []


def test_every_key_is_namespaced_and_hash_tagged_into_one_slot(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes], namespace: str
) -> None:
    mailbox = make("eval-requests")
    exercise(mailbox)

    keys = sorted(iter_namespace_keys(client, namespace))

    assert {key.rsplit(":", 1)[1] for key in keys} >= {"ready", "inflight", "messages"}
    assert all(key.startswith(f"{namespace}:{{eval-requests}}:") for key in keys), keys
    assert {key_slot(key.encode()) for key in keys} == {key_slot(b"{eval-requests}")}
    assert set(keys) <= set(mailbox.keys)


def test_a_new_queue_gets_the_queue_ttl_on_every_key(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes], namespace: str
) -> None:
    mailbox = make(queue_ttl=timedelta(hours=2))
    exercise(mailbox)

    ttls = {key: client.pttl(key) for key in iter_namespace_keys(client, namespace)}

    assert len(ttls) >= 3
    assert all(7_100_000 < ttl <= 7_200_000 for ttl in ttls.values()), ttls


def test_the_default_queue_ttl_is_seven_days(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    mailbox = make()
    mailbox.send("job")

    assert 7 * 86_400_000 - 60_000 < client.pttl(mailbox.keys[0]) <= 7 * 86_400_000


WRITES: dict[str, Callable[[RedisMailbox[Any, Any], Message[Any, Any]], object]] = {
    "send": lambda mailbox, _: mailbox.send("more"),
    "receive": lambda mailbox, _: mailbox.receive(),
    "nack": lambda _, message: message.nack(),
    "extend": lambda _, message: message.extend_visibility(120),
    "purge": lambda mailbox, _: mailbox.purge(),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_every_write_refreshes_the_ttl(
    make: Callable[..., RedisMailbox[Any, Any]],
    client: redis.Redis[bytes],
    write: Callable[[RedisMailbox[Any, Any], Message[Any, Any]], object],
) -> None:
    mailbox = make()
    mailbox.send("first")
    mailbox.send("second")
    message = only(mailbox.receive(visibility_timeout=60))
    for key in mailbox.keys:
        client.pexpire(key, 5_000)

    write(mailbox, message)

    assert client.pttl(mailbox.keys[2]) > 6_000  # seq lives as long as the queue does


def test_acknowledging_only_deletes_and_leaves_the_ttl_to_the_receive_before_it(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    # The receive (or extend) that made the handle refreshed every key less than a
    # visibility timeout ago, so the acknowledge skips the eight PEXPIREs.
    mailbox = make()
    mailbox.send("first")
    mailbox.send("second")
    first, second = mailbox.receive(max_messages=2, visibility_timeout=60)
    for key in mailbox.keys:
        client.pexpire(key, 5_000)

    first.acknowledge()
    assert acknowledge_all([second]) == []

    assert 0 < client.pttl(mailbox.keys[2]) <= 5_000
    assert mailbox.approximate_count() == 0


# -- reply-to across processes ---------------------------------------------------------


def test_reply_to_travels_by_name_and_resolves_in_another_process(
    redis_server: RedisEndpoint, namespace: str
) -> None:
    with redis_server.client() as client_a, redis_server.client() as client_b:
        # Process A: submits a request and waits for the answer.
        requests_a: RedisMailbox[str, str] = RedisMailbox(
            "eval-requests", client=client_a, namespace=namespace
        )
        results_a: RedisMailbox[str, None] = RedisMailbox(
            "run-42", client=client_a, namespace=namespace
        )
        requests_a.send("question", reply_to=results_a)
        # Process B: a worker that knows no mailbox of A's; it resolves names on demand.
        factory: RedisMailboxFactory[str] = RedisMailboxFactory(
            client=client_b, namespace=namespace
        )
        resolver: CompositeResolver[str] = CompositeResolver(registry={}, factory=factory)
        requests_b: RedisMailbox[str, str] = RedisMailbox(
            "eval-requests", client=client_b, namespace=namespace, reply_resolver=resolver
        )

        request = only(requests_b.receive())
        request.reply("answer")
        request.acknowledge()

        assert request.reply_to_name == "run-42"
        assert request.reply_to is factory.create("run-42")
        (meta_field,) = [f for f in client_a.hkeys(results_a.keys[2]) if f.endswith(b":m")]
        stored = json.loads(client_a.hget(results_a.keys[2], meta_field) or b"")
        assert [m.body for m in results_a.receive(max_messages=10)] == ["answer"]
        assert stored["id"]
        assert requests_a.approximate_count() == 0
        delete_namespace(client_a, namespace)


def test_the_factory_caches_mailboxes_and_resolves_names_in_its_namespace(
    client: redis.Redis[bytes], namespace: str
) -> None:
    factory: RedisMailboxFactory[Any] = RedisMailboxFactory(client=client, namespace=namespace)

    first = factory.create("results")
    first.send({"score": 1})

    assert factory.resolve("results") is first
    assert first.namespace == namespace
    assert only(RedisMailbox("results", client=client, namespace=namespace).receive()).body == {
        "score": 1
    }
    first.close()
    assert factory.create("results") is not first  # a closed mailbox is replaced


# -- bodies ----------------------------------------------------------------------------


def test_typed_bodies_round_trip_through_body_type(
    make: Callable[..., RedisMailbox[Any, Any]],
) -> None:
    mailbox = make(body_type=EvalRequest[str, str])
    request = EvalRequest(
        sample=Sample(id="s-1", input="2+2?", expected="4", metadata={"topic": "math"}),
        experiment=Experiment(name="baseline", flags={"style": "short"}),
        epoch=2,
    )
    mailbox.send(request)

    received = only(mailbox.receive()).body

    assert received == request
    assert isinstance(received.sample, Sample)


@dataclass(frozen=True)
class Job:
    name: str
    size: int


POISONS: dict[str, tuple[bytes, str]] = {
    "not-json": (b"\xff\x00{not json", "JsonCodec"),
    "wrong-shape": (b'{"name": "job", "size": "huge"}', "size"),
}


@pytest.mark.parametrize(("payload", "mentions"), POISONS.values(), ids=POISONS.keys())
def test_an_undecodable_body_is_delivered_with_its_raw_payload(
    make: Callable[..., RedisMailbox[Any, Any]],
    client: redis.Redis[bytes],
    payload: bytes,
    mentions: str,
) -> None:
    mailbox = make(body_type=Job)
    message_id = mailbox.send(Job("fine", 1), reply_to="replies")
    client.hset(mailbox.keys[2], members(client, mailbox)[0] + b":b", payload)

    message = only(mailbox.receive())

    assert (message.id, message.delivery_count, message.raw_body) == (message_id, 1, payload)
    assert isinstance(message.decode_error, MessageDecodeError)
    assert mentions in str(message.decode_error)
    with pytest.raises(MessageDecodeError, match=message_id):
        _ = message.body
    letter = DeadLetter.from_message(
        message, message.decode_error, reason="undecodable", source="queue", now=datetime.now(UTC)
    )
    assert (letter.body, letter.reply_to) == (None, "replies")
    assert letter.raw_body == payload.decode("utf-8", errors="backslashreplace")
    message.acknowledge()  # a poison message can still be settled
    assert mailbox.approximate_count() == 0


def test_unreadable_metadata_still_delivers_an_undecodable_message(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    mailbox = make()
    mailbox.send("job")
    member = members(client, mailbox)[0]
    client.hset(mailbox.keys[2], member + b":m", b"garbage")

    message = only(mailbox.receive())

    assert message.id == member.decode()
    assert message.raw_body == b'"job"'
    with pytest.raises(MessageDecodeError):
        _ = message.body
    message.nack()


def test_a_custom_codec_replaces_json(make: Callable[..., RedisMailbox[Any, Any]]) -> None:
    class Upper:
        def encode(self, body: str) -> bytes:
            return body.upper().encode()

        def decode(self, payload: bytes) -> str:
            return payload.decode().lower()

    mailbox = make(codec=Upper())
    mailbox.send("hello")

    message = only(mailbox.receive())
    assert (message.body, message.raw_body) == ("hello", b"HELLO")


# -- long polls ------------------------------------------------------------------------


def evalsha_calls(client: redis.Redis[bytes]) -> int:
    stats: Any = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def test_a_long_poll_sleeps_on_the_server_until_a_delayed_message_is_due(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    mailbox = make()
    mailbox.send("later", delay=0.3)
    before = evalsha_calls(client)
    started = time.monotonic()

    messages = mailbox.receive(wait_time_seconds=5)

    assert [m.body for m in messages] == ["later"]
    assert 0.25 < time.monotonic() - started < 1.0
    assert evalsha_calls(client) - before <= 3  # no client-side spinning


def test_wake_ups_left_by_earlier_sends_do_not_make_a_long_poll_spin(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    mailbox = make()
    for n in range(20):  # each send leaves a wake-up token nobody was waiting for
        mailbox.send(n)
        only(mailbox.receive()).acknowledge()
    before = evalsha_calls(client)

    assert mailbox.receive(wait_time_seconds=0.1) == []
    assert evalsha_calls(client) - before <= 2


def test_concurrent_long_polls_deliver_each_message_once(
    make: Callable[..., RedisMailbox[Any, Any]],
) -> None:
    producer = make()
    consumers = [make() for _ in range(4)]
    received: list[int] = []
    lock = threading.Lock()

    def consume(mailbox: RedisMailbox[Any, Any]) -> None:
        while True:
            batch = mailbox.receive(max_messages=3, visibility_timeout=60, wait_time_seconds=0.5)
            if not batch:
                return
            with lock:
                received.extend(message.body for message in batch)
            for message in batch:
                message.acknowledge()

    threads = [threading.Thread(target=consume, args=(c,)) for c in consumers]
    for thread in threads:
        thread.start()
    for n in range(200):
        producer.send(n)
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(received) == list(range(200))
    assert producer.approximate_count() == 0


SOONER: dict[str, Callable[[Message[Any, Any]], object]] = {
    "nack": lambda message: message.nack(),
    "extend-to-zero": lambda message: message.extend_visibility(0),
}


@pytest.mark.parametrize("release", SOONER.values(), ids=SOONER.keys())
def test_releasing_a_message_wakes_a_long_poll(
    make: Callable[..., RedisMailbox[Any, Any]],
    release: Callable[[Message[Any, Any]], object],
) -> None:
    mailbox = make()
    mailbox.send("job")
    held = only(mailbox.receive(visibility_timeout=600))
    consumer = make()  # another consumer of the same queue
    timer = threading.Timer(0.05, release, args=(held,))
    started = time.monotonic()
    timer.start()
    try:
        messages = consumer.receive(wait_time_seconds=10)
    finally:
        timer.cancel()
        # The release may still be reading its reply: the test's teardown closes the
        # client (and the connection it reads on), so wait for it here.
        timer.join(timeout=30)

    assert not timer.is_alive()
    assert [(m.body, m.delivery_count) for m in messages] == [("job", 2)]
    assert time.monotonic() - started < 0.5


# -- options and errors ----------------------------------------------------------------


def test_max_size_rejects_sends_beyond_it(make: Callable[..., RedisMailbox[Any, Any]]) -> None:
    mailbox = make(max_size=2)
    mailbox.send(1)
    mailbox.send(2)

    with pytest.raises(MailboxFullError, match="max_size of 2"):
        mailbox.send(3)
    only(mailbox.receive()).acknowledge()
    mailbox.send(3)
    assert mailbox.approximate_count() == 2


BAD_OPTIONS: dict[str, tuple[dict[str, Any], str]] = {
    "empty-name": ({"name": ""}, "non-empty name"),
    "braces-in-namespace": ({"namespace": "a{b}"}, "braces"),
    "codec-and-body-type": ({"codec": JsonCodec(), "body_type": int}, "not both"),
    "short-ttl": ({"queue_ttl": timedelta(milliseconds=10)}, "queue_ttl"),
    "zero-max-size": ({"max_size": 0}, "max_size"),
}


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS.values(), ids=BAD_OPTIONS.keys())
def test_bad_options_are_rejected(
    client: redis.Redis[bytes], options: dict[str, Any], message: str
) -> None:
    kwargs: dict[str, Any] = {"name": "queue", "client": client, **options}
    name = kwargs.pop("name")

    with pytest.raises(MailboxArgumentError, match=message):
        RedisMailbox(name, **kwargs)


def test_an_empty_reply_to_name_is_rejected_and_nothing_is_sent(
    make: Callable[..., RedisMailbox[Any, Any]],
) -> None:
    mailbox = make("named")

    with pytest.raises(MailboxArgumentError, match="reply_to"):
        mailbox.send("job", reply_to="")
    assert mailbox.approximate_count() == 0
    assert repr(mailbox) == f"RedisMailbox(name='named', namespace={mailbox.namespace!r})"


def test_a_client_that_decodes_responses_is_rejected(redis_server: RedisEndpoint) -> None:
    with (
        redis_server.client(decode_responses=True) as decoding,
        pytest.raises(MailboxArgumentError, match="decode_responses=False"),
    ):
        RedisMailbox("queue", client=decoding)


def test_other_redis_errors_become_mailbox_errors(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    mailbox = make()
    client.set(mailbox.keys[0], "not a sorted set")

    with pytest.raises(MailboxError, match="running send") as caught:
        mailbox.send("job")
    assert not isinstance(caught.value, MailboxConnectionError)


def test_a_thousand_round_trips_take_well_under_a_few_seconds(
    make: Callable[..., RedisMailbox[Any, Any]],
) -> None:
    mailbox = make()
    started = time.monotonic()

    for n in range(1000):
        mailbox.send({"n": n})
        message = only(mailbox.receive())
        assert message.body == {"n": n}
        message.acknowledge()

    assert time.monotonic() - started < 15  # a generous bound: benchmarks live in bench/
    assert mailbox.approximate_count() == 0


def test_send_many_is_one_script_call_per_chunk_and_ack_all_one_per_batch(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    mailbox = make()
    n = SEND_CHUNK + 3
    before = evalsha_calls(client)

    ids = mailbox.send_many({"n": i} for i in range(n))

    assert evalsha_calls(client) - before == 2  # two chunks, one pipeline
    assert mailbox.approximate_count() == n == len(set(ids))
    first = list(mailbox.receive(max_messages=10))
    assert acknowledge_all(first) == []  # loads the script
    batch = list(mailbox.receive(max_messages=10))
    before = evalsha_calls(client)
    assert acknowledge_all(batch) == []
    assert evalsha_calls(client) - before == 1
    assert all(m.settled for m in batch)
    assert mailbox.approximate_count() == n - 20
    assert [m.body for m in first + batch] == [{"n": i} for i in range(20)]


def test_acknowledge_all_translates_errors_and_refuses_a_closed_mailbox(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    mailbox = make()
    mailbox.send_many(["a", "b"])
    batch = list(mailbox.receive(max_messages=10))
    client.delete(mailbox.keys[2])
    client.set(mailbox.keys[2], "not a hash")

    with pytest.raises(MailboxError, match="acknowledge_many"):
        acknowledge_all(batch)
    mailbox.close()
    with pytest.raises(MailboxClosedError):
        acknowledge_all(batch)


def test_scripts_flushed_from_the_server_are_loaded_again(
    make: Callable[..., RedisMailbox[Any, Any]], client: redis.Redis[bytes]
) -> None:
    mailbox = make()
    mailbox.send("before")
    client.script_flush()

    mailbox.send("after")

    assert [m.body for m in mailbox.receive(max_messages=10)] == ["before", "after"]
