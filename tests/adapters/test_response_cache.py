from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import calculator_model, calculator_tool
from weakincentives.adapters import (
    CacheStats,
    FunctionAdapter,
    FunctionReply,
    ModelRequest,
    ModelTurn,
    ResponseCache,
)
from weakincentives.adapters._cache import (
    NullCache,
    SQLiteResponseCache,
    cache_key,
    cached_model_call,
    is_deterministic,
)
from weakincentives.errors import ConfigurationError
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate, ToolSpec
from weakincentives.runtime.session import ChatMessage, Session, TokenUsage, ToolCall, ToolInvoked

MESSAGES = (
    ChatMessage(role="system", content="Be brief."),
    ChatMessage(role="user", content="What is 2 + 2?"),
)
TOOLS = (
    ToolSpec("add", "Add numbers.", {"type": "object", "properties": {"a": {"type": "number"}}}),
)


@pytest.fixture(params=["file", "memory"])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLiteResponseCache]:
    path = tmp_path / "cache" / "responses.sqlite" if request.param == "file" else ":memory:"
    with SQLiteResponseCache(path) as c:
        yield c


class CountingModel:
    """`ModelRequest -> ModelTurn` that counts calls and can be told to fail."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def __call__(self, request: ModelRequest) -> ModelTurn:
        self.calls += 1
        if self.fail:
            raise ConnectionError("provider down")
        return ModelTurn(
            message=ChatMessage(
                role="assistant",
                content=f"answer {self.calls}",
                tool_calls=(ToolCall(id="call_1", name="add", arguments='{"a": 1}'),),
            ),
            usage=TokenUsage(input_tokens=10, output_tokens=self.calls, cached_tokens=2),
            model="m-2024",
        )


def request(content: str = "What is 2 + 2?", **fields: Any) -> ModelRequest:
    messages = (MESSAGES[0], ChatMessage(role="user", content=content))
    return ModelRequest(messages=messages, tools=TOOLS, **fields)


def test_cache_key_is_stable_for_equal_inputs() -> None:
    key = cache_key("m", MESSAGES, TOOLS, {"temperature": 0, "max_tokens": 5})
    assert key == cache_key("m", list(MESSAGES), list(TOOLS), {"max_tokens": 5, "temperature": 0})
    assert len(key) == 64 and all(c in "0123456789abcdef" for c in key)
    assert cache_key("m", MESSAGES) == cache_key("m", MESSAGES, (), None)
    assert cache_key("m", MESSAGES, output_schema={"a": 1, "b": 2}) == cache_key(
        "m", MESSAGES, output_schema={"b": 2, "a": 1}
    )


@pytest.mark.parametrize(
    "change",
    [
        {"model": "m2"},
        {"messages": (*MESSAGES, ChatMessage(role="assistant", content="4"))},
        {"messages": (MESSAGES[0], ChatMessage(role="user", content="What is 2 + 3?"))},
        {"messages": (MESSAGES[0], ChatMessage(role="system", content="What is 2 + 2?"))},
        {"tools": ()},
        {"tools": (ToolSpec("add", "Add two numbers.", TOOLS[0].parameters),)},
        {"parameters": {"temperature": 0, "max_tokens": 6}},
        {"parameters": {"temperature": 0, "max_tokens": 5, "seed": 1}},
        {"output_schema": {"type": "object"}},
    ],
)
def test_cache_key_changes_with_any_input(change: dict[str, Any]) -> None:
    base: dict[str, Any] = {
        "model": "m",
        "messages": MESSAGES,
        "tools": TOOLS,
        "parameters": {"temperature": 0, "max_tokens": 5},
        "output_schema": None,
    }
    assert cache_key(**base) != cache_key(**{**base, **change})


def test_get_put_and_stats(cache: SQLiteResponseCache) -> None:
    assert cache.get("k") is None
    cache.put("k", b"v1")
    cache.put("k", b"v2")  # replaces
    assert cache.get("k") == b"v2"
    assert cache.get("other") is None
    assert cache.stats == CacheStats(hits=1, misses=2, writes=2)
    assert cache.stats.hit_rate == pytest.approx(1 / 3)
    assert len(cache) == 1
    cache.clear()
    assert len(cache) == 0


def test_null_cache_never_hits() -> None:
    null: ResponseCache = NullCache()
    null.put("k", b"v")
    assert null.get("k") is None
    assert null.stats == CacheStats(misses=1)
    assert CacheStats().hit_rate == 0.0


def test_cached_call_counts_hits_and_misses_and_replays_exactly(
    cache: SQLiteResponseCache,
) -> None:
    model = CountingModel()
    call = cached_model_call(model, cache, model_name="m", parameters={"temperature": 0})
    first = call(request())
    again = call(request())
    other = call(request("What is 3 + 3?"))
    assert model.calls == 2
    assert again == first  # message, tool calls, usage and model name replayed as recorded
    assert other.message.content == "answer 2"
    assert cache.stats == CacheStats(hits=1, misses=2, writes=2)


def test_turn_index_and_timeout_do_not_change_the_key(cache: SQLiteResponseCache) -> None:
    model = CountingModel()
    call = cached_model_call(model, cache, model_name="m")
    call(request(turn=0, timeout=5.0, prompt_name="a"))
    call(request(turn=3, timeout=1.0, prompt_name="b"))
    call(request(output_schema={"type": "object"}))
    assert model.calls == 2


def test_only_successful_calls_are_cached(cache: SQLiteResponseCache) -> None:
    model = CountingModel(fail=True)
    call = cached_model_call(model, cache, model_name="m")
    for _ in range(2):
        with pytest.raises(ConnectionError, match="provider down"):
            call(request())
    assert model.calls == 2
    assert len(cache) == 0
    model.fail = False
    call(request())
    call(request())
    assert model.calls == 3
    assert cache.stats == CacheStats(hits=1, misses=3, writes=1)


@pytest.mark.parametrize(
    ("parameters", "opt_in", "calls"),
    [
        ({"temperature": 0.7}, False, 3),
        ({"temperature": 0.7}, True, 1),
        ({"temperature": 0}, False, 1),
        ({}, False, 1),
    ],
)
def test_nondeterministic_calls_are_not_cached_unless_asked(
    cache: SQLiteResponseCache, parameters: dict[str, Any], opt_in: bool, calls: int
) -> None:
    model = CountingModel()
    call = cached_model_call(
        model, cache, model_name="m", parameters=parameters, cache_nondeterministic=opt_in
    )
    for _ in range(3):
        call(request())
    assert model.calls == calls
    assert len(cache) == (0 if calls == 3 else 1)


def test_is_deterministic() -> None:
    assert is_deterministic(None)
    assert is_deterministic({"temperature": 0.0, "top_p": 0.5})
    assert not is_deterministic({"temperature": 1})


def test_a_value_that_no_longer_decodes_is_a_miss_and_is_replaced(
    cache: SQLiteResponseCache,
) -> None:
    model = CountingModel()
    call = cached_model_call(model, cache, model_name="m")
    key = cache_key("m", request().messages, request().tools, {})
    cache.put(key, b'{"message": "not a message"}')
    assert call(request()).message.content == "answer 1"
    assert call(request()).message.content == "answer 1"
    assert model.calls == 1


def test_the_cache_persists_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    model = CountingModel()
    with SQLiteResponseCache(path) as first:
        cached_model_call(model, first, model_name="m")(request())
    with SQLiteResponseCache(path) as second:
        replay = cached_model_call(model, second, model_name="m")(request())
        assert second.stats == CacheStats(hits=1)
        mode = second._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert model.calls == 1
    assert replay.message.content == "answer 1"
    assert mode == "wal"


def test_threads_share_one_cache(tmp_path: Path) -> None:
    threads, per_thread = 8, 50
    barrier = threading.Barrier(threads)
    with SQLiteResponseCache(tmp_path / "c.sqlite") as cache:

        def work(t: int) -> None:
            barrier.wait()
            for i in range(per_thread):
                cache.put(f"{t}-{i}", f"{t}-{i}".encode())
                assert cache.get(f"{t}-{i}") == f"{t}-{i}".encode()

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert len(cache) == threads * per_thread
        assert cache.stats == CacheStats(hits=400, writes=400)


def test_a_file_that_is_not_a_database_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigurationError, match="cannot open response cache"):
        SQLiteResponseCache(path)


def test_a_closed_cache_refuses_use(tmp_path: Path) -> None:
    cache = SQLiteResponseCache(tmp_path / "c.sqlite")
    cache.close()
    cache.close()
    with pytest.raises(ConfigurationError, match="is closed"):
        cache.get("k")


def test_database_errors_are_misses_not_failures(
    cache: SQLiteResponseCache, caplog: pytest.LogCaptureFixture
) -> None:
    cache._conn.execute("DROP TABLE responses")  # simulate a broken database
    cache.put("k", b"v")
    assert cache.get("k") is None
    assert cache.stats == CacheStats(misses=1)
    assert "write failed" in caplog.text and "lookup failed" in caplog.text


def _calculator_prompt() -> Prompt[Any]:
    template = PromptTemplate[Any](
        ns="tests",
        key="calc",
        sections=(MarkdownSection("Question", "question", "$question", role="user"),),
        tools=(calculator_tool(),),
    )
    return Prompt(template).bind(question="What is 6 * 7?")


class CountingFunction:
    """A function model that counts its calls."""

    def __init__(self, model: Callable[[ModelRequest], FunctionReply | str]) -> None:
        self.model = model
        self.calls = 0

    def __call__(self, req: ModelRequest) -> FunctionReply | str:
        self.calls += 1
        return self.model(req)


def test_function_adapter_uses_the_cache_and_still_runs_tools(cache: SQLiteResponseCache) -> None:
    model = CountingFunction(calculator_model)
    adapter = FunctionAdapter(model, cache=cache)
    first = adapter.evaluate(_calculator_prompt(), session=Session())
    session = Session()
    second = adapter.evaluate(_calculator_prompt(), session=session)
    assert model.calls == 2  # tool call turn + answer turn, once
    assert first.text == second.text == "42"
    assert first.usage == second.usage
    assert len(session[ToolInvoked].all()) == 1  # tools still run on a cache hit
    assert cache.stats == CacheStats(hits=2, misses=2, writes=2)

    other = CountingFunction(lambda req: "no tools for me")
    FunctionAdapter(other, model_name="other", cache=cache).evaluate(
        _calculator_prompt(), session=Session()
    )
    assert other.calls == 1  # another model name is another key


def test_function_adapter_without_cache_calls_every_time() -> None:
    model = CountingFunction(calculator_model)
    adapter = FunctionAdapter(model)
    adapter.evaluate(_calculator_prompt(), session=Session())
    adapter.evaluate(_calculator_prompt(), session=Session())
    assert model.calls == 4
