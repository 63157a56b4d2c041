"""Submit datasets to an `EvalLoop`'s mailbox and collect the results into a report."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError, MailboxClosedError, MailboxConnectionError
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.runtime.mailbox import (
    MAX_MESSAGES,
    MAX_WAIT_SECONDS,
    Mailbox,
    SupportsSendMany,
)

from .._records import EvalResult, Sample, build_request
from ..report import EvalReport

__all__ = ["collect_results", "submit_dataset", "submit_experiments"]

_log = logging.getLogger(__name__)

_SUBMIT_BATCH = 100
"""Requests per `send_many` when the mailbox has it: a worker already running starts on
the first batch while the rest are sent; Redis pipelines each batch in one round trip."""

_IDLE_PAUSE = 0.05
"""Shortest pause between two empty polls of the results mailbox, in clock seconds."""


def submit_dataset(
    dataset: Iterable[Sample[Any, Any]],
    experiment: Experiment | Mailbox[Any, Any],
    requests: Mailbox[Any, Any] | None = None,
    *,
    reply_to: Mailbox[Any, Any] | str | None = None,
    run_id: str | None = None,
    epochs: int = 1,
) -> int:
    """Send one `EvalRequest` per sample (and epoch) under `experiment`.

    `submit_dataset(dataset, requests, reply_to=...)` (no experiment) submits under
    `BASELINE`, as the guide writes it. Results go to `reply_to`; without it they go
    wherever the worker sends replies by default (its `results` mailbox), or nowhere.

    Returns:
        The number of requests sent.
    """
    if requests is None:
        if isinstance(experiment, Experiment):
            raise ConfigurationError("submit_dataset needs a requests mailbox")
        chosen, target = BASELINE, experiment
    elif isinstance(experiment, Experiment):
        chosen, target = experiment, requests
    else:
        raise ConfigurationError(
            f"submit_dataset: expected an Experiment, got {type(experiment).__name__}",
        )
    return submit_experiments(
        dataset, (chosen,), target, reply_to=reply_to, run_id=run_id, epochs=epochs
    )


def submit_experiments(
    dataset: Iterable[Sample[Any, Any]],
    experiments: Sequence[Experiment],
    requests: Mailbox[Any, Any],
    *,
    reply_to: Mailbox[Any, Any] | str | None = None,
    run_id: str | None = None,
    epochs: int = 1,
) -> int:
    """Send the dataset once per experiment (experiment-major order) and epoch.

    Returns:
        The number of requests sent: `len(dataset) * len(experiments) * epochs`.
    """
    if not experiments:
        raise ConfigurationError("submit_experiments needs at least one experiment")
    names = [e.name for e in experiments]
    if len(names) != len(set(names)):
        raise ConfigurationError(f"experiment names must be unique, got {names}")
    if epochs < 1:
        raise ConfigurationError(f"epochs must be >= 1, got {epochs}")
    samples = list(dataset)
    created = SYSTEM_CLOCK.now()  # one submission, one timestamp
    requests_made = (
        build_request(sample, experiment, epoch=epoch, run_id=run_id, created_at=created)
        for experiment in experiments
        for epoch in range(epochs)
        for sample in samples
    )
    count = 0
    if isinstance(requests, SupportsSendMany):  # one lock, or one round trip, per batch
        while batch := list(itertools.islice(requests_made, _SUBMIT_BATCH)):
            requests.send_many(batch, reply_to=reply_to)
            count += len(batch)
        return count
    for request in requests_made:
        requests.send(request, reply_to=reply_to)
        count += 1
    return count


def collect_results(
    results: Mailbox[Any, Any],
    expected_count: int,
    *,
    timeout_seconds: float = 300.0,
    run_id: str | None = None,
    clock: Clock = SYSTEM_CLOCK,
    wait_time_seconds: float = MAX_WAIT_SECONDS,
) -> EvalReport:
    """Receive results until `expected_count` distinct requests have answered, or timeout.

    Delivery is at-least-once, so one request may answer twice: results are keyed by
    request id and each counts once. Results of other runs (when `run_id` is given) and
    bodies that are not `EvalResult`s are acknowledged and dropped, so give each run its
    own results mailbox (or a `run_id`) when runs may overlap. The report's `complete`
    says whether every expected result arrived; `missing` says how many did not.

    Args:
        results: The mailbox the results were sent to (the requests' `reply_to`).
        expected_count: Distinct results to wait for (samples x experiments x epochs).
        timeout_seconds: How long to wait in total, on `clock`.
        run_id: Keep only results of this run.
        clock: Clock the timeout is measured on.
        wait_time_seconds: Long poll of each receive (0: poll, pausing briefly on
            `clock` between empty polls, which suits a `FakeClock`).

    Raises:
        ConfigurationError: `expected_count` or a timeout is negative.
    """
    if expected_count < 0:
        raise ConfigurationError(f"expected_count must be >= 0, got {expected_count}")
    if timeout_seconds < 0 or wait_time_seconds < 0:
        raise ConfigurationError(
            f"timeouts must be >= 0, got timeout_seconds={timeout_seconds}, "
            f"wait_time_seconds={wait_time_seconds}",
        )
    deadline = clock.monotonic() + timeout_seconds
    seen: dict[str, EvalResult] = {}
    while len(seen) < expected_count:
        left = deadline - clock.monotonic()
        if left <= 0:
            break
        wait = min(left, wait_time_seconds, MAX_WAIT_SECONDS)
        started = clock.monotonic()
        try:
            messages = results.receive(max_messages=MAX_MESSAGES, wait_time_seconds=wait)
        except MailboxClosedError:
            break
        except MailboxConnectionError:
            _log.warning("receiving results from %s failed; retrying", results.name, exc_info=True)
            messages = ()
        for message in messages:
            _keep(seen, message.body, run_id)
            message.acknowledge()
        if not messages:
            # Pause at least `_IDLE_PAUSE` per empty poll, measured on `clock`: a
            # non-blocking poll does not spin, and a FakeClock reaches the deadline.
            pause = max(wait, min(left, _IDLE_PAUSE)) - (clock.monotonic() - started)
            if pause > 0:
                clock.sleep(pause)
    return EvalReport(tuple(seen.values()), expected_count=expected_count, run_id=run_id)


def _keep(seen: dict[str, EvalResult], body: object, run_id: str | None) -> None:
    """Record `body` if it is a result of this run that was not seen yet."""
    if not isinstance(body, EvalResult):
        _log.warning("ignoring a %s in the results mailbox", type(body).__name__)
        return
    if run_id is not None and body.run_id != run_id:
        _log.debug("ignoring a result of run %s (collecting run %s)", body.run_id, run_id)
        return
    key = body.request_id or f"{body.sample_id}/{body.experiment_name}/{body.epoch}"
    seen.setdefault(key, body)
