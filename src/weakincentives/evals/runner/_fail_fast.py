"""When a run stops early: systematic failure, or too many errors.

A run whose model server is down, whose API key is wrong or whose target raises on
every input records one identical error per sample; at a few seconds per connection
attempt a dataset of thousands burns half an hour to say one thing. `FailFast` watches
the results as they are recorded and says stop when

- the first `first` results (`DEFAULT_FAIL_FAST`, 10) are all errors of the same kind
  and message (later results never trigger it: a run that started well is not broken),
- or the run has recorded `max_errors` errors (when set).

The run then takes no more work: samples in flight finish, the stored run is
`interrupted`, and the report's `config["stopped"]` says why (`resume=` continues it;
`retry_errors=True` runs the errored samples again).
"""

from __future__ import annotations

import threading

from weakincentives.errors import ConfigurationError

from .._records import EvalResult

__all__ = ["DEFAULT_FAIL_FAST", "FailFast"]

DEFAULT_FAIL_FAST = 10
"""Results that, all failing with one error, stop a run (`fail_fast=`; 0: never)."""


class FailFast:
    """Decides, result by result, whether a run should stop (see the module docstring).

    Thread-safe: slot threads report their results concurrently.

    Args:
        first: Leading results that stop the run when all fail alike (0: never).
        max_errors: Errors that stop the run (None: no limit; 0 also means none).
    """

    def __init__(self, first: int = DEFAULT_FAIL_FAST, max_errors: int | None = None) -> None:
        for name, value in (("fail_fast", first), ("max_errors", max_errors)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigurationError(f"{name} must be an integer >= 0, got {value!r}")
        self._first = first
        self._max_errors = max_errors or None
        self._lock = threading.Lock()
        self._seen = 0
        self._errors = 0
        self._common: tuple[str | None, str] | None = None  # the error all so far share
        self.reason: str | None = None
        """Why the run should stop (None: it should not)."""

    @property
    def idle(self) -> bool:
        """True when nothing more can make it stop (cheap check on the hot path)."""
        return self._max_errors is None and self._seen >= self._first

    def see(self, result: EvalResult) -> bool:
        """Count one recorded result; True when the run should stop now."""
        if result.error is None and self.idle:
            return False
        with self._lock:
            self._seen += 1
            if result.error is not None:
                self._errors += 1
            if self.reason is None:
                self.reason = self._judge(result)
            return self.reason is not None

    def _judge(self, result: EvalResult) -> str | None:
        if self._max_errors is not None and self._errors >= self._max_errors:
            return f"{self._errors} errors reached max_errors={self._max_errors}"
        if self._seen > self._first:
            return None
        if result.error is None:
            self._first = 0  # a success among the first results: never systematic
            return None
        error = (result.error_kind, result.error)
        if self._seen == 1:
            self._common = error
        elif error != self._common:
            self._first = 0
            return None
        if self._seen == self._first:
            return (
                f"the first {self._first} results all failed with the same error "
                f"({result.error_kind}): {result.error}"
            )
        return None
