"""`AnthropicAdapter`: run prompts on Claude through the official `anthropic` SDK.

Speaks the Messages API natively: system prompts go to `system`, tools are Anthropic
tools and their answers `tool_result` blocks (failures marked `is_error`), a template's
output type becomes a JSON-schema `output_config` (structured outputs), extended thinking
is turned on with `thinking_budget=` and its blocks are kept in the transcript (and sent
back, signatures intact, on the next turn), and `cache_prompt=True` marks the system
prompt and tools as a prompt-cache breakpoint. Usage records cache reads and writes and
thinking tokens.

Retries, timeouts, deadlines, budgets and the response cache behave as for
`OpenAIAdapter` (see `weakincentives.adapters.openai`): the SDK's own retries are off and
the adapter's honour `retry-after`, sleep on the injected clock and stop at the deadline.
`aevaluate` does the same through `anthropic.AsyncAnthropic` on the running event loop
(one client per loop), so an `AgentLoop` on this adapter runs its samples as tasks.

Install with `pip install 'weakincentives[anthropic]'`.

Examples:
    >>> adapter = AnthropicAdapter("claude-sonnet-4-5", api_key="sk-ant-...")  # doctest: +SKIP
    >>> adapter.evaluate(prompt, session=Session()).text  # doctest: +SKIP
    'Paris'
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from typing import Any

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import AdapterResponseError, ConfigurationError

from ._anthropic_wire import decode_message, encode_request
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
    import anthropic
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "AnthropicAdapter needs the anthropic SDK: pip install 'weakincentives[anthropic]'"
    ) from exc

__all__ = ["AnthropicAdapter"]

_NO_KEY = "no-key"
"""Sent as the key to a `base_url` server when none is configured (local servers need none)."""
_MIN_THINKING = 1024
"""The smallest thinking budget the API accepts."""


class AnthropicAdapter(RemoteAdapter):
    """Runs prompts on Anthropic's Messages API.

    Args:
        model: Model name; defaults to `ANTHROPIC_MODEL`.
        base_url: API root (without `/v1`); defaults to `ANTHROPIC_BASE_URL`, then
            Anthropic's.
        api_key: Defaults to `ANTHROPIC_API_KEY`; may be left out when `base_url` is set.
        client: A ready `anthropic.Anthropic` client to use instead of `base_url`/`api_key`
            (its own retries are turned off; the adapter does not close it).
        async_client: A ready `anthropic.AsyncAnthropic` client for `aevaluate` (default:
            one per event loop, made with the sync client's key, URL and timeout, and
            closed with that loop).
        max_tokens: Output tokens allowed per model call (thinking included).
        thinking_budget: Tokens of extended thinking per call (None: off; at least 1024
            and below `max_tokens`).
        cache_prompt: Mark the system prompt and tools for Anthropic's prompt cache.
        max_turns: Model calls allowed per run before `TurnLimitExceededError`.
        max_retries: Retries after a 429, a 5xx (529 included) or a connection failure.
        timeout: Seconds one HTTP request may take; the run's deadline may shorten it.
        temperature: Sampling temperature (None: the API's default, 1).
        extra_body: Extra JSON fields for every request (e.g. `top_k`).
        clock: Clock for backoff sleeps, deadlines and timings.
        rng: Random source for backoff jitter (seed it for reproducible waits).
        cache: Response cache for model turns (None: every turn calls the server).
        cache_nondeterministic: Cache turns even at a sampling temperature.
        output_retries: Times a final answer that does not parse into the output type is
            sent back to the model with the parse error (0: fail at once).

    Raises:
        ConfigurationError: no model, no API key for Anthropic itself, or a bad limit.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: anthropic.Anthropic | None = None,
        async_client: anthropic.AsyncAnthropic | None = None,
        max_tokens: int = 4096,
        thinking_budget: int | None = None,
        cache_prompt: bool = False,
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
        model = model or os.environ.get("ANTHROPIC_MODEL")
        if not model:
            raise ConfigurationError(
                "AnthropicAdapter needs a model: pass model='...' or set ANTHROPIC_MODEL",
            )
        _check_thinking(max_tokens, thinking_budget)
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
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.cache_prompt = cache_prompt
        self._owns_client = client is None
        self._client = _make_client(client, base_url=base_url, api_key=api_key)
        self._secret = self._client.api_key or ""
        self._async_clients = _async_clients(self._client, async_client)

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return str(self._client.base_url)

    def _close_client(self) -> None:
        self._client.close()

    def _sdk_version(self) -> str:
        return str(anthropic.__version__)

    def _parameters(self) -> dict[str, Any]:
        return {
            **super()._parameters(),
            "max_tokens": self.max_tokens,
            "thinking_budget": self.thinking_budget,
        }

    def _call_model(self, request: ModelRequest) -> ModelTurn:
        params, where = self._request(request)

        def send(timeout: float) -> bytes:
            raw = self._client.messages.with_raw_response.create(**params, timeout=timeout)
            return raw.read()

        data = send_with_retries(
            send,
            lambda exc, timeout: self._translate(exc, where, timeout),
            where=where,
            budget=request.timeout,
            policy=self._policy,
            redact=self._redact,
        )
        return self._decode(data, where)

    async def _acall_model(self, request: ModelRequest) -> ModelTurn:
        params, where = self._request(request)
        client = await self._async_clients.get()

        async def send(timeout: float) -> bytes:
            raw = await client.messages.with_raw_response.create(**params, timeout=timeout)
            data: bytes = await raw.read()
            return data

        data = await asend_with_retries(
            send,
            lambda exc, timeout: self._translate(exc, where, timeout),
            where=where,
            budget=request.timeout,
            policy=self._policy,
            redact=self._redact,
        )
        return self._decode(data, where)

    async def _aclose_clients(self) -> None:
        await self._async_clients.aclose()

    def _request(self, request: ModelRequest) -> tuple[dict[str, Any], str]:
        """The SDK's keyword arguments for `request`, and where errors say it went."""
        schema = request.output_schema
        params = encode_request(
            request,
            model=self.model,
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
            cache_prompt=self.cache_prompt,
            # Structured outputs accept a subset of JSON schema; the SDK knows which.
            output_schema=anthropic.transform_schema(dict(schema)) if schema else None,
        )
        body: dict[str, Any] = dict(self.extra_body or {})
        if self.temperature is not None:
            body.setdefault("temperature", self.temperature)
        if body:
            params["extra_body"] = body
        return params, f"prompt {request.prompt_name}: model {self.model!r} at {self.base_url}"

    def _decode(self, data: bytes, where: str) -> ModelTurn:
        try:
            return decode_message(data, where=where)
        except AdapterResponseError as exc:
            if self._secret and self._secret in str(exc):  # the body echoed the key
                raise AdapterResponseError(self._redact(str(exc))) from None
            raise

    def _translate(self, exc: Exception, where: str, timeout: float) -> Failure | None:
        if not isinstance(exc, anthropic.AnthropicError):
            return None
        # The SDK's message may quote the response body: drop it from the chain if it
        # echoes the key (the chain is printed with every traceback).
        cause = None if self._secret and self._secret in f"{exc} {exc.__cause__}" else exc
        if isinstance(exc, anthropic.APITimeoutError):
            return timeout_failure(where, timeout, cause)
        if isinstance(exc, anthropic.APIConnectionError):
            inner = exc.__cause__
            detail = f"{type(inner).__name__}: {inner}" if inner else exc
            return connection_failure(where, detail, cause)
        if isinstance(exc, anthropic.APIStatusError):
            return status_failure(
                exc.status_code,
                excerpt(exc.response.text) or "(empty body)",
                where,
                retry_after=parse_retry_after(exc.response.headers, now=self.clock.now()),
                cause=cause,
            )
        return Failure(
            AdapterResponseError,
            f"{where}: the SDK failed on the answer: {type(exc).__name__}: {excerpt(str(exc))}",
            retryable=False,
            cause=cause,
        )


def _check_thinking(max_tokens: int, thinking_budget: int | None) -> None:
    if max_tokens < 1:
        raise ConfigurationError(f"max_tokens must be at least 1, got {max_tokens}")
    if thinking_budget is None:
        return
    if not _MIN_THINKING <= thinking_budget < max_tokens:
        raise ConfigurationError(
            f"thinking_budget must be at least {_MIN_THINKING} and below max_tokens "
            f"({max_tokens}), got {thinking_budget}",
        )


def _async_clients(
    sync: anthropic.Anthropic, given: anthropic.AsyncAnthropic | None
) -> PerLoop[anthropic.AsyncAnthropic]:
    """Where `aevaluate` gets its client: `given` everywhere, else one per event loop."""
    if given is not None:
        ready = given.with_options(max_retries=0)  # retries are ours, on the clock
        return PerLoop(lambda: ready, _leave_open)

    def make() -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=sync.api_key, base_url=sync.base_url, timeout=sync.timeout, max_retries=0
        )

    return PerLoop(make, lambda client: client.close())


async def _leave_open(client: object) -> None:
    """The caller's client is the caller's to close."""
    del client


def _make_client(
    client: anthropic.Anthropic | None, *, base_url: str | None, api_key: str | None
) -> anthropic.Anthropic:
    if client is not None:
        if base_url is not None or api_key is not None:
            raise ConfigurationError(
                "AnthropicAdapter takes either client= or base_url=/api_key=, not both; "
                "configure the client instead",
            )
        # Retries are ours (clock-driven, deadline-aware); the SDK's would sleep for real.
        return client.with_options(max_retries=0)
    base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
    if api_key is None:
        if base_url is None:
            raise ConfigurationError(
                "AnthropicAdapter needs an API key for Anthropic: pass api_key='...' or set "
                "ANTHROPIC_API_KEY (for a local server, pass base_url= or set "
                "ANTHROPIC_BASE_URL)",
            )
        api_key = _NO_KEY
    try:
        return anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0)
    except anthropic.AnthropicError as exc:
        raise ConfigurationError(f"cannot create the Anthropic client: {exc}") from exc
