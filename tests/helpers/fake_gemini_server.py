"""A scripted, local server speaking the Gemini API's `generateContent`.

The same machinery as `FakeOpenAIServer` (real HTTP on 127.0.0.1, an ephemeral port, a
queue of `Reply` values or responders), with builders for Gemini's shapes: candidates of
`parts` (`text`, `thought`, `functionCall` with an optional `thoughtSignature`),
`usageMetadata` (cached and thinking counts) and `{"error": {code, message, status}}`.

Example:
    with FakeGeminiServer() as server:
        server.enqueue(generate(calls=[("weather", {"city": "Oslo"})]), generate("9C"))
        adapter = GeminiAdapter("gemini-x", base_url=server.base_url, api_key="k")
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tests.helpers.fake_openai_server import FakeOpenAIServer, Reply

__all__ = ["FakeGeminiServer", "gemini_error", "gemini_usage", "generate"]

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class FakeGeminiServer(FakeOpenAIServer):
    """A `generateContent` server on 127.0.0.1 that answers from a script."""

    endpoint = ":generateContent"

    @property
    def base_url(self) -> str:
        """The API root to give a google-genai client (it adds `/v1beta/models/...`)."""
        return f"http://127.0.0.1:{self.port}"


def gemini_usage(
    prompt: int = 10,
    candidates: int = 5,
    *,
    cached: int | None = None,
    thoughts: int | None = None,
) -> dict[str, Any]:
    """A `usageMetadata` object; the cached and thinking counts are optional."""
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + (thoughts or 0),
    }
    if cached is not None:
        out["cachedContentTokenCount"] = cached
    if thoughts is not None:
        out["thoughtsTokenCount"] = thoughts
    return out


_DEFAULT_USAGE = gemini_usage()


def generate(
    text: str | None = None,
    *,
    calls: Sequence[tuple[str, Mapping[str, Any]]] = (),
    thoughts: Sequence[str] = (),
    signature: str | None = None,
    usage: Mapping[str, Any] | None = _DEFAULT_USAGE,
    model: str = "gemini-fake",
    finish_reason: str = "STOP",
    call_ids: bool = True,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A 200 `GenerateContentResponse`: thought parts, then `text`, then function calls.

    `signature` (base64) goes on the first function call, as Gemini's thinking models put
    it; function call ids are `fc_0`, `fc_1`, ... unless `call_ids=False`.
    """
    parts: list[dict[str, Any]] = [{"text": t, "thought": True} for t in thoughts]
    if text is not None:
        parts.append({"text": text})
    for i, (name, args) in enumerate(calls):
        call: dict[str, Any] = {"name": name, "args": dict(args)}
        if call_ids:
            call["id"] = f"fc_{i}"
        part: dict[str, Any] = {"functionCall": call}
        if signature is not None and i == 0:
            part["thoughtSignature"] = signature
        parts.append(part)
    data: dict[str, Any] = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish_reason}
        ],
        "modelVersion": model,
        "responseId": "resp-fake",
    }
    if usage is not None:
        data["usageMetadata"] = dict(usage)
    return Reply(body=json.dumps(data).encode(), headers=dict(headers or {}))


def gemini_error(
    status: int,
    message: str = "scripted error",
    *,
    headers: Mapping[str, str] | None = None,
    retry_delay: str | None = None,
) -> Reply:
    """An error in Google's `{"error": {...}}` shape; `retry_delay` adds a RetryInfo."""
    error: dict[str, Any] = {
        "code": status,
        "message": message,
        "status": _STATUS.get(status, "UNKNOWN"),
    }
    if retry_delay is not None:
        error["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
        ]
    return Reply(
        status=status, body=json.dumps({"error": error}).encode(), headers=dict(headers or {})
    )
