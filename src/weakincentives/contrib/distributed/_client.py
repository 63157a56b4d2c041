"""The submitting side: evaluate a dataset on Redis workers, collect an exactly-once report.

`run_distributed` sends one `EvalRequest` per sample, experiment and epoch to the shared
requests mailbox, each with `reply_to` set to a mailbox of this run only
(`eval-run-<run id>`) and the run id stamped on it, then collects the replies as they
arrive. Delivery is at-least-once (a worker killed after replying but before
acknowledging makes its sample run again), so results are de-duplicated by request id
and by `(sample, experiment, epoch)`: the report holds exactly one result per request.

Each new result is appended to the run store *before* its message is acknowledged: if
this process dies, nothing acknowledged is missing from the store, and the results not
yet stored are still in Redis for `RunStore.resume` (pass the resumed `RunHandle` back
in: completed samples are skipped, the others are submitted again under the same run id
and reply mailbox, where late answers of the first attempt count too; when Redis still
holds the first attempt's requests they are collected, not submitted again).

Lost work is noticed (see `_tracking`): a Redis that does not answer is refused before
the run is created; a Redis that comes back without the run's requests (restarted
without persistence, flushed) gets the outstanding ones again; after
`STALL_NOTICE_SECONDS` without a result the client logs how many requests wait in the
queue; a request lost while Redis kept the rest (`request_deadline`, see
`_tracking.RequestDeadline`) is sent again once, then recorded as an error of kind
`lost`. Requests given up on by a worker come back as error results (kind
`dead_letter`), so they count like any other result.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.contrib.mailbox import RedisMailbox
from weakincentives.errors import (
    ConfigurationError,
    InvalidDatasetError,
    MailboxConnectionError,
    MailboxError,
)
from weakincentives.evals import (
    BASELINE,
    EvalReport,
    EvalRequest,
    EvalResult,
    Experiment,
    Fingerprint,
    RunHandle,
    RunStatus,
    RunStore,
    Sample,
    new_run_id,
)
from weakincentives.evals.dataset import IdIndex, canonical_bytes
from weakincentives.runtime.mailbox import MAX_MESSAGES, acknowledge_all
from weakincentives.runtime.outage import BACKEND_OUTAGE

from ._collector import Collector, ExpectedKeys, ProgressSink
from ._connection import Backoff, check_reachable, describe, redis_client
from ._lost import LostRequests
from ._tracking import DEFAULT_REQUEST_DEADLINE, RequestDeadline, RunMarker, Watch

__all__ = ["ProgressSink", "reply_mailbox_name", "run_distributed"]

_log = logging.getLogger(__name__)

_SUBMIT_BATCH = 500
"""Requests per pipelined send."""
_POLL_SECONDS = 1.0
"""Longest single wait for results (the timeout is checked between waits)."""
_RESULT_VISIBILITY = 60.0
"""Seconds a received result stays hidden: this process stores and acknowledges it in
far less; if it dies first, the result comes back for the next collector."""

_Key = tuple[str, str, int]
"""`(sample_id, experiment_name, epoch)`: what a run records once."""


def reply_mailbox_name(run_id: str) -> str:
    """The name of a run's results mailbox: `eval-run-<run id>`."""
    return f"eval-run-{run_id}"


def run_distributed(
    dataset: Iterable[Sample[Any, Any]],
    experiments: Sequence[Experiment] = (BASELINE,),
    *,
    redis_url: str | None = None,
    client: Any = None,
    requests: str = "eval-requests",
    namespace: str = "wink",
    run_store: RunStore | RunHandle | None = None,
    fingerprint: Fingerprint | None = None,
    run_id: str | None = None,
    epochs: int = 1,
    timeout: float | None = None,
    progress: ProgressSink | None = None,
    config: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    request_deadline: float | None = DEFAULT_REQUEST_DEADLINE,
) -> EvalReport:
    """Evaluate `dataset` under `experiments` on the workers serving `requests`.

    Workers (`wink worker`) must listen on the same Redis, `namespace` and `requests`
    mailbox. See the module docstring for delivery and storage guarantees.

    Args:
        dataset: The samples (ids must be unique). Read again, not held, when it can be
            (a `Dataset`, a list, a `SampleFile`): to submit, to send lost requests
            again and to name the ones lost twice; a one-shot iterator is held.
        experiments: Experiments to run every sample under.
        redis_url: Where Redis is (a reconnecting client is made); or pass `client`.
        client: A redis-py client (`decode_responses=False`); not closed here.
        requests: Name of the workers' requests mailbox.
        namespace: Key prefix the workers use.
        run_store: A `RunStore` (a new run is created in it and finished here), or a
            writable `RunHandle` (e.g. from `RunStore.resume`: its completed samples are
            skipped; the caller finishes it). None: results are not stored.
        fingerprint: Fingerprint of a new run (default: dataset hash, experiments,
            epochs, and `redis:<namespace>/<requests>` as the target).
        run_id: Id of the run (default: the new run's, or a fresh one without a store).
        epochs: Times each sample is run per experiment.
        timeout: Seconds to wait for every result, submission included (None: no
            limit); checked between Redis calls, so while Redis is unreachable it may
            be overrun by one call's retries (a few seconds). When it passes, the
            report says `complete=False` and a run created here is `interrupted`.
        progress: Told about each distinct result.
        config: Settings kept in the report and the run's manifest.
        provenance: What produced the run (`RunProvenance`, JSON form), for the manifest
            of a run created here.
        clock: Clock of the timeout and of the backoff while Redis is unreachable.
        request_deadline: Seconds a request may go unanswered before the client checks
            that it still exists (default `DEFAULT_REQUEST_DEADLINE`, 300; None: never).
            Past it, with the requests and the run's results mailboxes both empty, the
            missing requests were lost: they are sent again once, then recorded as errors
            of kind `lost`, each time in one log line.

    Returns:
        One result per request (`report.complete` says whether all arrived).

    Raises:
        ConfigurationError: Bad arguments (neither or both of `redis_url` and
            `client`, no experiments, duplicate names, `epochs < 1`, ...).
        RunStoreError: Results could not be stored (they stay in Redis for a resume).
        MailboxConnectionError: `redis_url` does not answer (checked before the run is
            created, after the client's own retries).
    """
    samples = _reiterable(dataset)
    _check_arguments(experiments, epochs, timeout, redis_url, client)
    index = _index_ids(samples)
    if request_deadline is not None and not request_deadline > 0:
        raise ConfigurationError(
            f"run_distributed: request_deadline must be > 0 seconds or None, got "
            f"{request_deadline!r}"
        )
    if isinstance(run_store, RunHandle) and not run_store.writable:
        raise ConfigurationError(
            f"run {run_store.run_id} is open read-only; pass RunStore.resume(...) or "
            "RunStore.create(...) to append to it",
        )
    connection = client if client is not None else redis_client(str(redis_url))
    if client is None:
        check_reachable(connection)
    settings = {
        "mode": "distributed",
        "requests": requests,
        "namespace": namespace,
        "epochs": epochs,
        "timeout": timeout,
        "request_deadline": request_deadline,
        **dict(config or {}),
    }
    expected = ExpectedKeys(index, experiments, epochs)
    handle: RunHandle | None = None
    owned = False
    status: RunStatus = "interrupted"
    try:
        handle, owned = _open_run(
            run_store,
            samples,
            experiments,
            epochs,
            fingerprint,
            run_id,
            settings,
            len(expected),
            provenance,
        )
        run_id = handle.run_id if handle is not None else run_id or new_run_id(clock.now())
        collector = Collector(expected, run_id, handle, progress)
        if handle is not None:
            collector.restore(handle)
        collector.start()
        report = _execute(
            samples, experiments, epochs, connection, requests, namespace, run_id,
            collector, settings, clock, timeout, request_deadline,
        )  # fmt: skip
        # From the collector's count: `report.complete` would read every result back.
        status = "complete" if collector.missing == 0 else "interrupted"
        return report
    finally:
        if progress is not None:
            progress.finish()
        if owned and handle is not None:
            handle.finish(status)
        if client is None:
            connection.close()


def _execute(
    samples: Iterable[Sample[Any, Any]],
    experiments: Sequence[Experiment],
    epochs: int,
    client: Any,
    requests: str,
    namespace: str,
    run_id: str,
    collector: Collector,
    settings: dict[str, Any],
    clock: Clock,
    timeout: float | None,
    request_deadline: float | None,
) -> EvalReport:
    deadline = None if timeout is None else clock.monotonic() + timeout
    reply_name = reply_mailbox_name(run_id)
    outbox: RedisMailbox[EvalRequest[Any, Any], Any] = RedisMailbox(
        requests, client=client, namespace=namespace
    )
    results: RedisMailbox[EvalResult, Any] = RedisMailbox(
        reply_name, client=client, namespace=namespace, body_type=EvalResult
    )
    marker = RunMarker(client, namespace, run_id)
    overdue = RequestDeadline(request_deadline, outbox, results, clock)

    def send_outstanding() -> bool:
        # Made as they are sent, a batch at a time: a million requests are never all in
        # memory at once.
        pending = (
            EvalRequest(sample=sample, experiment=experiment, epoch=epoch, run_id=run_id)
            for experiment in experiments
            for epoch in range(epochs)
            for sample in samples
            if (sample.id, experiment.name, epoch) not in collector.done
        )
        count = collector.missing
        _log.info(
            "run %s: submitting %d requests to %r on %s; results come back to %r",
            run_id, count, requests, describe(client), reply_name,
        )  # fmt: skip
        if not _submit(outbox, pending, reply_name, clock, deadline):
            return False
        _quietly(lambda: marker.mark(count), "marking the run's requests as sent")
        overdue.restart()
        return True

    lost = LostRequests(samples, experiments, epochs, collector, overdue.seconds or 0.0)

    def on_lost() -> None:
        lost.give_up()  # those lost before: errors; the rest are sent again
        if lost.send_again():
            send_outstanding()

    watch = Watch(outbox, marker, send_outstanding, run_id, clock, overdue, on_lost)
    try:
        if collector.missing and collector.restored and _still_in_redis(marker):
            _log.warning(
                "run %s: its %d outstanding requests are still in Redis (sent before the "
                "client stopped); collecting them instead of running them again",
                run_id, collector.missing,
            )  # fmt: skip
            marker.set_here = True
            sent = True
        else:
            sent = send_outstanding()
            # Results were not awaited while submitting (minutes, for a million
            # requests): the stall notice counts from here.
            watch.progressed()
        if sent:
            _collect(results, collector, clock, deadline, watch)
        if collector.missing == 0:
            # Only late duplicates can still be in there (or arrive: the queue's TTL
            # removes those), so free the memory now.
            _quietly(results.purge, "purging the run's results mailbox")
            marker.clear()
        else:
            settings["queued_requests"] = watch.queued()
    finally:
        outbox.close()
        results.close()
    _log.info(
        "run %s: %d of %d results (%d duplicate and %d foreign replies dropped)",
        run_id, len(collector.done), len(collector.expected), collector.duplicates,
        collector.foreign,
    )  # fmt: skip
    return EvalReport(
        collector.report_results(),
        expected_count=len(collector.expected),
        run_id=run_id,
        config=dict(settings),
    )


def _still_in_redis(marker: RunMarker) -> bool:
    try:
        return marker.present()
    except MailboxConnectionError:
        return False  # sending again is safe: duplicates are answered once


def _submit(
    outbox: RedisMailbox[EvalRequest[Any, Any], Any],
    pending: Iterable[EvalRequest[Any, Any]],
    reply_name: str,
    clock: Clock,
    deadline: float | None,
) -> bool:
    """Send `pending` in pipelined batches; False if the deadline passed first."""
    backoff = Backoff(clock)
    requests = iter(pending)
    batch = list(itertools.islice(requests, _SUBMIT_BATCH))
    while batch:
        try:
            outbox.send_many(batch, reply_to=reply_name)
        except MailboxConnectionError as error:
            if _expired(clock, deadline):
                return False
            BACKEND_OUTAGE.failed("submitting requests", error)
            backoff.wait(deadline)
            continue  # the batch again: requests sent twice are answered once
        BACKEND_OUTAGE.succeeded()
        backoff.reset()
        batch = list(itertools.islice(requests, _SUBMIT_BATCH))
    return True


def _collect(
    results: RedisMailbox[EvalResult, Any],
    collector: Collector,
    clock: Clock,
    deadline: float | None,
    watch: Watch,
) -> None:
    """Receive, store, then acknowledge results until all are in or the deadline passes."""
    backoff = Backoff(clock)
    while collector.missing and not _expired(clock, deadline):
        wait = (
            _POLL_SECONDS if deadline is None else min(_POLL_SECONDS, deadline - clock.monotonic())
        )
        try:
            watch.check(now=backoff.failures > 0)
            messages = results.receive(
                max_messages=MAX_MESSAGES,
                visibility_timeout=_RESULT_VISIBILITY,
                wait_time_seconds=max(0.0, wait),
            )
        except MailboxConnectionError as error:
            BACKEND_OUTAGE.failed("receiving results", error)
            backoff.wait(deadline)
            continue
        BACKEND_OUTAGE.succeeded()
        backoff.reset()
        before = collector.missing
        collector.take(messages)  # stores before anything is acknowledged
        if collector.missing < before:
            watch.progressed()
        if messages:  # one round trip for the batch (a stale one comes back: a duplicate)
            _quietly(
                functools.partial(acknowledge_all, messages),
                f"acknowledging {len(messages)} results",
            )


def _check_arguments(
    experiments: Sequence[Experiment],
    epochs: int,
    timeout: float | None,
    redis_url: str | None,
    client: Any,
) -> None:
    problems: list[str] = []
    if (redis_url is None) == (client is None):
        problems.append("pass exactly one of redis_url= and client=")
    names = [e.name for e in experiments]
    if not names or len(names) != len(set(names)):
        problems.append(f"need at least one experiment, with unique names, got {names}")
    if epochs < 1:
        problems.append(f"epochs must be >= 1, got {epochs}")
    if timeout is not None and not timeout > 0:
        problems.append(f"timeout must be > 0 seconds or None, got {timeout}")
    if problems:
        raise ConfigurationError("run_distributed: " + "; ".join(problems))


def _reiterable(dataset: Iterable[Sample[Any, Any]]) -> Iterable[Sample[Any, Any]]:
    """`dataset` itself when it can be read again (a `Dataset`, a list, a `SampleFile`...).

    The client reads the samples again to submit them, to send lost requests again and
    to name the ones lost twice, instead of holding them: a one-shot iterator (a
    generator) is the only dataset kept in memory.
    """
    if iter(dataset) is dataset:
        return tuple(dataset)
    return dataset


def _index_ids(samples: Iterable[Sample[Any, Any]]) -> IdIndex:
    """The samples' ids as an `IdIndex`, checking each is a `Sample` and ids are unique.

    Raises:
        InvalidDatasetError: an item is not a `Sample`, or an id repeats.
    """

    def ids() -> Iterator[str]:
        for index, sample in enumerate(samples):
            if not isinstance(sample, Sample):
                raise InvalidDatasetError(
                    f"dataset item {index} is a {type(sample).__name__}, not a Sample"
                )
            yield sample.id

    def repeated(sample_id: str) -> None:
        raise InvalidDatasetError(
            f"duplicate sample id {sample_id!r}; ids must be unique within a dataset"
        )

    return IdIndex(ids, on_repeat=repeated)


def _sha256(samples: Iterable[Sample[Any, Any]]) -> str:
    """`Dataset.sha256` of the samples, read once (or the source's own, when it has one)."""
    known = getattr(samples, "sha256", None)  # Dataset, SampleFile, SelectedSamples
    if isinstance(known, str):
        return known
    digest = hashlib.sha256()
    for sample in samples:
        digest.update(canonical_bytes(sample))
    return digest.hexdigest()


def _open_run(
    run_store: RunStore | RunHandle | None,
    samples: Iterable[Sample[Any, Any]],
    experiments: Sequence[Experiment],
    epochs: int,
    fingerprint: Fingerprint | None,
    run_id: str | None,
    settings: Mapping[str, Any],
    expected: int,
    provenance: Mapping[str, Any] | None = None,
) -> tuple[RunHandle | None, bool]:
    """The run handle to append to, and whether this call created it (and finishes it)."""
    if run_store is None:
        return None, False
    if isinstance(run_store, RunHandle):  # checked writable by `run_distributed`
        return run_store, False
    if fingerprint is None:
        fingerprint = Fingerprint.build(
            dataset_sha256=_sha256(samples),
            experiments=experiments,
            evaluators=(),
            target=f"redis:{settings['namespace']}/{settings['requests']}",
            epochs=epochs,
        )
    handle = run_store.create(
        fingerprint, run_id=run_id, config=settings, expected_results=expected,
        provenance=provenance,
    )  # fmt: skip
    return handle, True


def _expired(clock: Clock, deadline: float | None) -> bool:
    return deadline is not None and clock.monotonic() >= deadline


def _quietly(call: Any, action: str) -> None:
    try:
        call()
    except MailboxConnectionError as exc:
        BACKEND_OUTAGE.failed(action, exc)
    except MailboxError as exc:
        # An unacknowledged result is delivered again and dropped as a duplicate.
        _log.warning("failed %s: %s", action, exc)
