"""`GeminiAdapter`: run prompts on Gemini through the official `google-genai` SDK.

Speaks `generateContent` natively: system prompts become the `system_instruction`,
tools are function declarations (JSON schema) and their answers `function_response`
parts, a template's output type becomes `response_json_schema` with
`response_mime_type="application/json"`, thinking is turned on with `thinking_budget=`
(thoughts are kept in the transcript, and function calls keep their thought signatures
for the next turn). Usage records cached-content tokens and thinking tokens.

Retries, timeouts, deadlines, budgets and the response cache behave as for
`OpenAIAdapter`; the SDK's retries are off, and the adapter's honour `Retry-After` and
Google's `RetryInfo` delay. `aevaluate` does the same through the SDK's async client
(`client.aio`) on the running asyncio loop, so an `AgentLoop` on this adapter runs its
samples as tasks (under trio, which that client does not support, the call runs in a
worker thread). Install with `pip install 'weakincentives[gemini]'`.

Examples:
    >>> adapter = GeminiAdapter("gemini-2.5-flash", api_key="...")  # doctest: +SKIP
    >>> adapter.evaluate(prompt, session=Session()).text  # doctest: +SKIP
    'Paris'
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping
from typing import Any

import anyio

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import AdapterResponseError, ConfigurationError

from ._gemini_wire import decode_generation, encode_config, encode_contents, retry_delay
from ._loop_clients import PerLoop
from ._openai_wire import excerpt, parse_retry_after
from ._remote import RemoteAdapter
from ._retry import (
    Failure,
    asend_with_retries,
    connection_failure,
    send_with_retries,
    status_failure,
    timeout_failure,
)
from ._types import ModelRequest, ModelTurn, ResponseCache

try:
    import httpx2
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "GeminiAdapter needs the google-genai SDK: pip install 'weakincentives[gemini]'"
    ) from exc

__all__ = ["GeminiAdapter"]

_NO_KEY = "no-key"
"""Sent as the key to a `base_url` server when none is configured (local servers need none)."""
_DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/"
"""Where the SDK sends requests when no base URL is given."""


class GeminiAdapter(RemoteAdapter):
    """Runs prompts on the Gemini API.

    Args:
        model: Model name; defaults to `GEMINI_MODEL`.
        base_url: API root; defaults to `GEMINI_BASE_URL`, then Google's.
        api_key: Defaults to `GEMINI_API_KEY`, then `GOOGLE_API_KEY`; may be left out when
            `base_url` is set.
        client: A ready `google.genai.Client` to use instead of `base_url`/`api_key` (the
            adapter does not close it; leave its retry options unset). `aevaluate` uses
            its `client.aio`; without one, each event loop gets a client of its own.
        max_output_tokens: Output tokens allowed per call (None: the model's default).
        thinking_budget: Thinking tokens per call (None: the model's default; 0: off).
        max_turns: Model calls allowed per run before `TurnLimitExceededError`.
        max_retries: Retries after a 429, a 5xx or a connection failure (0: none).
        timeout: Seconds one HTTP request may take; the run's deadline may shorten it.
        temperature: Sampling temperature (None: the model's default, 1).
        extra_body: Extra fields merged into every request body.
        clock: Clock for backoff sleeps, deadlines and timings.
        rng: Random source for backoff jitter (seed it for reproducible waits).
        cache: Response cache for model turns (None: every turn calls the server).
        cache_nondeterministic: Cache turns even at a sampling temperature.
        output_retries: Times a final answer that does not parse into the output type is
            sent back to the model with the parse error (0: fail at once).

    Raises:
        ConfigurationError: no model, no API key for Google itself, or a bad limit.
    """

    provider = "gemini"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: genai.Client | None = None,
        max_output_tokens: int | None = None,
        thinking_budget: int | None = None,
        max_turns: int = 16,
        max_retries: int = 3,
        timeout: float = 60.0,
        temperature: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        cache: ResponseCache | None = None,
        cache_nondeterministic: bool = False,
        output_retries: int = 1,
    ) -> None:
        model = model or os.environ.get("GEMINI_MODEL")
        if not model:
            raise ConfigurationError(
                "GeminiAdapter needs a model: pass model='...' or set GEMINI_MODEL",
            )
        super().__init__(
            model,
            max_turns=max_turns,
            max_retries=max_retries,
            timeout=timeout,
            temperature=temperature,
            extra_body=extra_body,
            clock=clock,
            rng=rng,
            cache=cache,
            cache_nondeterministic=cache_nondeterministic,
            output_retries=output_retries,
        )
        self.max_output_tokens = max_output_tokens
        self.thinking_budget = thinking_budget
        self._owns_client = client is None
        self._client, self._base_url, self._secret = _make_client(
            client, base_url=base_url, api_key=api_key
        )
        self._async_clients = _async_clients(
            None if client is None else client, base_url=self._base_url, api_key=self._secret
        )

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._base_url

    def _close_client(self) -> None:
        self._client.close()

    def _sdk_version(self) -> str:
        return str(genai.__version__)

    def _parameters(self) -> dict[str, Any]:
        return {
            **super()._parameters(),
            "max_output_tokens": self.max_output_tokens,
            "thinking_budget": self.thinking_budget,
        }

    def _call_model(self, request: ModelRequest) -> ModelTurn:
        config, contents, where = self._request(request)

        def send(timeout: float) -> str:
            response = self._client.models.generate_content(
                model=self.model, contents=contents, config=self._config(config, timeout)
            )
            raw = response.sdk_http_response
            return (raw.body or "") if raw is not None else ""

        body = send_with_retries(
            send,
            lambda exc, timeout: self._translate(exc, where, timeout),
            where=where,
            budget=request.timeout,
            policy=self._policy,
            redact=self._redact,
        )
        return self._decode(body, where, request.turn)

    async def _acall_model(self, request: ModelRequest) -> ModelTurn:
        if not _on_asyncio():
            # The SDK's async client needs asyncio: under trio, a worker thread makes
            # the sync call (anyio's, cancellable like the rest of the run).
            turn: ModelTurn = await anyio.to_thread.run_sync(self._call_model, request)
            return turn
        config, contents, where = self._request(request)
        client = await self._async_clients.get()

        async def send(timeout: float) -> str:
            response = await client.models.generate_content(
                model=self.model, contents=contents, config=self._config(config, timeout)
            )
            raw = response.sdk_http_response
            return (raw.body or "") if raw is not None else ""

        body = await asend_with_retries(
            send,
            lambda exc, timeout: self._translate(exc, where, timeout),
            where=where,
            budget=request.timeout,
            policy=self._policy,
            redact=self._redact,
        )
        return self._decode(body, where, request.turn)

    async def _aclose_clients(self) -> None:
        await self._async_clients.aclose()

    def _request(self, request: ModelRequest) -> tuple[dict[str, Any], Any, str]:
        """The request's config and contents, and where errors say it went."""
        config = encode_config(
            request,
            temperature=self.temperature,
            max_output_tokens=self.max_output_tokens,
            thinking_budget=self.thinking_budget,
        )
        # The raw body, decoded by us like the other adapters, rather than SDK models.
        config["should_return_http_response"] = True
        where = f"prompt {request.prompt_name}: model {self.model!r} at {self.base_url}"
        return config, encode_contents(request.messages), where

    def _config(self, config: dict[str, Any], timeout: float) -> Any:
        """`config` with this attempt's HTTP options, as a plain dict in the SDK's names."""
        http: dict[str, Any] = {"timeout": max(1, int(timeout * 1000))}
        if self.extra_body:
            http["extra_body"] = dict(self.extra_body)
        return {**config, "http_options": http}

    def _decode(self, body: str, where: str, turn: int) -> ModelTurn:
        try:
            return decode_generation(body, where=where, turn=turn)
        except AdapterResponseError as exc:
            if self._secret and self._secret in str(exc):  # the body echoed the key
                raise AdapterResponseError(self._redact(str(exc))) from None
            raise

    def _translate(self, exc: Exception, where: str, timeout: float) -> Failure | None:
        cause = None if self._secret and self._secret in f"{exc} {exc.__cause__}" else exc
        if isinstance(exc, httpx2.TimeoutException):
            return timeout_failure(where, timeout, cause)
        if isinstance(exc, httpx2.TransportError):
            return connection_failure(where, f"{type(exc).__name__}: {exc}", cause)
        if isinstance(exc, genai_errors.APIError):
            response = exc.response
            headers = getattr(response, "headers", None) or {}
            retry_after = parse_retry_after(dict(headers), now=self.clock.now())
            if retry_after is None:
                retry_after = retry_delay(exc.details)
            text = getattr(response, "text", None) or str(exc.message or "")
            return status_failure(
                int(exc.code),
                excerpt(str(text)) or "(empty body)",
                where,
                retry_after=retry_after,
                cause=cause,
            )
        return None


def _async_clients(given: genai.Client | None, *, base_url: str, api_key: str) -> PerLoop[Any]:
    """Where `aevaluate` gets its `client.aio`: the given client's, else one per loop."""
    if given is not None:
        aio = given.aio  # the caller's client: the caller closes it
        return PerLoop(lambda: aio, _leave_open)

    def make() -> Any:
        options = genai_types.HttpOptions(base_url=base_url)
        return genai.Client(api_key=api_key, vertexai=False, http_options=options).aio

    return PerLoop(make, lambda aio: aio.aclose())


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _leave_open(client: object) -> None:
    """The caller's client is the caller's to close."""
    del client


def _make_client(
    client: genai.Client | None, *, base_url: str | None, api_key: str | None
) -> tuple[genai.Client, str, str]:
    if client is not None:
        if base_url is not None or api_key is not None:
            raise ConfigurationError(
                "GeminiAdapter takes either client= or base_url=/api_key=, not both; "
                "configure the client instead",
            )
        # The client does not expose its address publicly; read it where the SDK keeps it.
        given = getattr(getattr(client, "_api_client", None), "_http_options", None)
        return client, str(getattr(given, "base_url", None) or _DEFAULT_BASE_URL), ""
    base_url = base_url or os.environ.get("GEMINI_BASE_URL") or None
    api_key = (
        api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY") or None
    )
    if api_key is None:
        if base_url is None:
            raise ConfigurationError(
                "GeminiAdapter needs an API key for Google: pass api_key='...' or set "
                "GEMINI_API_KEY (for a local server, pass base_url= or set GEMINI_BASE_URL)",
            )
        api_key = _NO_KEY
    # No retry options: the SDK makes one attempt and the adapter retries on its clock.
    options = genai_types.HttpOptions(base_url=base_url) if base_url else None
    try:
        made = genai.Client(api_key=api_key, vertexai=False, http_options=options)
    except (ValueError, genai_errors.APIError) as exc:
        raise ConfigurationError(f"cannot create the Gemini client: {exc}") from exc
    return made, base_url or _DEFAULT_BASE_URL, api_key
