"""`AnthropicAdapter.aevaluate` and `GeminiAdapter.aevaluate`: the SDKs' async clients.

Real HTTP against the local servers speaking each provider's protocol (the SDKs are not
mocked): the async path sends what the sync one sends, retries on the injected clock,
translates errors, keeps the key out of messages, runs many calls at once as tasks on
one event loop, and makes one client per event loop (asyncio in two threads, trio).
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import pytest
import trio
from google import genai

from tests.adapters.test_async_adapters import Answer, _events, ask
from tests.helpers.fake_anthropic_server import FakeAnthropicServer, anthropic_error, message
from tests.helpers.fake_gemini_server import FakeGeminiServer, gemini_error, generate
from tests.helpers.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply
from weakincentives.adapters import is_async_adapter
from weakincentives.adapters.anthropic import AnthropicAdapter
from weakincentives.adapters.gemini import GeminiAdapter
from weakincentives.clock import FakeClock
from weakincentives.errors import ProviderServerError, RateLimitError
from weakincentives.prompt import Prompt
from weakincentives.runtime.agent_loop import AgentLoop
from weakincentives.runtime.session import Session

SECRET = "sk-test-remote-async-4d2b"


@dataclass(frozen=True)
class Provider:
    """How to talk to one provider's fake server."""

    name: str
    server: Callable[[], FakeOpenAIServer]
    adapter: Callable[..., AnthropicAdapter | GeminiAdapter]
    text: Callable[[str], Reply]
    tool_call: Callable[[], Reply]
    error: Callable[..., Reply]


def _anthropic(server: FakeOpenAIServer, **kwargs: Any) -> AnthropicAdapter:
    return AnthropicAdapter("claude-x", base_url=server.base_url, api_key=SECRET, **kwargs)


def _gemini(server: FakeOpenAIServer, **kwargs: Any) -> GeminiAdapter:
    return GeminiAdapter("gemini-x", base_url=server.base_url, api_key=SECRET, **kwargs)


PROVIDERS = [
    Provider(
        "anthropic", FakeAnthropicServer, _anthropic, lambda text: message(text),
        lambda: message(tool_uses=[("weather", {"city": "Paris"})]), anthropic_error,
    ),
    Provider(
        "gemini", FakeGeminiServer, _gemini, lambda text: generate(text),
        lambda: generate(calls=[("weather", {"city": "Paris"})]), gemini_error,
    ),
]  # fmt: skip


@pytest.fixture(params=PROVIDERS, ids=[p.name for p in PROVIDERS])
def provider(request: pytest.FixtureRequest) -> Provider:
    chosen: Provider = request.param
    return chosen


@pytest.fixture
def server(provider: Provider) -> Iterator[FakeOpenAIServer]:
    with provider.server() as s:
        yield s


def make(
    provider: Provider, server: FakeOpenAIServer, **kwargs: Any
) -> AnthropicAdapter | GeminiAdapter:
    options: dict[str, Any] = {"clock": FakeClock(), "rng": random.Random(3), **kwargs}
    return provider.adapter(server, **options)


def test_both_are_async_adapters(provider: Provider, server: FakeOpenAIServer) -> None:
    adapter = make(provider, server)
    assert adapter.is_async and is_async_adapter(adapter)
    adapter.close()


def test_aevaluate_sends_what_evaluate_sends(provider: Provider, server: FakeOpenAIServer) -> None:
    script = (provider.tool_call(), provider.text('{"text": "21C"}'))
    server.enqueue(*script, *script)
    adapter = make(provider, server)
    sync_session, async_session = Session(), Session()

    expected = adapter.evaluate(ask(output_type=Answer), session=sync_session)
    got = asyncio.run(adapter.aevaluate(ask(output_type=Answer), session=async_session))

    assert got == expected
    assert got.output == Answer("21C")
    assert _events(async_session) == _events(sync_session)
    assert server.bodies[2:] == server.bodies[:2]  # the same two requests, byte for byte
    adapter.close()


def test_aevaluate_retries_on_the_clock_and_translates_errors(
    provider: Provider, server: FakeOpenAIServer
) -> None:
    clock = FakeClock()
    server.enqueue(provider.error(429, headers={"Retry-After": "2"}), provider.text("done"))
    adapter = make(provider, server, clock=clock, max_retries=1)

    response = asyncio.run(adapter.aevaluate(ask(), session=Session()))

    assert response.text == "done"
    assert clock.monotonic() == 2.0  # the Retry-After was awaited on the fake clock
    server.enqueue(provider.error(503), provider.error(503))
    with pytest.raises(ProviderServerError, match=r"503.*gave up after 2 attempts"):
        asyncio.run(adapter.aevaluate(ask(), session=Session()))
    server.enqueue(provider.error(429, f"bad key {SECRET}"))
    with pytest.raises(RateLimitError) as info:
        asyncio.run(make(provider, server, max_retries=0).aevaluate(ask(), session=Session()))
    assert SECRET not in str(info.value)
    adapter.close()


def test_aevaluate_runs_concurrently_as_tasks(provider: Provider, server: FakeOpenAIServer) -> None:
    n = 12
    # Every request waits at the barrier for the others: it only passes if all n are
    # in flight at once, on one event loop thread.
    barrier = threading.Barrier(n, timeout=10)

    def together(request: RecordedRequest) -> Reply:
        del request
        barrier.wait()
        return provider.text("ok")

    server.default = together
    adapter = make(provider, server)

    async def many() -> list[str | None]:
        answers = await asyncio.gather(
            *(adapter.aevaluate(ask(f"q{i}"), session=Session()) for i in range(n))
        )
        return [a.text for a in answers]

    assert asyncio.run(many()) == ["ok"] * n
    adapter.close()


def test_one_async_client_per_event_loop_and_under_trio(
    provider: Provider, server: FakeOpenAIServer
) -> None:
    server.default = provider.text("again")
    adapter = make(provider, server)

    for _ in range(3):  # each asyncio.run is a new loop; the client of the last is closed
        assert asyncio.run(adapter.aevaluate(ask(), session=Session())).text == "again"

    async def close_and_reuse() -> str | None:
        await adapter.aevaluate(ask(), session=Session())
        await adapter.aclose()
        return (await adapter.aevaluate(ask(), session=Session())).text

    assert asyncio.run(close_and_reuse()) == "again"
    texts: list[str | None] = []
    barrier = threading.Barrier(2, timeout=10)

    async def ask_twice() -> None:
        first = await adapter.aevaluate(ask(), session=Session())
        await asyncio.to_thread(barrier.wait)  # both loops have made their client
        second = await adapter.aevaluate(ask(), session=Session())  # still usable
        texts.extend([first.text, second.text])

    threads = [threading.Thread(target=asyncio.run, args=(ask_twice(),)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert texts == ["again"] * 4

    adapter.close()
    fresh = make(provider, server)  # `aclose` above closed the sync client too

    async def under_trio() -> str:
        text = str((await fresh.aevaluate(ask(), session=Session())).text)
        await fresh.aclose()
        return text

    assert trio.run(under_trio) == "again"
    assert len(server.requests) == 10


def test_a_given_async_client_is_used(provider: Provider, server: FakeOpenAIServer) -> None:
    server.enqueue(provider.text("given"))
    if provider.name == "anthropic":
        given = anthropic.AsyncAnthropic(
            api_key="sk-given-0000", base_url=server.base_url, default_headers={"x-probe": "1"}
        )
        adapter = make(provider, server, async_client=given)
        closer: Any = given.close
    else:
        client = genai.Client(
            api_key="sk-given-0000", vertexai=False,
            http_options={"base_url": server.base_url, "headers": {"x-probe": "1"}},
        )  # fmt: skip
        adapter = GeminiAdapter("gemini-x", client=client, clock=FakeClock())
        closer = client.aio.aclose

    async def run() -> str:
        text = str((await adapter.aevaluate(ask(), session=Session())).text)
        await closer()  # the caller's client: closed by the caller
        return text

    assert asyncio.run(run()) == "given"
    (request,) = server.requests
    assert request.headers["x-probe"] == "1"
    adapter.close()


class Agent(AgentLoop[str, Any]):
    def create_prompt(self, request: str) -> Prompt[Any]:
        return ask(request)


def test_an_agent_loop_on_them_is_async_and_awaits_them(
    provider: Provider, server: FakeOpenAIServer
) -> None:
    server.enqueue(provider.tool_call(), provider.text("21C"))
    adapter = make(provider, server)
    agent = Agent(adapter=adapter)

    assert agent.is_async
    response, _ = asyncio.run(agent.aexecute("How warm is Paris?"))

    assert response.text == "21C"
    assert len(server.requests) == 2
    adapter.close()
