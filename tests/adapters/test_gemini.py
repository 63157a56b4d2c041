"""GeminiAdapter specifics over real HTTP (the contract suite covers the common ground)."""

from __future__ import annotations

import base64
import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.adapters.test_openai import WEATHER, Forecast, ask
from tests.helpers.fake_gemini_server import FakeGeminiServer, gemini_error, gemini_usage, generate
from weakincentives.adapters.gemini import GeminiAdapter
from weakincentives.clock import FakeClock
from weakincentives.errors import AdapterResponseError, ConfigurationError
from weakincentives.runtime.session import Session, ThinkingBlock, TokenUsage

KEY = "gm-test-key-91b3f0"


@pytest.fixture
def server() -> Iterator[FakeGeminiServer]:
    with FakeGeminiServer() as s:
        yield s


def make(server: FakeGeminiServer, **kwargs: Any) -> GeminiAdapter:
    options: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": KEY,
        "clock": FakeClock(),
        "rng": random.Random(1),
        **kwargs,
    }
    return GeminiAdapter("gemini-2.5-flash", **options)


def test_request_shape(server: FakeGeminiServer) -> None:
    server.enqueue(generate('{"city": "Paris", "celsius": 21}'))

    with make(server, temperature=0.0, thinking_budget=512, max_output_tokens=900) as adapter:
        adapter.evaluate(ask(tools=(WEATHER,), output_type=Forecast), session=Session())

    (request,) = server.requests
    assert request.path.endswith("/models/gemini-2.5-flash:generateContent")
    assert request.headers["x-goog-api-key"] == KEY
    body = request.json()
    assert body["systemInstruction"] == {"parts": [{"text": "## Role\n\nYou answer briefly."}]}
    assert [c["role"] for c in body["contents"]] == ["user"]
    (declaration,) = body["tools"][0]["functionDeclarations"]
    assert declaration["name"] == "weather"
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert set(config["responseJsonSchema"]["properties"]) == {"city", "celsius"}
    assert (config["temperature"], config["maxOutputTokens"]) == (0.0, 900)
    assert config["thinkingConfig"] == {"thinking_budget": 512, "include_thoughts": True}


def test_thoughts_and_signatures_are_kept_and_sent_back(server: FakeGeminiServer) -> None:
    signature = base64.b64encode(b"\x00\x01opaque").decode()
    server.enqueue(
        generate(
            calls=[("weather", {"city": "Oslo"})],
            thoughts=["Oslo is north."],
            signature=signature,
            usage=gemini_usage(10, 5, thoughts=30),
        ),
        generate("9C", usage=gemini_usage(40, 2, cached=32)),
    )

    with make(server, thinking_budget=1024) as adapter:
        response = adapter.evaluate(ask(tools=(WEATHER,)), session=Session())

    first = next(m for m in response.messages if m.role == "assistant")
    assert first.thinking == (ThinkingBlock(text="Oslo is north."),)
    assert first.tool_calls[0].signature == signature
    model_turn, answer = server.bodies[1]["contents"][1:]
    assert model_turn == {
        "role": "model",
        "parts": [
            {"text": "Oslo is north.", "thought": True},
            {
                "functionCall": {"id": "fc_0", "name": "weather", "args": {"city": "Oslo"}},
                "thoughtSignature": signature,
            },
        ],
    }
    assert answer == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "fc_0",
                    "name": "weather",
                    "response": {"result": "Oslo: 9C"},
                }
            }
        ],
    }
    assert response.usage == TokenUsage(
        input_tokens=50, output_tokens=37, cached_tokens=32, reasoning_tokens=30
    )


def test_function_calls_without_ids_get_made_up_ones(server: FakeGeminiServer) -> None:
    server.enqueue(generate(calls=[("weather", {"city": "Rome"})], call_ids=False), generate("27C"))

    with make(server) as adapter:
        response = adapter.evaluate(ask(tools=(WEATHER,)), session=Session())

    assert response.text == "27C"
    parts = server.bodies[1]["contents"][-1]["parts"]
    assert parts[0]["functionResponse"]["id"] == "call_0_0"


def test_retry_info_delay_is_honoured(server: FakeGeminiServer) -> None:
    clock = FakeClock()
    server.enqueue(gemini_error(429, "quota", retry_delay="7s"), generate("ok"))

    with make(server, clock=clock) as adapter:
        assert adapter.evaluate(ask(), session=Session()).text == "ok"

    assert clock.monotonic() == pytest.approx(7.0)


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (generate(None, finish_reason="SAFETY"), "blocked"),
        (
            generate(None).__class__(body=b'{"promptFeedback": {"blockReason": "SAFETY"}}'),
            "prompt was blocked",
        ),
    ],
)
def test_blocked_answers_are_response_errors(
    server: FakeGeminiServer, reply: Any, match: str
) -> None:
    server.enqueue(reply)

    with make(server) as adapter, pytest.raises(AdapterResponseError, match=match):
        adapter.evaluate(ask(), session=Session())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "GEMINI_MODEL"),
        ({"model": "m"}, "GEMINI_API_KEY"),
        ({"model": "m", "api_key": "k", "max_retries": -1}, "max_retries"),
    ],
)
def test_configuration_errors(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], match: str
) -> None:
    for name in ("GEMINI_MODEL", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    with pytest.raises(ConfigurationError, match=match):
        GeminiAdapter(**kwargs)
