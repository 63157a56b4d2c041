"""`OpenAIAdapter`: run prompts against any OpenAI-compatible chat-completions server.

Built on the official `openai` SDK. Works with OpenAI itself and with compatible servers
(vLLM, Ollama, llama.cpp, LM Studio): point `base_url` (or `OPENAI_BASE_URL`) at their
`/v1` endpoint. Tools become function tools, a template's output type becomes a
JSON-schema `response_format`, and token usage (cached tokens included) is recorded.

Retries are the adapter's own, not the SDK's: 429, 5xx and connection failures are
retried up to `max_retries` times with exponential backoff and jitter, or after the
server's `Retry-After`, sleeping on the injected clock and never past the run's deadline.
Other 4xx answers fail at once; a request that times out is not retried.

With a `cache` (a `ResponseCache`, e.g. `SQLiteResponseCache`), each model turn is looked
up by the model name, the conversation, the tools, the output schema and the parameters
that change the answer (temperature, `extra_body`); a hit sends no request. Only turns
that succeeded are stored. A sampling temperature (> 0, and the server's default when
`temperature` is unset, which OpenAI documents as 1) bypasses the cache unless
`cache_nondeterministic=True`. The model name is what identifies the model: two servers
serving different weights under one name share entries.

Examples:
    >>> adapter = OpenAIAdapter("gpt-4o-mini", api_key="sk-test")  # doctest: +SKIP
    >>> adapter.evaluate(prompt, session=Session()).text  # doctest: +SKIP
    'Paris'
"""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import openai

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import (
    AdapterResponseError,
    ConfigurationError,
)
from weakincentives.prompt import Prompt
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.session import Session

from ._cache import acached_model_call, cached_model_call
from ._loop import arun_prompt, run_prompt
from ._openai_client import LoopClients, make_client
from ._openai_wire import decode_completion, encode_request, excerpt, parse_retry_after
from ._provenance import AdapterInfo, strip_credentials
from ._retry import (
    MIN_GUARDED_KEY,
    Failure,
    KeyFreeCache,
    RetryPolicy,
    asend_with_retries,
    check_limits,
    connection_failure,
    send_with_retries,
    status_failure,
    timeout_failure,
)
from ._types import Heartbeat, ModelRequest, ModelTurn, PromptResponse, ResponseCache

__all__ = ["OpenAIAdapter"]

OutputT = TypeVar("OutputT")

_SERVER_TEMPERATURE = 1.0
"""The temperature assumed when none is sent: OpenAI's documented default, which samples."""
_SETTINGS = ("temperature", "timeout", "max_turns", "max_retries", "output_retries")
"""`with_model` parameters that are adapter settings rather than request body fields."""


class OpenAIAdapter:
    """Runs prompts on an OpenAI-compatible chat-completions endpoint.

    Args:
        model: Model name; defaults to `OPENAI_MODEL`.
        base_url: API root such as `http://localhost:8000/v1`; defaults to `OPENAI_BASE_URL`,
            then OpenAI's.
        api_key: Defaults to `OPENAI_API_KEY`; may be left out when `base_url` is set.
        client: A ready `openai.OpenAI` client to use instead of `base_url`/`api_key`
            (its own retries are turned off; the adapter does not close it).
        async_client: A ready `openai.AsyncOpenAI` client for `aevaluate` (default: one
            per event loop, with the sync client's key, URL and timeout, closed when its
            loop shuts down).
        max_turns: Model calls allowed per run before `TurnLimitExceededError`.
        max_retries: Retries after a 429, a 5xx or a connection failure (0: none).
        timeout: Seconds one HTTP request may take; the run's deadline may shorten it.
        temperature: Sampling temperature (None: the server's default).
        extra_body: Extra JSON fields for every request (e.g. vLLM or Ollama options).
        clock: Clock for backoff sleeps, deadlines and timings.
        rng: Random source for backoff jitter (seed it for reproducible waits).
        cache: Response cache for model turns (None: every turn calls the server).
        cache_nondeterministic: Cache turns even at a sampling temperature (a replay then
            repeats one sample instead of drawing a new one).
        output_retries: Times a final answer that does not parse into the output type is
            sent back to the model with the parse error (0: fail at once).

    Raises:
        ConfigurationError: no model, no API key for OpenAI itself, or a bad limit.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.OpenAI | None = None,
        async_client: openai.AsyncOpenAI | None = None,
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
        model = model or os.environ.get("OPENAI_MODEL")
        if not model:
            raise ConfigurationError(
                "OpenAIAdapter needs a model: pass model='...' or set OPENAI_MODEL",
            )
        check_limits(max_turns=max_turns, max_retries=max_retries, timeout=timeout)
        if output_retries < 0:
            raise ConfigurationError(f"output_retries must be 0 or more, got {output_retries}")
        self.model = model
        self.output_retries = output_retries
        self.max_turns = max_turns
        self.max_retries = max_retries
        self.timeout = timeout
        self.temperature = temperature
        self.extra_body = dict(extra_body) if extra_body else None
        self.clock = clock
        self.cache = cache
        self.cache_nondeterministic = cache_nondeterministic
        self._rng = rng or random.Random()
        self._owns_client = client is None
        self._client = make_client(client, base_url=base_url, api_key=api_key)
        self._async_clients = LoopClients(self._client, async_client)
        self._secret = self._client.api_key or ""

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return str(self._client.base_url)

    def describe(self) -> AdapterInfo:
        """What this adapter talks to; see `DescribedAdapter`.

        The base URL has its credentials stripped; the parameters are those that change
        what the model does.

        Examples:
            >>> OpenAIAdapter("m", base_url="http://u:pw@localhost:8000/v1").describe().base_url
            'http://localhost:8000/v1/'
        """
        return AdapterInfo(
            provider="openai",
            model=self.model,
            base_url=strip_credentials(self.base_url),
            parameters={
                "temperature": self.temperature,
                "extra_body": dict(self.extra_body or {}),
                "max_turns": self.max_turns,
                "output_retries": self.output_retries,
            },
            adapter=f"{type(self).__module__}.{type(self).__qualname__}",
            version=openai.__version__,
        )

    def __repr__(self) -> str:
        # Never the key: reprs end up in logs and reports.
        return f"OpenAIAdapter(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def is_async(self) -> bool:
        """Always True: `aevaluate` uses the SDK's async client (see `AsyncProviderAdapter`)."""
        return True

    def close(self) -> None:
        """Close the HTTP connections of a client the adapter created itself."""
        if self._owns_client:
            self._client.close()

    async def aclose(self) -> None:
        """Close the async client of the running event loop (and the sync one, as `close`)."""
        if self._owns_client:
            await self._async_clients.aclose()
        self.close()

    def with_cache(self, cache: ResponseCache | None) -> Self:
        """A copy of this adapter using `cache` (None: no cache); see `CacheableAdapter`.

        The copy shares this adapter's HTTP client and leaves closing it to this adapter:
        `close()` on the copy does nothing.
        """
        clone = copy.copy(self)
        clone.cache = cache
        clone._owns_client = False
        return clone

    def with_model(self, model: str | None = None, **parameters: Any) -> Self:
        """A copy using `model` (None: the same) and sampling `parameters`; see `ModelConfigurable`.

        `temperature`, `timeout`, `max_turns` and `max_retries` set those settings; any
        other parameter (`top_p`, `max_tokens`, `seed`, ...) is sent in every request's
        body (merged over `extra_body`). The copy shares the HTTP client, as `with_cache`.

        Raises:
            ConfigurationError: a setting out of range, or a non-numeric temperature.
        """
        clone = copy.copy(self)
        clone._owns_client = False
        if model is not None:
            if not model:
                raise ConfigurationError("--model needs a model name")
            clone.model = model
        settings = {k: parameters.pop(k) for k in _SETTINGS if k in parameters}
        temperature = settings.pop("temperature", self.temperature)
        if temperature is not None and (
            isinstance(temperature, bool) or not isinstance(temperature, int | float)
        ):
            raise ConfigurationError(f"temperature must be a number, got {temperature!r}")
        clone.temperature = None if temperature is None else float(temperature)
        for name, value in settings.items():
            setattr(clone, name, value)
        check_limits(
            max_turns=clone.max_turns, max_retries=clone.max_retries, timeout=clone.timeout
        )
        if parameters:
            clone.extra_body = {**(self.extra_body or {}), **parameters}
        return clone

    def __enter__(self) -> OpenAIAdapter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def evaluate(
        self,
        prompt: Prompt[OutputT],
        *,
        session: Session,
        deadline: Deadline | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
    ) -> PromptResponse[OutputT]:
        """Run `prompt` on the model (see `ProviderAdapter.evaluate`).

        Raises:
            RateLimitError: 429 after every retry.
            ProviderServerError: 5xx after every retry.
            ProviderRequestError: another 4xx (bad model name, key or request).
            AdapterConnectionError: the server could not be reached after every retry.
            AdapterTimeoutError: a request got no answer within its timeout.
            AdapterResponseError: a malformed answer, or one that does not fit the output type.
            TurnLimitExceededError: the model was still calling tools after `max_turns`.
            DeadlineExceededError: `deadline` passed.
            BudgetExceededError: `budget` was exceeded.
        """
        call_model: Callable[[ModelRequest], ModelTurn] = self._call_model
        if self.cache is not None:
            call_model = cached_model_call(
                self._call_model,
                KeyFreeCache(self.cache, self._secret),
                model_name=self.model,
                parameters=self._cache_parameters(),
                cache_nondeterministic=self.cache_nondeterministic,
            )
        return run_prompt(
            prompt,
            session=session,
            call_model=call_model,
            deadline=deadline,
            budget=budget,
            heartbeat=heartbeat,
            max_turns=self.max_turns,
            output_retries=self.output_retries,
            clock=self.clock,
        )

    async def aevaluate(
        self,
        prompt: Prompt[OutputT],
        *,
        session: Session,
        deadline: Deadline | None = None,
        budget: Budget | None = None,
        heartbeat: Heartbeat | None = None,
    ) -> PromptResponse[OutputT]:
        """`evaluate` on the running event loop, through `openai.AsyncOpenAI`.

        Same requests, retries (backoff awaited, not slept), cache, events and errors as
        `evaluate`; a thousand of these in flight are a thousand tasks, not threads.
        """
        call_model: Callable[[ModelRequest], Awaitable[ModelTurn]] = self._acall_model
        if self.cache is not None:
            call_model = acached_model_call(
                self._acall_model,
                KeyFreeCache(self.cache, self._secret),
                model_name=self.model,
                parameters=self._cache_parameters(),
                cache_nondeterministic=self.cache_nondeterministic,
            )
        return await arun_prompt(
            prompt,
            session=session,
            call_model=call_model,
            deadline=deadline,
            budget=budget,
            heartbeat=heartbeat,
            max_turns=self.max_turns,
            output_retries=self.output_retries,
            clock=self.clock,
        )

    def _cache_parameters(self) -> dict[str, Any]:
        """What changes the answer besides the request itself: part of the cache key."""
        temperature: Any = self.temperature
        if self.extra_body is not None and "temperature" in self.extra_body:
            # The SDK merges extra_body over the request: its temperature is the one sent.
            temperature = self.extra_body["temperature"]
        if not isinstance(temperature, int | float) or isinstance(temperature, bool):
            temperature = _SERVER_TEMPERATURE
        # The effective temperature: `cached_model_call` bypasses the cache above 0.
        return {"temperature": float(temperature), "extra_body": self.extra_body or {}}

    def _call_model(self, request: ModelRequest) -> ModelTurn:
        params, where = self._params(request)

        def send(timeout: float) -> bytes:
            raw = self._client.chat.completions.with_raw_response.create(**params, timeout=timeout)
            return raw.content

        data = send_with_retries(
            send,
            lambda exc, timeout: self._translate(exc, where, timeout),
            where=where,
            budget=request.timeout,
            policy=self._policy,
            redact=self._redact,
        )
        return self._decode(data, where, request.turn)

    async def _acall_model(self, request: ModelRequest) -> ModelTurn:
        params, where = self._params(request)
        client = await self._async_clients.get()

        async def send(timeout: float) -> bytes:
            raw = await client.chat.completions.with_raw_response.create(**params, timeout=timeout)
            content: bytes = raw.content
            return content

        data = await asend_with_retries(
            send,
            lambda exc, timeout: self._translate(exc, where, timeout),
            where=where,
            budget=request.timeout,
            policy=self._policy,
            redact=self._redact,
        )
        return self._decode(data, where, request.turn)

    @property
    def _policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self.max_retries, timeout=self.timeout, clock=self.clock, rng=self._rng
        )

    def _params(self, request: ModelRequest) -> tuple[dict[str, Any], str]:
        """The SDK's keyword arguments for `request`, and where errors say it went."""
        params = encode_request(request, model=self.model, temperature=self.temperature)
        if self.extra_body:
            params["extra_body"] = self.extra_body
        return params, f"prompt {request.prompt_name}: model {self.model!r} at {self.base_url}"

    def _decode(self, content: bytes, where: str, turn: int) -> ModelTurn:
        try:
            return decode_completion(content, where=where, turn=turn)
        except AdapterResponseError as exc:
            if self._secret and self._secret in str(exc):  # the body echoed the key
                raise AdapterResponseError(self._redact(str(exc))) from None
            raise

    def _translate(self, exc: Exception, where: str, timeout: float) -> Failure | None:
        if not isinstance(exc, openai.OpenAIError):
            return None
        # The SDK's message may quote the response body; drop it from the chain if the
        # body echoes the key (the chain is printed with every traceback).
        cause = None if self._secret and self._secret in f"{exc} {exc.__cause__}" else exc
        if isinstance(exc, openai.APITimeoutError):
            return timeout_failure(where, timeout, cause)
        if isinstance(exc, openai.APIConnectionError):
            detail = f"{type(exc.__cause__).__name__}: {exc.__cause__}" if exc.__cause__ else exc
            return connection_failure(where, detail, cause)
        if isinstance(exc, openai.APIStatusError):
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

    def _redact(self, text: str) -> str:
        # A short key (a local server's placeholder) would mangle words, and is no secret.
        if len(self._secret) < MIN_GUARDED_KEY:
            return text
        return text.replace(self._secret, "***")
