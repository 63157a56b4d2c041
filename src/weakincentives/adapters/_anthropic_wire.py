"""Anthropic's Messages API wire format: requests out, turns in. No SDK types.

Pure functions shared by the sync adapter (and any async one): a `ModelRequest` becomes
the keyword arguments of `messages.create`, and a raw response body becomes a
`ModelTurn`. System messages go to the top-level `system` field; tool answers become
`tool_result` blocks of one user turn; an assistant turn keeps its thinking blocks
(signatures intact), which the API requires back when a thinking turn called tools.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from weakincentives.errors import AdapterResponseError
from weakincentives.runtime.session import ChatMessage, ThinkingBlock, TokenUsage, ToolCall

from ._openai_wire import excerpt
from ._types import ModelRequest, ModelTurn

__all__ = ["decode_message", "decode_usage", "encode_messages", "encode_request"]

_CACHE_CONTROL = {"type": "ephemeral"}


def encode_request(
    request: ModelRequest,
    *,
    model: str,
    max_tokens: int,
    thinking_budget: int | None = None,
    cache_prompt: bool = False,
    output_schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `messages.create` (timeout and extra body excluded).

    Args:
        request: The conversation and what the model may do.
        model: Model name.
        max_tokens: Output token limit (the API requires one).
        thinking_budget: Tokens of extended thinking (None: thinking off).
        cache_prompt: Mark the system prompt and tools as a prompt-cache breakpoint.
        output_schema: The schema to send for structured output (the adapter may have
            adjusted `request.output_schema` to what the API accepts).
    """
    system = [m.content or "" for m in request.messages if m.role == "system"]
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": encode_messages(request.messages),
    }
    if system:
        block: dict[str, Any] = {"type": "text", "text": "\n\n".join(system)}
        if cache_prompt:
            block["cache_control"] = dict(_CACHE_CONTROL)
        params["system"] = [block]
    if request.tools:
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in request.tools
        ]
        if cache_prompt:
            tools[-1]["cache_control"] = dict(_CACHE_CONTROL)
        params["tools"] = tools
    schema = output_schema if output_schema is not None else request.output_schema
    if schema is not None:
        params["output_config"] = {"format": {"type": "json_schema", "schema": dict(schema)}}
    if thinking_budget is not None:
        params["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    return params


def encode_messages(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    """The non-system messages as Messages API turns (tool answers merged into one turn)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id,
                "content": m.content or "",
            }
            if m.is_error:
                block["is_error"] = True
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role == "assistant":
            out.append({"role": "assistant", "content": _assistant_blocks(m)})
        else:
            out.append({"role": "user", "content": [{"type": "text", "text": m.content or ""}]})
    return out


def _assistant_blocks(message: ChatMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for t in message.thinking:
        if t.redacted:
            blocks.append({"type": "redacted_thinking", "data": t.signature or ""})
        else:
            blocks.append({"type": "thinking", "thinking": t.text, "signature": t.signature or ""})
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)})
    return blocks


def _input(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def decode_message(body: bytes, *, where: str) -> ModelTurn:
    """Decode a Messages API response body into a `ModelTurn`.

    Raises:
        AdapterResponseError: when the body is not JSON, not a message, or a refusal.
    """
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AdapterResponseError(
            f"{where}: the server answered 200 with a body that is not JSON: {excerpt(text)!r}; "
            "check that base_url points at an Anthropic Messages API root",
        ) from exc
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, list):
        raise AdapterResponseError(f"{where}: the response has no content list: {excerpt(text)!r}")
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[ThinkingBlock] = []
    for index, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            calls.append(_tool_use(block, index, where))
        elif kind == "thinking":
            thinking.append(
                ThinkingBlock(
                    text=str(block.get("thinking") or ""), signature=block.get("signature")
                )
            )
        elif kind == "redacted_thinking":
            thinking.append(ThinkingBlock(signature=str(block.get("data") or ""), redacted=True))
    if data.get("stop_reason") == "refusal" and not texts and not calls:
        raise AdapterResponseError(f"{where}: the model refused to answer: {excerpt(text)}")
    model = data.get("model")
    return ModelTurn(
        message=ChatMessage(
            role="assistant",
            content="".join(texts) if texts else None,
            tool_calls=tuple(calls),
            thinking=tuple(thinking),
        ),
        usage=decode_usage(data.get("usage")),
        model=model if isinstance(model, str) else None,
    )


def _tool_use(block: Mapping[str, Any], index: int, where: str) -> ToolCall:
    name = block.get("name")
    call_id = block.get("id")
    if not isinstance(name, str) or not name or not isinstance(call_id, str) or not call_id:
        raise AdapterResponseError(
            f"{where}: content block {index} is a tool_use without a name or id: "
            f"{excerpt(repr(dict(block)))}",
        )
    arguments = block.get("input")
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments or {}))


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def decode_usage(value: object) -> TokenUsage:
    """Messages API usage as a `TokenUsage`.

    Anthropic counts cache reads and writes apart from `input_tokens`; here they are
    added in, so `input_tokens` is every prompt token, as for the other providers.
    """
    if not isinstance(value, Mapping):
        return TokenUsage()
    read = _int(value.get("cache_read_input_tokens"))
    write = _int(value.get("cache_creation_input_tokens"))
    details = value.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, Mapping) else None
    return TokenUsage(
        input_tokens=_int(value.get("input_tokens")) + read + write,
        output_tokens=_int(value.get("output_tokens")),
        cached_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=_int(thinking),
    )
