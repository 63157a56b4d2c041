"""The adapters under the adapter contract, each scripted in one provider-neutral language.

A test scripts turns with `Say` and `Call` (and token usage as a `TokenUsage`); each
backend turns them into its provider's wire format, served over real HTTP by a local
server speaking that protocol (OpenAI chat completions, Anthropic Messages, Gemini
`generateContent`), or played by the function model for `FunctionAdapter`. A backend
also reads back, in the same neutral terms, what the adapter sent: the tool results,
the last user text and the output schema of each request.
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.helpers.fake_anthropic_server import (
    FakeAnthropicServer,
    anthropic_error,
    anthropic_usage,
    message,
)
from tests.helpers.fake_gemini_server import FakeGeminiServer, gemini_error, gemini_usage, generate
from tests.helpers.fake_openai_server import (
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
    completion,
    error,
    usage,
)
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.clock import Clock
from weakincentives.runtime.session import TokenUsage

SECRET = "sk-contract-7c1d9e2f4a"

DEFAULT_USAGE = TokenUsage(input_tokens=10, output_tokens=5)


@dataclass(frozen=True)
class Say:
    """A final text turn."""

    text: str
    usage: TokenUsage = DEFAULT_USAGE


@dataclass(frozen=True)
class Call:
    """A turn of tool calls, `(name, arguments)` each."""

    calls: tuple[tuple[str, Mapping[str, Any]], ...]
    usage: TokenUsage = DEFAULT_USAGE


Step = Say | Call


@dataclass(frozen=True)
class SentToolResult:
    """A tool result as the adapter sent it back to the model."""

    content: str
    is_error: bool | None
    """None where the wire format has no error flag (OpenAI)."""


class HTTPBackend:
    """Shared part of the three real adapters served by a local fake server."""

    name = ""
    http = True
    server: FakeOpenAIServer

    def __enter__(self) -> HTTPBackend:
        self.server.start()
        self._made: list[Any] = []
        return self

    def __exit__(self, *exc: object) -> None:
        for adapter in self._made:
            adapter.close()
        self.server.close()

    def script(self, *steps: Step | Reply | Callable[[RecordedRequest], Reply]) -> None:
        self.server.enqueue(*(self.reply(s) if isinstance(s, Say | Call) else s for s in steps))

    @property
    def request_count(self) -> int:
        return len(self.server.requests)

    def make(self, clock: Clock, **kwargs: Any) -> Any:
        adapter = self.build(
            base_url=self.server.base_url,
            api_key=SECRET,
            clock=clock,
            rng=random.Random(3),
            **kwargs,
        )
        self._made.append(adapter)
        return adapter

    def build(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    def reply(self, step: Step) -> Reply:
        raise NotImplementedError

    def error(self, status: int, message: str = "busy", headers: Mapping[str, str] = {}) -> Reply:
        raise NotImplementedError

    def tool_results(self, index: int) -> list[SentToolResult]:
        raise NotImplementedError

    def last_user_text(self, index: int) -> str:
        raise NotImplementedError

    def sent_schema(self, index: int) -> Any:
        raise NotImplementedError


class OpenAIBackend(HTTPBackend):
    name = "openai"

    def __init__(self) -> None:
        self.server = FakeOpenAIServer()

    def build(self, **kwargs: Any) -> Any:
        from weakincentives.adapters.openai import OpenAIAdapter

        return OpenAIAdapter("contract-model", **kwargs)

    def reply(self, step: Step) -> Reply:
        u = step.usage
        wire = usage(u.input_tokens, u.output_tokens, u.cached_tokens or None)
        if isinstance(step, Say):
            return completion(step.text, usage=wire)
        return completion(tool_calls=list(step.calls), usage=wire)

    def error(self, status: int, message: str = "busy", headers: Mapping[str, str] = {}) -> Reply:
        return error(status, message, headers=headers)

    def tool_results(self, index: int) -> list[SentToolResult]:
        messages = self.server.bodies[index]["messages"]
        return [SentToolResult(m["content"], None) for m in messages if m["role"] == "tool"]

    def last_user_text(self, index: int) -> str:
        messages = self.server.bodies[index]["messages"]
        return str([m for m in messages if m["role"] == "user"][-1]["content"])

    def sent_schema(self, index: int) -> Any:
        fmt = self.server.bodies[index].get("response_format")
        return None if fmt is None else fmt["json_schema"]["schema"]


class AnthropicBackend(HTTPBackend):
    name = "anthropic"

    def __init__(self) -> None:
        self.server = FakeAnthropicServer()

    def build(self, **kwargs: Any) -> Any:
        from weakincentives.adapters.anthropic import AnthropicAdapter

        return AnthropicAdapter("contract-model", **kwargs)

    def reply(self, step: Step) -> Reply:
        u = step.usage
        wire = anthropic_usage(
            u.input_tokens - u.cached_tokens - u.cache_write_tokens,
            u.output_tokens,
            cache_read=u.cached_tokens,
            cache_write=u.cache_write_tokens,
        )
        if isinstance(step, Say):
            return message(step.text, usage=wire)
        return message(tool_uses=list(step.calls), usage=wire)

    def error(self, status: int, message: str = "busy", headers: Mapping[str, str] = {}) -> Reply:
        return anthropic_error(status, message, headers=headers)

    def _blocks(self, index: int) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for m in self.server.bodies[index]["messages"]:
            out += [(m["role"], b) for b in m["content"]]
        return out

    def tool_results(self, index: int) -> list[SentToolResult]:
        return [
            SentToolResult(b["content"], bool(b.get("is_error", False)))
            for _, b in self._blocks(index)
            if b["type"] == "tool_result"
        ]

    def last_user_text(self, index: int) -> str:
        texts = [b["text"] for r, b in self._blocks(index) if r == "user" and b["type"] == "text"]
        return str(texts[-1])

    def sent_schema(self, index: int) -> Any:
        config = self.server.bodies[index].get("output_config")
        return None if config is None else config["format"]["schema"]


class GeminiBackend(HTTPBackend):
    name = "gemini"

    def __init__(self) -> None:
        self.server = FakeGeminiServer()

    def build(self, **kwargs: Any) -> Any:
        from weakincentives.adapters.gemini import GeminiAdapter

        return GeminiAdapter("contract-model", **kwargs)

    def reply(self, step: Step) -> Reply:
        u = step.usage
        wire = gemini_usage(
            u.input_tokens,
            u.output_tokens - u.reasoning_tokens,
            cached=u.cached_tokens or None,
            thoughts=u.reasoning_tokens or None,
        )
        if isinstance(step, Say):
            return generate(step.text, usage=wire)
        return generate(calls=list(step.calls), usage=wire)

    def error(self, status: int, message: str = "busy", headers: Mapping[str, str] = {}) -> Reply:
        return gemini_error(status, message, headers=headers)

    def _parts(self, index: int) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for c in self.server.bodies[index]["contents"]:
            out += [(c["role"], p) for p in c["parts"]]
        return out

    def tool_results(self, index: int) -> list[SentToolResult]:
        out = []
        for _, p in self._parts(index):
            if "functionResponse" in p:
                response = p["functionResponse"]["response"]
                failed = "error" in response
                out.append(SentToolResult(response["error" if failed else "result"], failed))
        return out

    def last_user_text(self, index: int) -> str:
        texts = [p["text"] for r, p in self._parts(index) if r == "user" and "text" in p]
        return str(texts[-1])

    def sent_schema(self, index: int) -> Any:
        return self.server.bodies[index].get("generationConfig", {}).get("responseJsonSchema")


@dataclass
class FunctionBackend:
    """`FunctionAdapter` with a function model that plays the script (no HTTP)."""

    name: str = "function"
    http: bool = False
    steps: deque[Step | Callable[[ModelRequest], Any]] = field(default_factory=deque)
    requests: list[ModelRequest] = field(default_factory=list)

    def __enter__(self) -> FunctionBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def script(self, *steps: Step | Callable[[ModelRequest], Any]) -> None:
        self.steps.extend(steps)

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def model(self, request: ModelRequest) -> FunctionReply:
        self.requests.append(request)
        if not self.steps:
            raise AssertionError(f"FunctionBackend: no scripted turn left for turn {request.turn}")
        step = self.steps.popleft()
        if not isinstance(step, Say | Call):
            step = step(request)
            assert isinstance(step, Say | Call)
        if isinstance(step, Say):
            return FunctionReply(text=step.text, usage=step.usage)
        return FunctionReply(
            tool_calls=FunctionReply.calls(*((n, dict(a)) for n, a in step.calls)).tool_calls,
            usage=step.usage,
        )

    def make(self, clock: Clock, **kwargs: Any) -> FunctionAdapter:
        kwargs.pop("temperature", None)  # a function model has no sampling
        return FunctionAdapter(self.model, model_name="contract-model", clock=clock, **kwargs)

    def tool_results(self, index: int) -> list[SentToolResult]:
        return [
            SentToolResult(m.content or "", m.is_error)
            for m in self.requests[index].messages
            if m.role == "tool"
        ]

    def last_user_text(self, index: int) -> str:
        return self.requests[index].last_user_text()

    def sent_schema(self, index: int) -> Any:
        schema = self.requests[index].output_schema
        return None if schema is None else json.loads(json.dumps(dict(schema)))


Backend = HTTPBackend | FunctionBackend

BACKENDS: dict[str, Callable[[], Backend]] = {
    "openai": OpenAIBackend,
    "anthropic": AnthropicBackend,
    "gemini": GeminiBackend,
    "function": FunctionBackend,
}
HTTP_BACKENDS = ("openai", "anthropic", "gemini")
