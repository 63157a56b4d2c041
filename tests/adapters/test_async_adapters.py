"""The async adapter path: `aevaluate`, `is_async_adapter` and `AgentLoop.aexecute`.

`OpenAIAdapter.aevaluate` runs over real HTTP against the scripted fake server (the SDK's
async client is not mocked); `FunctionAdapter` takes an `async def` model.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import openai
import pytest
import trio

from tests.helpers.fake_openai_server import (
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
    completion,
    error,
)
from weakincentives.adapters import (
    AsyncProviderAdapter,
    FunctionAdapter,
    FunctionReply,
    ModelRequest,
    SQLiteResponseCache,
    is_async_adapter,
)
from weakincentives.adapters.openai import OpenAIAdapter
from weakincentives.clock import FakeClock, async_sleep
from weakincentives.errors import (
    ConfigurationError,
    ProviderServerError,
    RateLimitError,
    TurnLimitExceededError,
)
from weakincentives.experiment import Experiment
from weakincentives.prompt import (
    MarkdownSection,
    Prompt,
    PromptTemplate,
    Tool,
    ToolContext,
    ToolResult,
)
from weakincentives.runtime.agent_loop import AgentLoop
from weakincentives.runtime.session import PromptExecuted, Session, ToolInvoked

SECRET = "sk-test-async-7c1e"


@dataclass(frozen=True)
class Question:
    text: str


@dataclass(frozen=True)
class CityParams:
    city: str


@dataclass(frozen=True)
class Answer:
    text: str


def _weather(params: CityParams, ctx: ToolContext) -> ToolResult:
    del ctx
    return ToolResult(message=f"{params.city}: 21C", value=21)


WEATHER = Tool(
    name="weather", description="Temperature of a city.", params_type=CityParams, handler=_weather
)


def ask(text: str = "How warm is Paris?", *, output_type: type[Any] | None = None) -> Prompt[Any]:
    template = PromptTemplate[Any](
        ns="tests",
        key="ask",
        sections=(
            MarkdownSection("Role", "role", "Answer briefly."),
            MarkdownSection("Question", "question", "$text", Question, role="user"),
        ),
        tools=(WEATHER,),
        output_type=output_type,
    )
    return Prompt(template).bind(Question(text))


class Agent(AgentLoop[Question, Any]):
    def create_prompt(self, request: Question) -> Prompt[Any]:
        return ask(request.text)


# -- FunctionAdapter ---------------------------------------------------------------------


def _sync_model(request: ModelRequest) -> FunctionReply | str:
    if request.turn == 0:
        return FunctionReply.call("weather", city="Paris")
    return "It is " + request.tool_messages()[-1].content.split(": ")[1]  # type: ignore[union-attr]


async def _async_model(request: ModelRequest) -> FunctionReply | str:
    await asyncio.sleep(0)
    return _sync_model(request)


def _events(session: Session) -> list[Any]:
    executed = session[PromptExecuted].latest()
    assert executed is not None
    invoked = [(e.name, dict(e.params), e.result.message) for e in session[ToolInvoked].all()]
    return [executed.text, executed.model_requests, executed.tool_calls, invoked]


def test_async_function_model_gives_what_the_sync_one_gives() -> None:
    sync_session, async_session = Session(), Session()

    expected = FunctionAdapter(_sync_model).evaluate(ask(), session=sync_session)
    got = asyncio.run(FunctionAdapter(_async_model).aevaluate(ask(), session=async_session))

    assert got == expected
    assert got.text == "It is 21C"
    assert _events(async_session) == _events(sync_session)


def test_evaluate_runs_an_async_model_outside_an_event_loop_only() -> None:
    adapter = FunctionAdapter(_async_model)

    assert adapter.evaluate(ask(), session=Session()).text == "It is 21C"

    async def inside() -> None:
        adapter.evaluate(ask(), session=Session())

    with pytest.raises(ConfigurationError, match="aevaluate"):
        asyncio.run(inside())


def test_aevaluate_calls_a_sync_model_on_the_loop() -> None:
    response = asyncio.run(FunctionAdapter(_sync_model).aevaluate(ask(), session=Session()))

    assert response.text == "It is 21C"


def test_async_model_turn_limit_and_cache(tmp_path: Any) -> None:
    calls = 0

    async def counting(request: ModelRequest) -> str:
        nonlocal calls
        calls += 1
        return "hi"

    with SQLiteResponseCache(tmp_path / "cache.sqlite") as cache:
        adapter = FunctionAdapter(counting, cache=cache)
        first = asyncio.run(adapter.aevaluate(ask(), session=Session()))
        second = asyncio.run(adapter.aevaluate(ask(), session=Session()))
        assert (first.text, second.text, calls) == ("hi", "hi", 1)
        assert (cache.stats.hits, cache.stats.writes) == (1, 1)

    looping = FunctionAdapter(_always_call, max_turns=2)
    with pytest.raises(TurnLimitExceededError, match="2 turns"):
        asyncio.run(looping.aevaluate(ask(), session=Session()))


async def _always_call(request: ModelRequest) -> FunctionReply:
    return FunctionReply.call("weather", city="Oslo")


class _AsyncCallable:
    async def __call__(self, request: ModelRequest) -> str:
        return "ok"


@pytest.mark.parametrize(
    ("adapter", "expected"),
    [
        (FunctionAdapter(_async_model), True),
        (FunctionAdapter(_AsyncCallable()), True),
        (FunctionAdapter(_sync_model), False),
        (object(), False),
    ],
)
def test_is_async_adapter(adapter: object, expected: bool) -> None:
    assert is_async_adapter(adapter) is expected
    if expected:
        assert isinstance(adapter, AsyncProviderAdapter)


# -- OpenAIAdapter -------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as s:
        yield s


def _adapter(server: FakeOpenAIServer, **kwargs: Any) -> OpenAIAdapter:
    options: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": SECRET,
        "clock": FakeClock(),
        "rng": random.Random(3),
        **kwargs,
    }
    return OpenAIAdapter("test-model", **options)


def test_openai_is_async() -> None:
    adapter = OpenAIAdapter("m", base_url="http://127.0.0.1:9/v1")
    assert is_async_adapter(adapter)
    adapter.close()


def test_openai_aevaluate_sends_what_evaluate_sends(server: FakeOpenAIServer) -> None:
    script = (
        completion(tool_calls=[("weather", {"city": "Paris"})]),
        completion('{"text": "21C"}'),
    )
    server.enqueue(*script, *script)
    adapter = _adapter(server)
    sync_session, async_session = Session(), Session()

    expected = adapter.evaluate(ask(output_type=Answer), session=sync_session)
    got = asyncio.run(adapter.aevaluate(ask(output_type=Answer), session=async_session))

    assert got == expected
    assert got.output == Answer("21C")
    assert _events(async_session) == _events(sync_session)
    assert server.bodies[2:] == server.bodies[:2]
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)
    adapter.close()


def test_openai_aevaluate_retries_on_the_clock_and_translates_errors(
    server: FakeOpenAIServer,
) -> None:
    clock = FakeClock()
    server.enqueue(error(429, headers={"Retry-After": "2"}), completion("done"))
    adapter = _adapter(server, clock=clock, max_retries=1)

    response = asyncio.run(adapter.aevaluate(ask(), session=Session()))

    assert response.text == "done"
    assert clock.monotonic() == 2.0  # the Retry-After was awaited on the fake clock
    server.enqueue(error(503), error(503))
    with pytest.raises(ProviderServerError, match=r"HTTP 503.*gave up after 2 attempts"):
        asyncio.run(adapter.aevaluate(ask(), session=Session()))
    server.enqueue(error(429, f"bad key {SECRET}"))
    with pytest.raises(RateLimitError) as info:
        asyncio.run(_adapter(server, max_retries=0).aevaluate(ask(), session=Session()))
    assert SECRET not in str(info.value)
    adapter.close()


def test_openai_aevaluate_runs_concurrently_as_tasks(server: FakeOpenAIServer) -> None:
    n = 12
    # Every request waits at the barrier for the others: it only passes if all n are
    # in flight at once, on one event loop thread.
    barrier = threading.Barrier(n, timeout=10)

    def together(request: RecordedRequest) -> Reply:
        barrier.wait()
        return completion("ok")

    server.default = together
    adapter = _adapter(server)

    async def many() -> list[str | None]:
        answers = await asyncio.gather(
            *(adapter.aevaluate(ask(f"q{i}"), session=Session()) for i in range(n))
        )
        return [a.text for a in answers]

    assert asyncio.run(many()) == ["ok"] * n
    adapter.close()


def test_openai_async_client_per_event_loop(server: FakeOpenAIServer) -> None:
    server.default = completion("again")
    adapter = _adapter(server)

    for _ in range(3):  # each asyncio.run is a new loop; the client of the last one is closed
        assert asyncio.run(adapter.aevaluate(ask(), session=Session())).text == "again"

    async def close_and_reuse() -> str | None:
        await adapter.aevaluate(ask(), session=Session())
        await adapter.aclose()
        return (await adapter.aevaluate(ask(), session=Session())).text

    assert asyncio.run(close_and_reuse()) == "again"
    assert len(server.requests) == 5


def test_openai_given_async_client_is_used(server: FakeOpenAIServer) -> None:
    server.enqueue(completion("given"))
    client = openai.AsyncOpenAI(
        api_key="sk-given-0000", base_url=server.base_url, default_headers={"x-probe": "1"}
    )
    adapter = _adapter(server, async_client=client)

    async def run() -> str | None:
        async with client:  # the caller's client: closed by the caller
            return (await adapter.aevaluate(ask(), session=Session())).text

    assert asyncio.run(run()) == "given"
    (request,) = server.requests
    assert request.headers["x-probe"] == "1"
    assert request.headers["authorization"] == "Bearer sk-given-0000"
    adapter.close()


# -- AgentLoop -----------------------------------------------------------------------------


def test_agent_loop_aexecute_awaits_an_async_adapter() -> None:
    loop_threads: set[int] = set()

    async def model(request: ModelRequest) -> str:
        loop_threads.add(threading.get_ident())
        return "fine"

    agent = Agent(adapter=FunctionAdapter(model))
    before: list[Session] = []

    async def run() -> tuple[Any, Session, int]:
        response, session = await agent.aexecute(
            Question("q"), experiment=Experiment("variant"), on_prepared=before.append
        )
        return response, session, threading.get_ident()

    response, session, loop_thread = asyncio.run(run())

    assert agent.is_async
    assert response.text == "fine"
    assert before == [session]
    assert session[Experiment].latest() == Experiment("variant")
    assert loop_threads == {loop_thread}


def test_agent_loop_aexecute_runs_a_sync_adapter_in_a_thread() -> None:
    threads: set[int] = set()

    def model(request: ModelRequest) -> str:
        threads.add(threading.get_ident())
        return "fine"

    agent = Agent(adapter=FunctionAdapter(model))

    async def run() -> tuple[str | None, int]:
        response, _ = await agent.aexecute(Question("q"))
        return response.text, threading.get_ident()

    text, loop_thread = asyncio.run(run())

    assert not agent.is_async
    assert text == "fine"
    assert threads and loop_thread not in threads


def test_agent_loop_with_its_own_execute_is_not_async() -> None:
    class Custom(Agent):
        def execute(self, request: Question, **kwargs: Any) -> Any:
            response, session = super().execute(request, **kwargs)
            return response.__class__(prompt_name="custom", text="own", output=None), session

    async def model(request: ModelRequest) -> str:
        return "fine"

    agent = Custom(adapter=FunctionAdapter(model))

    async def run() -> str | None:
        return (await agent.aexecute(Question("q")))[0].text

    assert not agent.is_async
    assert asyncio.run(run()) == "own"


def test_async_sleep_uses_the_clock() -> None:
    clock = FakeClock()

    class Blocking:
        slept: float = 0.0

        def now(self) -> Any:
            return clock.now()

        def monotonic(self) -> float:
            return 0.0

        def sleep(self, seconds: float) -> None:
            self.slept += seconds

    blocking = Blocking()
    asyncio.run(async_sleep(clock, 5.0))
    asyncio.run(async_sleep(blocking, 1.5))

    assert clock.monotonic() == 5.0
    assert blocking.slept == 1.5


def test_openai_event_loops_in_two_threads_each_get_their_own_client(
    server: FakeOpenAIServer,
) -> None:
    server.default = completion("ok")
    adapter = _adapter(server)
    barrier = threading.Barrier(2, timeout=10)
    texts: list[str | None] = []

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

    assert texts == ["ok"] * 4
    adapter.close()


def test_openai_aevaluate_under_trio(server: FakeOpenAIServer) -> None:
    server.default = completion("from trio")
    adapter = _adapter(server)

    async def main() -> str | None:
        text = (await adapter.aevaluate(ask(), session=Session())).text
        await adapter.aclose()
        return text

    assert trio.run(main) == "from trio"
