"""The chat-completions wire helpers: decoding variants and `Retry-After` parsing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from weakincentives.adapters._openai_wire import decode_completion, excerpt, parse_retry_after
from weakincentives.errors import AdapterResponseError
from weakincentives.runtime.session import ToolCall

NOW = datetime(2024, 1, 1, tzinfo=UTC)


def _body(message: dict[str, Any], **extra: Any) -> bytes:
    return json.dumps({"choices": [{"message": message}], **extra}).encode()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("hi", "hi"),
        (None, None),
        ([{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}], "ab"),
        (42, "42"),
    ],
)
def test_content_shapes(content: object, expected: str | None) -> None:
    turn = decode_completion(_body({"content": content}), where="w", turn=0)
    assert turn.message.content == expected
    assert turn.model is None


def test_tool_call_without_arguments_gets_an_empty_object() -> None:
    call = {"id": "c1", "function": {"name": "ping", "arguments": None}}
    turn = decode_completion(_body({"tool_calls": [call]}, model="m"), where="w", turn=3)
    assert turn.message.tool_calls == (ToolCall(id="c1", name="ping", arguments="{}"),)
    assert turn.model == "m"


def test_tool_calls_that_are_not_a_list_are_rejected() -> None:
    with pytest.raises(AdapterResponseError, match="tool_calls is not a list"):
        decode_completion(_body({"tool_calls": {"name": "x"}}), where="w", turn=0)


def test_usage_ignores_non_integers() -> None:
    usage = {"prompt_tokens": "12", "completion_tokens": True, "prompt_tokens_details": {}}
    turn = decode_completion(_body({"content": "x"}, usage=usage), where="w", turn=0)
    assert turn.usage.total_tokens == 0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"Retry-After": "3"}, 3.0),
        ({"RETRY-AFTER": "-4"}, 0.0),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),
        ({"Retry-After": "Mon, 01 Jan 2024 00:01:00 GMT"}, 60.0),
        ({"Retry-After": "Mon, 01 Jan 2024 00:01:00 -0000"}, 60.0),  # no zone: GMT
        ({"Retry-After": "Sun, 31 Dec 2023 23:59:00 GMT"}, 0.0),  # in the past
        ({"Retry-After": "tomorrow"}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


def test_excerpt_shortens_long_text() -> None:
    assert excerpt("  short  ") == "short"
    assert excerpt("x" * 400, limit=10) == "x" * 10 + "..."
