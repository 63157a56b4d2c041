"""A scripted, local server speaking Anthropic's Messages API (`POST /v1/messages`).

The same machinery as `FakeOpenAIServer` (real HTTP on 127.0.0.1, an ephemeral port, a
queue of `Reply` values or responders), with builders for the Messages API's shapes:
content blocks (`text`, `tool_use`, `thinking`, `redacted_thinking`), `usage` with the
prompt-cache counters, and `{"type": "error", "error": {...}}` errors.

Example:
    with FakeAnthropicServer() as server:
        server.enqueue(message(tool_uses=[("weather", {"city": "Oslo"})]), message("9C"))
        adapter = AnthropicAdapter("claude-x", base_url=server.base_url, api_key="k")
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tests.helpers.fake_openai_server import FakeOpenAIServer, Reply

__all__ = ["FakeAnthropicServer", "anthropic_error", "anthropic_usage", "message"]


class FakeAnthropicServer(FakeOpenAIServer):
    """A Messages API server on 127.0.0.1 that answers from a script."""

    endpoint = "/v1/messages"

    @property
    def base_url(self) -> str:
        """The API root to give an Anthropic client (the SDK adds `/v1/messages`)."""
        return f"http://127.0.0.1:{self.port}"


def anthropic_usage(
    input_tokens: int = 10,
    output_tokens: int = 5,
    *,
    cache_read: int | None = None,
    cache_write: int | None = None,
    thinking: int | None = None,
) -> dict[str, Any]:
    """A `usage` object; the cache counters and thinking breakdown are optional."""
    out: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_read is not None:
        out["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        out["cache_creation_input_tokens"] = cache_write
    if thinking is not None:
        out["output_tokens_details"] = {"thinking_tokens": thinking}
    return out


_DEFAULT_USAGE = anthropic_usage()


def message(
    text: str | None = None,
    *,
    tool_uses: Sequence[tuple[str, Mapping[str, Any]]] = (),
    thinking: Sequence[tuple[str, str]] = (),
    redacted_thinking: Sequence[str] = (),
    usage: Mapping[str, Any] | None = _DEFAULT_USAGE,
    model: str = "claude-fake",
    stop_reason: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A 200 `message`: thinking blocks, then `text`, then `(name, input)` tool uses.

    Thinking blocks are `(thinking, signature)` pairs; tool use ids are `toolu_0`, ...
    """
    content: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": t, "signature": s} for t, s in thinking
    ]
    content += [{"type": "redacted_thinking", "data": d} for d in redacted_thinking]
    if text is not None:
        content.append({"type": "text", "text": text})
    content += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": dict(args)}
        for i, (name, args) in enumerate(tool_uses)
    ]
    data: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
    }
    if usage is not None:
        data["usage"] = dict(usage)
    return Reply(body=json.dumps(data).encode(), headers=dict(headers or {}))


def anthropic_error(
    status: int,
    message: str = "scripted error",
    *,
    headers: Mapping[str, str] | None = None,
    type_: str = "api_error",
) -> Reply:
    """An error in the Messages API's `{"type": "error", "error": {...}}` shape."""
    body = {"type": "error", "error": {"type": type_, "message": message}}
    return Reply(status=status, body=json.dumps(body).encode(), headers=dict(headers or {}))
