"""What every adapter of a hosted model shares: limits, the response cache, the loop.

`RemoteAdapter` holds the settings common to the Anthropic and Gemini adapters (model,
turn and retry limits, timeout, temperature, clock, jitter, response cache) and runs a
prompt through `run_prompt` (`evaluate`) or `arun_prompt` (`aevaluate`, on the running
event loop); a subclass says how one model call goes (`_call_model`, and `_acall_model`
through its SDK's async client), which provider it is and which SDK it talks through.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from weakincentives.clock import Clock
from weakincentives.errors import ConfigurationError
from weakincentives.prompt import Prompt
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.session import Session

from ._cache import acached_model_call, cached_model_call
from ._loop import arun_prompt, run_prompt
from ._provenance import AdapterInfo, strip_credentials
from ._retry import MIN_GUARDED_KEY, KeyFreeCache, RetryPolicy, check_limits
from ._types import Heartbeat, ModelRequest, ModelTurn, PromptResponse, ResponseCache

__all__ = ["RemoteAdapter"]

OutputT = TypeVar("OutputT")

_SERVER_TEMPERATURE = 1.0
"""The temperature assumed when none is sent: the providers' documented default, which
samples."""


class RemoteAdapter:
    """Base of the hosted-model adapters; see the module docstring."""

    provider: ClassVar[str] = ""
    """Provider family recorded in `describe()`."""

    def __init__(
        self,
        model: str,
        *,
        max_turns: int,
        max_retries: int,
        timeout: float,
        temperature: float | None,
        extra_body: Mapping[str, Any] | None,
        clock: Clock,
        rng: random.Random | None,
        cache: ResponseCache | None,
        cache_nondeterministic: bool,
        output_retries: int = 1,
    ) -> None:
        check_limits(max_turns=max_turns, max_retries=max_retries, timeout=timeout)
        if output_retries < 0:
            raise ConfigurationError(f"output_retries must be 0 or more, got {output_retries}")
        self.output_retries = output_retries
        self.model = model
        self.max_turns = max_turns
        self.max_retries = max_retries
        self.timeout = timeout
        self.temperature = temperature
        self.extra_body = dict(extra_body) if extra_body else None
        self.clock = clock
        self.cache = cache
        self.cache_nondeterministic = cache_nondeterministic
        self._rng = rng or random.Random()
        self._owns_client = True
        self._secret = ""

    # -- what a subclass provides -----------------------------------------------------

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        raise NotImplementedError

    def _call_model(self, request: ModelRequest) -> ModelTurn:
        raise NotImplementedError

    async def _acall_model(self, request: ModelRequest) -> ModelTurn:
        raise NotImplementedError

    def _close_client(self) -> None:
        raise NotImplementedError

    async def _aclose_clients(self) -> None:
        """Close the async client of the running event loop (if any was made)."""

    def _sdk_version(self) -> str:
        raise NotImplementedError

    def _parameters(self) -> dict[str, Any]:
        """Request parameters that change what the model does (for provenance and cache)."""
        params: dict[str, Any] = {"temperature": self.temperature}
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    def _limits(self) -> dict[str, Any]:
        """Limits recorded with the provenance (they change what a run can do)."""
        return {"max_turns": self.max_turns, "output_retries": self.output_retries}

    # -- shared -----------------------------------------------------------------------

    @property
    def _policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self.max_retries, timeout=self.timeout, clock=self.clock, rng=self._rng
        )

    def __repr__(self) -> str:
        # Never the key: reprs end up in logs and reports.
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def describe(self) -> AdapterInfo:
        """This adapter's provenance: provider, model, server and sampling parameters."""
        cls = type(self)
        return AdapterInfo(
            provider=self.provider,
            model=self.model,
            base_url=strip_credentials(self.base_url),
            parameters={**self._parameters(), **self._limits()},
            adapter=f"{cls.__module__}.{cls.__qualname__}",
            version=self._sdk_version(),
        )

    def close(self) -> None:
        """Close the HTTP connections of a client the adapter created itself."""
        if self._owns_client:
            self._close_client()

    @property
    def is_async(self) -> bool:
        """Always True: `aevaluate` uses the SDK's async client (see `AsyncProviderAdapter`)."""
        return True

    async def aclose(self) -> None:
        """Close the async client of the running event loop (and the sync one, as `close`)."""
        if self._owns_client:
            await self._aclose_clients()
        self.close()

    def with_cache(self, cache: ResponseCache | None) -> Self:
        """A copy of this adapter using `cache` (None: no cache); see `CacheableAdapter`.

        The copy shares this adapter's HTTP client and leaves closing it to this adapter.
        """
        clone = copy.copy(self)
        clone.cache = cache
        clone._owns_client = False
        return clone

    def __enter__(self) -> Self:
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
        return run_prompt(
            prompt,
            session=session,
            call_model=self._model_call(),
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
        """`evaluate` on the running event loop, through the SDK's async client.

        Same requests, retries (backoff awaited on the clock, not slept), cache, events
        and errors as `evaluate`; a thousand of these in flight are a thousand tasks, not
        threads.
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

    def _model_call(self) -> Callable[[ModelRequest], ModelTurn]:
        """`_call_model`, through the response cache when there is one."""
        if self.cache is None:
            return self._call_model
        return cached_model_call(
            self._call_model,
            KeyFreeCache(self.cache, self._secret),
            model_name=self.model,
            parameters=self._cache_parameters(),
            cache_nondeterministic=self.cache_nondeterministic,
        )

    def _cache_parameters(self) -> dict[str, Any]:
        params = self._parameters()
        temperature: Any = params.get("temperature")
        if self.extra_body is not None and "temperature" in self.extra_body:
            temperature = self.extra_body["temperature"]
        if not isinstance(temperature, int | float) or isinstance(temperature, bool):
            temperature = _SERVER_TEMPERATURE
        # The effective temperature: `cached_model_call` bypasses the cache above 0.
        return {**params, "temperature": float(temperature)}

    def _redact(self, text: str) -> str:
        # A short key (a local server's placeholder) would mangle words, and is no secret.
        if len(self._secret) < MIN_GUARDED_KEY:
            return text
        return text.replace(self._secret, "***")
