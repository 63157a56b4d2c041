"""AnthropicAdapter specifics over real HTTP (the contract suite covers the common ground)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.adapters.test_openai import WEATHER, Forecast, ask
from tests.helpers.fake_anthropic_server import (
    FakeAnthropicServer,
    anthropic_usage,
    message,
)
from weakincentives.adapters.anthropic import AnthropicAdapter
from weakincentives.adapters.pricing import default_prices
from weakincentives.clock import FakeClock
from weakincentives.errors import AdapterResponseError, ConfigurationError
from weakincentives.runtime.session import PromptExecuted, Session, ThinkingBlock, TokenUsage

KEY = "sk-ant-test-5e8d2c"


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as s:
        yield s


def make(server: FakeAnthropicServer, **kwargs: Any) -> AnthropicAdapter:
    options: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": KEY,
        "clock": FakeClock(),
        "rng": random.Random(1),
        **kwargs,
    }
    return AnthropicAdapter("claude-haiku-4-5-20251001", **options)


def test_request_shape_system_tools_schema_cache_and_thinking(server: FakeAnthropicServer) -> None:
    server.enqueue(message('{"city": "Paris", "celsius": 21}'))

    with make(server, cache_prompt=True, thinking_budget=2048, max_tokens=8192) as adapter:
        adapter.evaluate(
            ask("How warm?", tools=(WEATHER,), output_type=Forecast), session=Session()
        )

    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert KEY in (request.headers.get("x-api-key") or request.headers.get("authorization", ""))
    assert "anthropic-version" in request.headers
    body = request.json()
    assert body["model"] == "claude-haiku-4-5-20251001"
    assert body["max_tokens"] == 8192
    assert body["system"] == [
        {
            "type": "text",
            "text": "## Role\n\nYou answer briefly.",
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert [m["role"] for m in body["messages"]] == ["user"]
    (tool,) = body["tools"]
    assert (tool["name"], tool["cache_control"]) == ("weather", {"type": "ephemeral"})
    assert tool["input_schema"]["properties"]["city"]["type"] == "string"
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert body["output_config"]["format"]["schema"]["additionalProperties"] is False
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in body


def test_thinking_blocks_are_kept_and_sent_back_with_the_tool_results(
    server: FakeAnthropicServer,
) -> None:
    server.enqueue(
        message(
            tool_uses=[("weather", {"city": "Oslo"})],
            thinking=[("Oslo is north.", "sig-abc")],
            redacted_thinking=["opaque=="],
            usage=anthropic_usage(10, 50, thinking=40),
        ),
        message("9C", thinking=[("Done.", "sig-def")]),
    )
    session = Session()

    with make(server, thinking_budget=1024) as adapter:
        response = adapter.evaluate(ask(tools=(WEATHER,)), session=session)

    assert response.text == "9C"
    assistant = [m for m in response.messages if m.role == "assistant"]
    assert assistant[0].thinking == (
        ThinkingBlock(text="Oslo is north.", signature="sig-abc"),
        ThinkingBlock(signature="opaque==", redacted=True),
    )
    assert assistant[1].thinking == (ThinkingBlock(text="Done.", signature="sig-def"),)
    second = server.bodies[1]["messages"]
    assert second[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Oslo is north.", "signature": "sig-abc"},
            {"type": "redacted_thinking", "data": "opaque=="},
            {"type": "tool_use", "id": "toolu_0", "name": "weather", "input": {"city": "Oslo"}},
        ],
    }
    assert second[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_0", "content": "Oslo: 9C"}],
    }
    assert response.usage.reasoning_tokens == 40


def test_cache_reads_and_writes_are_recorded_and_priced(server: FakeAnthropicServer) -> None:
    server.enqueue(
        message("hi", usage=anthropic_usage(20, 10, cache_read=0, cache_write=1000)),
        message("hi", usage=anthropic_usage(20, 10, cache_read=1000, cache_write=0)),
    )
    usages = []
    with make(server, cache_prompt=True) as adapter:
        for _ in range(2):
            session = Session()
            adapter.evaluate(ask(), session=session)
            executed = session[PromptExecuted].latest()
            assert executed is not None
            usages.append(executed.usage)

    assert usages == [
        TokenUsage(input_tokens=1020, output_tokens=10, cache_write_tokens=1000),
        TokenUsage(input_tokens=1020, output_tokens=10, cached_tokens=1000),
    ]
    prices = default_prices()
    write, read = (prices.cost("claude-haiku-4-5-20251001", u) for u in usages)
    assert write == pytest.approx((20 * 1.0 + 1000 * 1.25 + 10 * 5.0) / 1e6)
    assert read == pytest.approx((20 * 1.0 + 1000 * 0.1 + 10 * 5.0) / 1e6)


def test_temperature_and_extra_body_are_sent(server: FakeAnthropicServer) -> None:
    server.enqueue(message("ok"))

    with make(server, temperature=0.2, extra_body={"top_k": 5}) as adapter:
        adapter.evaluate(ask(), session=Session())

    body = server.bodies[0]
    assert (body["temperature"], body["top_k"]) == (0.2, 5)


def test_a_refusal_is_a_response_error(server: FakeAnthropicServer) -> None:
    server.enqueue(message(None, stop_reason="refusal"))

    with make(server) as adapter, pytest.raises(AdapterResponseError, match="refused"):
        adapter.evaluate(ask(), session=Session())


def test_configuration_from_the_environment(
    server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    server.enqueue(message("ok"))

    with AnthropicAdapter() as adapter:
        assert adapter.evaluate(ask(), session=Session()).text == "ok"

    assert server.bodies[0]["model"] == "claude-env"
    assert repr(adapter) == f"AnthropicAdapter(model='claude-env', base_url='{server.base_url}')"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "ANTHROPIC_MODEL"),
        ({"model": "m"}, "ANTHROPIC_API_KEY"),
        ({"model": "m", "api_key": "k", "max_turns": 0}, "max_turns"),
        ({"model": "m", "api_key": "k", "max_tokens": 0}, "max_tokens"),
        ({"model": "m", "api_key": "k", "thinking_budget": 100}, "thinking_budget"),
        ({"model": "m", "api_key": "k", "thinking_budget": 5000, "max_tokens": 4096}, "below"),
    ],
)
def test_configuration_errors(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], match: str
) -> None:
    for name in ("ANTHROPIC_MODEL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    with pytest.raises(ConfigurationError, match=match):
        AnthropicAdapter(**kwargs)
