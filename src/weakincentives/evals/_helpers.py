"""Submit datasets to an `EvalLoop`'s mailbox and collect the results into a report."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.runtime.mailbox import MAX_WAIT_SECONDS, Mailbox

from ._report import EvalReport
from ._types import EvalRequest, EvalResult, Sample

__all__ = ["collect_results", "submit_dataset", "submit_experiments"]


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
    count = 0
    for experiment in experiments:
        for epoch in range(epochs):
            for sample in samples:
                request = EvalRequest(sample=sample, experiment=experiment, epoch=epoch,
                                      run_id=run_id)  # fmt: skip
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
) -> EvalReport:
    """Receive results until `expected_count` distinct requests have answered, or timeout.

    Duplicate deliveries of one request count once; results of other runs (when `run_id`
    is given) and bodies that are not `EvalResult`s are acknowledged and ignored. The
    report's `complete` says whether every expected result arrived.
    """
    if expected_count < 0:
        raise ConfigurationError(f"expected_count must be >= 0, got {expected_count}")
    deadline = clock.monotonic() + timeout_seconds
    seen: dict[str, EvalResult] = {}
    while len(seen) < expected_count:
        left = deadline - clock.monotonic()
        if left <= 0:
            break
        for message in results.receive(
            max_messages=10, wait_time_seconds=min(left, MAX_WAIT_SECONDS)
        ):
            body = message.body
            if isinstance(body, EvalResult) and (run_id is None or body.run_id == run_id):
                key = body.request_id or f"{body.sample_id}/{body.experiment_name}/{body.epoch}"
                seen.setdefault(key, body)
            message.acknowledge()
    return EvalReport(tuple(seen.values()), expected_count=expected_count, run_id=run_id)
