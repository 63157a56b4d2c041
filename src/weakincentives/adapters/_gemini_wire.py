"""The Gemini API's `generateContent` wire format: requests out, turns in. No SDK types.

Pure functions shared by the sync adapter (and any async one). A `ModelRequest` becomes
the `contents` and `config` given to `models.generate_content` (plain dicts in the SDK's
field names); a raw response body becomes a `ModelTurn`. System messages become the
`system_instruction`; an assistant turn is a `model` turn whose function calls keep their
thought signatures (Gemini's thinking models require them back); tool answers become
`function_response` parts of one user turn.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from weakincentives.errors import AdapterResponseError
from weakincentives.runtime.session import ChatMessage, ThinkingBlock, TokenUsage, ToolCall

from ._openai_wire import excerpt
from ._types import ModelRequest, ModelTurn

__all__ = ["decode_generation", "decode_usage", "encode_config", "encode_contents", "retry_delay"]

_BLOCKED = {"SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def encode_config(
    request: ModelRequest,
    *,
    temperature: float | None,
    max_output_tokens: int | None = None,
    thinking_budget: int | None = None,
) -> dict[str, Any]:
    """The `GenerateContentConfig` fields for `request` (HTTP options excluded)."""
    config: dict[str, Any] = {}
    system = [m.content or "" for m in request.messages if m.role == "system"]
    if system:
        config["system_instruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    if request.tools:
        config["tools"] = [
            {
                "function_declarations": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "parameters_json_schema": dict(t.parameters),
                    }
                    for t in request.tools
                ]
            }
        ]
    if request.output_schema is not None:
        config["response_mime_type"] = "application/json"
        config["response_json_schema"] = dict(request.output_schema)
    if temperature is not None:
        config["temperature"] = temperature
    if max_output_tokens is not None:
        config["max_output_tokens"] = max_output_tokens
    if thinking_budget is not None:
        config["thinking_config"] = {"thinking_budget": thinking_budget, "include_thoughts": True}
    return config


def encode_contents(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    """The non-system messages as Gemini `Content` dicts (tool answers merged in one turn)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            key = "error" if m.is_error else "result"
            part = {
                "function_response": {
                    "id": m.tool_call_id,
                    "name": m.name or "",
                    "response": {key: m.content or ""},
                }
            }
            if out and out[-1]["role"] == "user" and "function_response" in out[-1]["parts"][0]:
                out[-1]["parts"].append(part)
            else:
                out.append({"role": "user", "parts": [part]})
        elif m.role == "assistant":
            out.append({"role": "model", "parts": _model_parts(m)})
        else:
            out.append({"role": "user", "parts": [{"text": m.content or ""}]})
    return out


def _model_parts(message: ChatMessage) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for t in message.thinking:
        thought: dict[str, Any] = {"text": t.text, "thought": True}
        if t.signature:
            thought["thought_signature"] = _unb64(t.signature)
        parts.append(thought)
    if message.content:
        parts.append({"text": message.content})
    for call in message.tool_calls:
        part: dict[str, Any] = {
            "function_call": {"id": call.id, "name": call.name, "args": _args(call)}
        }
        if call.signature:
            part["thought_signature"] = _unb64(call.signature)
        parts.append(part)
    if not parts:  # the API rejects a turn without parts
        parts.append({"text": ""})
    return parts


def _unb64(value: str) -> bytes:
    # Signatures travel base64-encoded in JSON; the SDK takes (and re-encodes) bytes.
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value.encode()


def _args(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def decode_generation(body: str, *, where: str, turn: int) -> ModelTurn:
    """Decode a `GenerateContentResponse` body into a `ModelTurn`.

    Args:
        body: The raw HTTP response body.
        where: Names the call in error messages.
        turn: The turn index, used to make up function call ids the server left out.

    Raises:
        AdapterResponseError: when the body is not JSON, has no candidate, or was blocked.
    """
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise AdapterResponseError(
            f"{where}: the server answered 200 with a body that is not JSON: {excerpt(body)!r}; "
            "check that base_url points at a Gemini API root",
        ) from exc
    if not isinstance(data, dict):
        raise AdapterResponseError(f"{where}: the response is not an object: {excerpt(body)!r}")
    candidates = data.get("candidates")
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
        feedback = data.get("promptFeedback")
        reason = feedback.get("blockReason") if isinstance(feedback, dict) else None
        if reason:
            raise AdapterResponseError(f"{where}: the prompt was blocked ({reason})")
        raise AdapterResponseError(f"{where}: the response has no candidates: {excerpt(body)!r}")
    candidate = candidates[0]
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list):
        parts = []
    texts, calls, thinking = _decode_parts(parts, where=where, turn=turn)
    finish = candidate.get("finishReason")
    if finish in _BLOCKED and not texts and not calls:
        raise AdapterResponseError(f"{where}: the answer was blocked ({finish})")
    model = data.get("modelVersion")
    return ModelTurn(
        message=ChatMessage(
            role="assistant",
            content="".join(texts) if texts else None,
            tool_calls=tuple(calls),
            thinking=tuple(thinking),
        ),
        usage=decode_usage(data.get("usageMetadata")),
        model=model if isinstance(model, str) else None,
    )


def _decode_parts(
    parts: list[Any], *, where: str, turn: int
) -> tuple[list[str], list[ToolCall], list[ThinkingBlock]]:
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[ThinkingBlock] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        signature = part.get("thoughtSignature")
        signature = signature if isinstance(signature, str) else None
        call = part.get("functionCall")
        if isinstance(call, dict):
            name = call.get("name")
            if not isinstance(name, str) or not name:
                raise AdapterResponseError(
                    f"{where}: a functionCall has no name: {excerpt(repr(part))}"
                )
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                call_id = f"call_{turn}_{len(calls)}"
            arguments = json.dumps(call.get("args") or {})
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments, signature=signature))
        elif part.get("thought") is True:
            thinking.append(ThinkingBlock(text=str(part.get("text") or ""), signature=signature))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    return texts, calls, thinking


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def decode_usage(value: object) -> TokenUsage:
    """`usageMetadata` as a `TokenUsage`.

    Gemini counts thinking apart from `candidatesTokenCount` (and bills it as output):
    here it is added in, so `output_tokens` is every generated token.
    """
    if not isinstance(value, Mapping):
        return TokenUsage()
    thoughts = _int(value.get("thoughtsTokenCount"))
    return TokenUsage(
        input_tokens=_int(value.get("promptTokenCount"))
        + _int(value.get("toolUsePromptTokenCount")),
        output_tokens=_int(value.get("candidatesTokenCount")) + thoughts,
        cached_tokens=_int(value.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
    )


def retry_delay(error_body: object) -> float | None:
    """Seconds from a `google.rpc.RetryInfo` detail (`"retryDelay": "37s"`), if any."""
    error = error_body.get("error") if isinstance(error_body, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    if not isinstance(details, list):
        return None
    for detail in details:
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = _DURATION.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None
