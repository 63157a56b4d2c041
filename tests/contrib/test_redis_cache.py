"""`RedisResponseCache`: the `ResponseCache` protocol on Redis, shared by workers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import redis

from tests.helpers.redis_server import (
    RedisEndpoint,
    delete_namespace,
    free_port,
    unique_namespace,
)
from weakincentives.adapters import (
    CacheStats,
    FunctionAdapter,
    FunctionReply,
    ModelRequest,
    ResponseCache,
)
from weakincentives.contrib.cache import RedisResponseCache
from weakincentives.contrib.distributed import (
    DistributedWorker,
    WorkerOptions,
    WorkerSpec,
    run_distributed,
)
from weakincentives.errors import ConfigurationError
from weakincentives.evals import Experiment, Sample, exact_match
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop

pytestmark = pytest.mark.redis


@pytest.fixture
def client(redis_server: RedisEndpoint) -> Iterator[redis.Redis[bytes]]:
    with redis_server.client() as c:
        yield c


@pytest.fixture
def namespace(client: redis.Redis[bytes]) -> Iterator[str]:
    ns = unique_namespace()
    yield ns
    delete_namespace(client, ns)


def test_it_is_a_response_cache(client: redis.Redis[bytes], namespace: str) -> None:
    cache: ResponseCache = RedisResponseCache(client, namespace=namespace)

    assert cache.get("k") is None
    cache.put("k", b"\x00turn")
    cache.put("k", b"\x00turn v2")

    assert cache.get("k") == b"\x00turn v2"
    assert cache.stats == CacheStats(hits=1, misses=1, writes=2)


def test_namespaces_keep_caches_apart(client: redis.Redis[bytes], namespace: str) -> None:
    ours = RedisResponseCache(client, namespace=namespace)
    theirs = RedisResponseCache(client, namespace=f"{namespace}-other")
    globbed = RedisResponseCache(client, namespace=f"{namespace}*")
    try:
        ours.put("k", b"ours")
        theirs.put("k", b"theirs")
        theirs.put("j", b"theirs")
        globbed.put("k", b"globbed")

        assert ours.get("k") == b"ours"
        assert (len(ours), len(theirs), len(globbed)) == (1, 2, 1)
        assert ours.clear() == 1
        assert ours.get("k") is None and theirs.get("k") == b"theirs"
    finally:
        theirs.clear()
        globbed.clear()


def test_clear_deletes_in_batches(client: redis.Redis[bytes], namespace: str) -> None:
    cache = RedisResponseCache(client, namespace=namespace)
    for i in range(1203):
        cache.put(f"k{i}", b"v")

    assert cache.clear() == 1203
    assert len(cache) == 0


def test_entries_expire_after_the_ttl(client: redis.Redis[bytes], namespace: str) -> None:
    cache = RedisResponseCache(client, namespace=namespace, ttl=timedelta(milliseconds=50))
    forever = RedisResponseCache(client, namespace=f"{namespace}-forever")
    cache.put("k", b"v")
    forever.put("k", b"v")

    assert 0 < client.pttl(f"{namespace}:k") <= 50
    assert client.pttl(f"{namespace}-forever:k") == -1  # no expiry
    time.sleep(0.06)
    assert cache.get("k") is None
    forever.clear()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"namespace": ""}, "non-empty namespace"),
        ({"ttl": 0.0}, "at least a millisecond"),
        ({"ttl": timedelta(0)}, "at least a millisecond"),
    ],
)
def test_bad_settings_are_refused(
    client: redis.Redis[bytes], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RedisResponseCache(client, **kwargs)


def test_a_client_that_decodes_responses_is_refused(redis_server: RedisEndpoint) -> None:
    with (
        redis_server.client(decode_responses=True) as decoding,
        pytest.raises(ConfigurationError, match="decode_responses=False"),
    ):
        RedisResponseCache(decoding)


def test_an_unreachable_server_makes_misses_not_failures() -> None:
    nowhere = RedisEndpoint(f"redis://127.0.0.1:{free_port()}/0")
    with nowhere.client(socket_connect_timeout=0.5) as client:
        cache = RedisResponseCache(client)

        cache.put("k", b"v")

        assert cache.get("k") is None
        assert cache.stats == CacheStats(hits=0, misses=1, writes=0)


# -- two workers, one cache -------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    text: str


TEMPLATE = PromptTemplate[str](
    ns="test",
    key="echo",
    sections=(MarkdownSection("Question", "question", "$text", Question, role="user"),),
)


class Echo(AgentLoop[Question, str]):
    def create_prompt(self, request: Question) -> Prompt[str]:
        return Prompt(TEMPLATE).bind(request)


class CountingModel:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: ModelRequest) -> FunctionReply:
        self.calls += 1
        return FunctionReply(text=request.last_user_text().rsplit("\n", 1)[-1].upper())


def test_a_response_paid_for_by_one_worker_is_a_hit_for_another(
    redis_server: RedisEndpoint, namespace: str
) -> None:
    sample = Sample(id="q", input=Question("why"), expected="WHY")
    workers: list[tuple[DistributedWorker, CountingModel, RedisResponseCache]] = []
    for _ in range(2):
        client = redis_server.client()  # one connection per worker, as in two processes
        model = CountingModel()
        cache = RedisResponseCache(client, namespace=f"{namespace}-cache")
        spec = WorkerSpec(
            loop=Echo(adapter=FunctionAdapter(model, cache=cache)),
            evaluator=exact_match,
            input_type=Question,
            expected_type=str,
        )
        options = WorkerOptions(namespace=namespace, requests=f"requests-{len(workers)}")
        workers.append((DistributedWorker(spec, client=client, options=options), model, cache))

    reports = []
    for index, (worker, _, _) in enumerate(workers):
        worker.start()
        try:
            reports.append(
                run_distributed(
                    [sample],
                    [Experiment(name=f"run-{index}")],
                    redis_url=redis_server.url,
                    namespace=namespace,
                    requests=f"requests-{index}",
                    timeout=20,
                )
            )
        finally:
            assert worker.shutdown(10)

    (_, first_model, first_cache), (_, second_model, second_cache) = workers
    assert [r.pass_rate for r in reports] == [1.0, 1.0], reports[0].results[0]
    assert (first_model.calls, second_model.calls) == (1, 0)
    assert first_cache.stats == CacheStats(hits=0, misses=1, writes=1)
    assert second_cache.stats == CacheStats(hits=1, misses=0, writes=0)
    assert reports[1].results[0].usage == reports[0].results[0].usage  # replayed exactly
    first_cache.clear()
