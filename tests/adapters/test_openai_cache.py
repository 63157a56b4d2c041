"""OpenAIAdapter with a response cache, over real HTTP against the fake server; `with_cache`."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import calculator_model, calculator_tool
from tests.helpers.fake_openai_server import FakeOpenAIServer, Reply, completion, error, raw
from weakincentives.adapters import (
    CacheableAdapter,
    CacheStats,
    FunctionAdapter,
    FunctionReply,
    ModelRequest,
    PromptResponse,
    SQLiteResponseCache,
)
from weakincentives.adapters.openai import OpenAIAdapter
from weakincentives.clock import FakeClock
from weakincentives.errors import AdapterError
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate, Tool
from weakincentives.runtime.session import Session, ToolInvoked

SECRET = "sk-test-3f9a1c7e5b2d"
ANSWER = '{"value": 42.0}'


@dataclass(frozen=True)
class Question:
    text: str


@dataclass(frozen=True)
class Answer:
    value: float


@dataclass(frozen=True)
class AnswerWithUnit:
    value: float
    unit: str = ""


def ask(
    question: str = "What is 6 * 7?",
    *,
    tools: tuple[Tool[Any], ...] = (),
    output_type: type[Any] | None = None,
) -> Prompt[Any]:
    template = PromptTemplate[Any](
        ns="tests",
        key="cache",
        sections=(
            MarkdownSection("Role", "role", "You answer briefly."),
            MarkdownSection("Question", "question", "$text", Question, role="user"),
        ),
        tools=tools,
        output_type=output_type,
    )
    return Prompt(template).bind(Question(question))


AdapterFactory = Callable[..., OpenAIAdapter]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default=completion(ANSWER)) as s:
        yield s


@pytest.fixture
def cache_path(tmp_path: Path) -> Path:
    return tmp_path / "runs" / "response-cache.sqlite"


@pytest.fixture
def cache(cache_path: Path) -> Iterator[SQLiteResponseCache]:
    with SQLiteResponseCache(cache_path) as c:
        yield c


@pytest.fixture
def make_adapter(server: FakeOpenAIServer) -> Iterator[AdapterFactory]:
    made: list[OpenAIAdapter] = []

    def make(model: str = "test-model", **kwargs: Any) -> OpenAIAdapter:
        options: dict[str, Any] = {
            "base_url": server.base_url,
            "api_key": SECRET,
            "clock": FakeClock(),
            "rng": random.Random(7),
            "max_retries": 0,
            "temperature": 0,
            **kwargs,
        }
        adapter = OpenAIAdapter(model, **options)
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        adapter.close()


def run(adapter: OpenAIAdapter, prompt: Prompt[Any] | None = None) -> PromptResponse[Any]:
    return adapter.evaluate(prompt or ask(), session=Session())


# -- hits ---------------------------------------------------------------------------------------


def test_second_identical_run_is_served_from_the_cache(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, cache: SQLiteResponseCache
) -> None:
    adapter = make_adapter(cache=cache)

    first = run(adapter)
    second = run(adapter)

    assert len(server.requests) == 1
    assert second.text == first.text == ANSWER
    assert second.usage == first.usage  # a hit replays the recorded usage
    assert second.model == first.model == "fake-model"
    assert cache.stats == CacheStats(hits=1, misses=1, writes=1)


def test_tool_turns_are_replayed_and_tools_still_run(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, cache: SQLiteResponseCache
) -> None:
    server.enqueue(
        completion(tool_calls=[("calculate", {"a": 6, "op": "*", "b": 7})]),
        completion("42"),
    )
    adapter = make_adapter(cache=cache)
    prompt = ask(tools=(calculator_tool(),))
    run(adapter, prompt)

    session = Session()
    replay = adapter.evaluate(prompt, session=session)

    assert len(server.requests) == 2  # both turns came from the cache the second time
    assert replay.text == "42"
    assert [(e.name, e.result.value) for e in session[ToolInvoked].all()] == [("calculate", 42)]
    assert cache.stats == CacheStats(hits=2, misses=2, writes=2)


def test_the_cache_file_serves_a_new_adapter_and_cache_object(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, cache_path: Path
) -> None:
    with SQLiteResponseCache(cache_path) as first_process:
        run(make_adapter(cache=first_process))
    with SQLiteResponseCache(cache_path) as second_process:
        response = run(make_adapter(cache=second_process))
        assert second_process.stats == CacheStats(hits=1, misses=0, writes=0)
    assert len(server.requests) == 1
    assert response.text == ANSWER


# -- what the key covers -------------------------------------------------------------------------

CHANGES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # name: (adapter options, prompt options) of the second run; the first uses none.
    "nothing": ({}, {}),
    "question": ({}, {"question": "What is 6 * 8?"}),
    "model": ({"model": "other-model"}, {}),
    "temperature": ({"temperature": 0.5}, {}),
    "extra_body": ({"extra_body": {"top_p": 0.5}}, {}),
    "tools": ({}, {"tools": (calculator_tool(),)}),
    "output schema": ({}, {"output_type": Answer}),
    "other output schema": ({}, {"output_type": AnswerWithUnit}),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_a_change_to_what_the_model_sees_misses(
    change: str,
    server: FakeOpenAIServer,
    make_adapter: AdapterFactory,
    cache: SQLiteResponseCache,
) -> None:
    adapter_options, prompt_options = CHANGES[change]
    # cache_nondeterministic so that a temperature change is a key change, not a bypass.
    base: dict[str, Any] = {"cache": cache, "cache_nondeterministic": True}
    first_prompt = ask(output_type=Answer) if change == "other output schema" else ask()
    run(make_adapter(**base), first_prompt)

    run(make_adapter(**base, **adapter_options), ask(**prompt_options))

    hit = change == "nothing"
    assert len(server.requests) == (1 if hit else 2)
    assert cache.stats == CacheStats(hits=int(hit), misses=2 - int(hit), writes=2 - int(hit))


# -- what is not cached --------------------------------------------------------------------------

FAILURES: dict[str, Reply] = {
    "500": error(500, "overloaded"),
    "400": error(400, "bad request"),
    "not json": raw("<html>proxy error</html>"),
    "no choices": raw('{"choices": []}'),
    "no message": raw('{"choices": [{"index": 0}]}'),
}


@pytest.mark.parametrize("failure", FAILURES, ids=list(FAILURES))
def test_a_failed_call_is_not_cached(
    failure: str,
    server: FakeOpenAIServer,
    make_adapter: AdapterFactory,
    cache: SQLiteResponseCache,
) -> None:
    server.enqueue(FAILURES[failure])
    adapter = make_adapter(cache=cache)
    with pytest.raises(AdapterError):
        run(adapter)
    assert (len(cache), cache.stats.writes) == (0, 0)

    assert run(adapter).text == ANSWER  # asks the server again
    assert run(adapter).text == ANSWER  # and now the success is cached

    assert len(server.requests) == 2
    assert cache.stats == CacheStats(hits=1, misses=2, writes=1)


@pytest.mark.parametrize(
    "options",
    [
        {"temperature": 0.7},
        {"temperature": None},  # the server's default samples (OpenAI's is 1)
        {"temperature": None, "extra_body": {"temperature": 0.3}},
        {"temperature": 0, "extra_body": {"temperature": 0.3}},  # extra_body wins on the wire
    ],
    ids=["0.7", "server default", "extra_body", "extra_body over temperature"],
)
def test_a_sampling_temperature_bypasses_the_cache_by_default(
    options: dict[str, Any],
    server: FakeOpenAIServer,
    make_adapter: AdapterFactory,
    cache: SQLiteResponseCache,
) -> None:
    run(make_adapter(cache=cache, **options))
    run(make_adapter(cache=cache, **options))
    assert len(server.requests) == 2
    assert cache.stats == CacheStats()  # not even looked up
    assert len(cache) == 0

    run(make_adapter(cache=cache, cache_nondeterministic=True, **options))
    run(make_adapter(cache=cache, cache_nondeterministic=True, **options))
    assert len(server.requests) == 3
    assert cache.stats == CacheStats(hits=1, misses=1, writes=1)


def test_temperature_zero_in_extra_body_is_deterministic(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, cache: SQLiteResponseCache
) -> None:
    options = {"cache": cache, "temperature": None, "extra_body": {"temperature": 0}}
    run(make_adapter(**options))
    run(make_adapter(**options))
    assert len(server.requests) == 1
    assert server.bodies[0]["temperature"] == 0


def test_a_sampling_temperature_is_really_sent_when_extra_body_overrides_it(
    server: FakeOpenAIServer, make_adapter: AdapterFactory
) -> None:
    run(make_adapter(temperature=0, extra_body={"temperature": 0.3}))
    assert server.bodies[0]["temperature"] == 0.3  # why the cache treats it as sampling


# -- the API key ---------------------------------------------------------------------------------


def _stored_bytes(path: Path) -> bytes:
    """The database and its WAL/shared-memory files, as they are on disk."""
    files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
    return b"".join(f.read_bytes() for f in files if f.exists())


def test_the_api_key_never_reaches_the_cache_file(
    server: FakeOpenAIServer,
    make_adapter: AdapterFactory,
    cache: SQLiteResponseCache,
    cache_path: Path,
) -> None:
    server.enqueue(
        completion(tool_calls=[("calculate", {"a": 6, "op": "*", "b": 7})]),
        completion("42"),
        completion(f"Your key is {SECRET}."),  # a model that echoes the key
    )
    adapter = make_adapter(cache=cache)
    run(adapter, ask(tools=(calculator_tool(),)))
    echoed = run(adapter, ask("What is my key?"))

    assert echoed.text == f"Your key is {SECRET}."  # the run itself is not changed
    assert cache.stats.writes == 2  # the two calculator turns; not the echo
    assert run(adapter, ask("What is my key?")).text == ANSWER  # the echo was not replayed
    stored = _stored_bytes(cache_path)
    assert b"calculate" in stored  # the scan reads the real data
    assert SECRET.encode() not in stored
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)


def test_a_short_local_key_does_not_stop_caching(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, cache: SQLiteResponseCache
) -> None:
    # "k" is in every stored turn ("tokens"); a key that short guards nothing.
    adapter = make_adapter(api_key="k", cache=cache)
    run(adapter)
    run(adapter)
    assert len(server.requests) == 1


# -- with_cache ----------------------------------------------------------------------------------


def test_openai_with_cache_is_a_copy_sharing_the_client(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, cache: SQLiteResponseCache
) -> None:
    original = make_adapter(temperature=0.0, extra_body={"seed": 1}, max_turns=3)
    cached = original.with_cache(cache)

    assert type(cached) is OpenAIAdapter
    assert (cached.cache, original.cache) == (cache, None)
    assert (cached.model, cached.base_url, cached.temperature, cached.extra_body) == (
        original.model,
        original.base_url,
        original.temperature,
        original.extra_body,
    )
    assert cached.max_turns == 3
    run(cached)
    run(cached)
    assert len(server.requests) == 1
    run(original)
    assert len(server.requests) == 2  # the original stays uncached

    cached.close()  # the copy does not own the client
    run(original)
    assert len(server.requests) == 3
    run(cached.with_cache(None))
    assert len(server.requests) == 4


class CountingModel:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: ModelRequest) -> FunctionReply | str:
        self.calls += 1
        return calculator_model(request)


def test_function_adapter_with_cache_is_a_copy(cache: SQLiteResponseCache) -> None:
    model = CountingModel()
    original = FunctionAdapter(model, model_name="calc", max_turns=3)
    cached = original.with_cache(cache)

    assert (cached.cache, original.cache) == (cache, None)
    assert (cached.model, cached.model_name, cached.max_turns) == (model, "calc", 3)
    cached.evaluate(ask(), session=Session())
    cached.evaluate(ask(), session=Session())
    assert model.calls == 1
    original.evaluate(ask(), session=Session())
    assert model.calls == 2
    assert cached.with_cache(None).cache is None


class EvaluateOnly:
    def evaluate(self, prompt: Prompt[Any], *, session: Session, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_cacheable_adapter_protocol(make_adapter: AdapterFactory) -> None:
    assert isinstance(make_adapter(), CacheableAdapter)
    assert isinstance(FunctionAdapter(calculator_model), CacheableAdapter)
    assert not isinstance(EvaluateOnly(), CacheableAdapter)
