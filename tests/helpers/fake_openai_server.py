"""A scripted, local OpenAI-compatible chat-completions server for tests and benchmarks.

It is real HTTP on 127.0.0.1 (an ephemeral port, one thread per connection), so the
adapter, the SDK and the HTTP stack all run for real. Script what it answers with a
queue of `Reply` values (or callables that build one from the request), and read back
what it received from `requests`.

Example:
    with FakeOpenAIServer() as server:
        server.enqueue(error(429, headers={"Retry-After": "2"}), completion("hi"))
        adapter = OpenAIAdapter("m", base_url=server.base_url, api_key="k", clock=FakeClock())
        ...
        assert server.bodies[0]["model"] == "m"

When the queue is empty the server answers `default` (a 400 saying so unless given),
so a test that sends more requests than it scripted fails loudly.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self

__all__ = [
    "FakeOpenAIServer",
    "RecordedRequest",
    "Reply",
    "Responder",
    "completion",
    "drop",
    "error",
    "hang",
    "raw",
    "usage",
]

_HANG_LIMIT = 30.0
"""A hanging reply is released after this long even if the server is never closed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What the server does with one request."""

    status: int = 200
    """HTTP status."""
    body: bytes = b""
    """Response body."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers (e.g. `Retry-After`)."""
    content_type: str = "application/json"
    """Content-Type of the body."""
    delay: float = 0.0
    """Real seconds to wait before answering (simulated latency)."""
    action: Literal["respond", "hang", "drop"] = "respond"
    """`hang`: never answer (until the server closes); `drop`: close without answering."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    """HTTP method."""
    path: str
    """Request path, e.g. `/v1/chat/completions`."""
    headers: Mapping[str, str]
    """Headers, names in lower case."""
    body: bytes
    """Raw request body."""

    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body)


Responder = Callable[[RecordedRequest], Reply]
"""Builds the reply from the request (for echoing, counting, dynamic answers)."""


def usage(
    prompt_tokens: int = 10, completion_tokens: int = 5, cached_tokens: int | None = None
) -> dict[str, Any]:
    """A `usage` object; `cached_tokens` adds `prompt_tokens_details`."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return out


_DEFAULT_USAGE = usage()


def completion(
    text: str | None = None,
    *,
    tool_calls: Sequence[tuple[str, Mapping[str, Any] | str]] = (),
    usage: Mapping[str, Any] | None = _DEFAULT_USAGE,
    model: str = "fake-model",
    headers: Mapping[str, str] | None = None,
    delay: float = 0.0,
) -> Reply:
    """A 200 chat completion with `text` and/or `(name, arguments)` tool calls.

    Tool call ids are `call_0`, `call_1`, ... in order; `usage=None` leaves usage out.
    """
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
            },
        }
        for i, (name, args) in enumerate(tool_calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    data: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
            },
        ],
    }
    if usage is not None:
        data["usage"] = dict(usage)
    return Reply(body=json.dumps(data).encode(), headers=dict(headers or {}), delay=delay)


def error(
    status: int,
    message: str = "scripted error",
    *,
    headers: Mapping[str, str] | None = None,
    type_: str = "fake_error",
) -> Reply:
    """An error answer in OpenAI's `{"error": {...}}` shape."""
    body = {"error": {"message": message, "type": type_, "code": None, "param": None}}
    return Reply(status=status, body=json.dumps(body).encode(), headers=dict(headers or {}))


def raw(body: bytes | str, *, status: int = 200, content_type: str = "application/json") -> Reply:
    """Exactly `body`, for malformed answers."""
    data = body.encode() if isinstance(body, str) else body
    return Reply(status=status, body=data, content_type=content_type)


def hang() -> Reply:
    """Never answer (the handler waits until the server closes)."""
    return Reply(action="hang")


def drop() -> Reply:
    """Close the connection without answering."""
    return Reply(action="drop")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeOpenAIServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real providers
    timeout = 10.0  # idle keep-alive connections are closed after this
    server: _HTTPServer

    def do_POST(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        del format, args  # keep test output clean

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=self.rfile.read(length),
        )
        owner = self.server.owner
        reply = owner._next(request)
        if reply.delay > 0:
            owner._closing.wait(reply.delay)
        if reply.action != "respond":
            if reply.action == "hang":
                owner._closing.wait(_HANG_LIMIT)
            self.close_connection = True
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(reply.body)


class FakeOpenAIServer:
    """A chat-completions server on 127.0.0.1 that answers from a script.

    Args:
        *replies: Initial queue of replies (or responders), one per request.
        default: Answer once the queue is empty (None: a 400 saying the script ran out).

    Use it as a context manager, or call `start()` and `close()`. Thread-safe.
    """

    endpoint = "/chat/completions"
    """Path suffix of the one endpoint served; other paths get a 404."""

    def __init__(self, *replies: Reply | Responder, default: Reply | Responder | None = None):
        self.default = default
        self._queue: deque[Reply | Responder] = deque(replies)
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        """Bind an ephemeral port and serve in a background thread."""
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Release hanging requests, stop serving and free the port."""
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not started; use it as a context manager")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The `/v1` API root to give an OpenAI client."""
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *replies: Reply | Responder) -> None:
        """Append replies to the script."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> tuple[RecordedRequest, ...]:
        """Every request received, in order."""
        with self._lock:
            return tuple(self._requests)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests to `endpoint` received, in order."""
        return [r.json() for r in self.requests if self._serves(r.path)]

    def _serves(self, path: str) -> bool:
        return path.split("?", 1)[0].endswith(self.endpoint)

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            if not self._serves(request.path):
                name = type(self).__name__
                return error(404, f"{name} serves {self.endpoint}, not {request.path}")
            if self._queue:
                step = self._queue.popleft()
            elif self.default is not None:
                step = self.default
            else:
                number = len(self._requests)
                name = type(self).__name__
                return error(400, f"{name}: no scripted reply left for request {number}")
        return step if isinstance(step, Reply) else step(request)
