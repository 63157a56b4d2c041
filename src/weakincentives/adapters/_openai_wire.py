"""The chat-completions wire format: requests out, turns in, `Retry-After` parsing.

Pure functions with no SDK types, so the shapes are easy to test and to reuse for
other OpenAI-compatible clients. Responses are decoded from the raw JSON instead of the
SDK's models: compatible servers (vLLM, Ollama, llama.cpp, LM Studio) differ in small
ways (`arguments` as an object, missing ids, missing usage) and we want one clear
`AdapterResponseError` for anything we cannot use.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from weakincentives.errors import AdapterResponseError
from weakincentives.runtime.session import ChatMessage, TokenUsage, ToolCall

from ._types import ModelRequest, ModelTurn

__all__ = [
    "decode_completion",
    "encode_message",
    "encode_request",
    "excerpt",
    "parse_retry_after",
]

_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")


def encode_message(message: ChatMessage) -> dict[str, Any]:
    """One `ChatMessage` in the chat-completions shape."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in message.tool_calls
        ]
    return out


def encode_request(
    request: ModelRequest, *, model: str, temperature: float | None
) -> dict[str, Any]:
    """Keyword arguments for `chat.completions.create` (timeouts and extras excluded)."""
    params: dict[str, Any] = {
        "model": model,
        "messages": [encode_message(m) for m in request.messages],
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in request.tools
        ]
    if request.output_schema is not None:
        name = request.output_type.__name__ if request.output_type is not None else "output"
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                # The API wants ^[a-zA-Z0-9_-]{1,64}$ here.
                "name": _SCHEMA_NAME.sub("_", name)[:64] or "output",
                "schema": dict(request.output_schema),
                # strict mode rejects common schemas (defaults, open objects); the loop
                # validates the answer against the output type anyway.
                "strict": False,
            },
        }
    if temperature is not None:
        params["temperature"] = temperature
    return params


def excerpt(text: str, limit: int = 300) -> str:
    """`text` shortened to `limit` characters for an error message."""
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "..."


def decode_completion(body: bytes, *, where: str, turn: int) -> ModelTurn:
    """Decode a chat-completions response body into a `ModelTurn`.

    Args:
        body: The raw HTTP response body.
        where: Names the call in error messages (prompt and server).
        turn: The turn index, used to make up tool call ids a server left out.

    Raises:
        AdapterResponseError: when the body is not JSON or has no usable choice.
    """
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AdapterResponseError(
            f"{where}: the server answered 200 with a body that is not JSON: {excerpt(text)!r}; "
            "check that base_url points at an OpenAI-compatible /v1 endpoint",
        ) from exc
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AdapterResponseError(
            f"{where}: the response has no choices: {excerpt(text)!r}",
        )
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise AdapterResponseError(
            f"{where}: the first choice has no message object: {excerpt(text)!r}",
        )
    content = _content(message.get("content"))
    calls = _tool_calls(message.get("tool_calls"), where=where, turn=turn)
    refusal = message.get("refusal")
    if refusal and not content and not calls:
        raise AdapterResponseError(f"{where}: the model refused to answer: {excerpt(str(refusal))}")
    model = data.get("model")
    return ModelTurn(
        message=ChatMessage(role="assistant", content=content, tool_calls=calls),
        usage=_usage(data.get("usage")),
        model=model if isinstance(model, str) else None,
    )


def _content(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts, as some servers send them
        texts = [p.get("text") for p in value if isinstance(p, dict)]
        return "".join(t for t in texts if isinstance(t, str))
    return str(value)


def _tool_calls(value: object, *, where: str, turn: int) -> tuple[ToolCall, ...]:
    if not value:
        return ()
    if not isinstance(value, list):
        raise AdapterResponseError(f"{where}: tool_calls is not a list: {excerpt(repr(value))}")
    calls: list[ToolCall] = []
    for index, raw in enumerate(value):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            raise AdapterResponseError(
                f"{where}: tool call {index} has no function name: {excerpt(repr(raw))}",
            )
        name = str(function["name"])
        arguments = function.get("arguments")
        if arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):  # some servers send the object itself
            arguments = json.dumps(arguments)
        call_id = raw.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_{turn}_{index}"
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return tuple(calls)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(value: object) -> TokenUsage:
    if not isinstance(value, Mapping):
        return TokenUsage()
    details = value.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    output = value.get("completion_tokens_details")
    reasoning = output.get("reasoning_tokens") if isinstance(output, Mapping) else None
    return TokenUsage(
        input_tokens=_int(value.get("prompt_tokens")),
        output_tokens=_int(value.get("completion_tokens")),
        cached_tokens=_int(cached),
        reasoning_tokens=_int(reasoning),
    )


def parse_retry_after(headers: Mapping[str, str], *, now: datetime) -> float | None:
    """Seconds to wait before retrying, from `retry-after-ms` or `Retry-After`.

    `Retry-After` may be a number of seconds or an HTTP date (compared with `now`).
    Returns None when there is no usable header; never a negative number.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000" or an asctime date; HTTP dates are always GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
