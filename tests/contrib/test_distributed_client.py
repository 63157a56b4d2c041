"""The submitting side: `run_distributed`, its de-duplication, timeouts, resume; batches.

A scripted worker (a thread of this test) answers the requests, so each test decides
exactly what arrives: duplicates, results of other runs, garbage.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.contrib.test_distributed_worker import questions
from tests.helpers.redis_server import RedisEndpoint, delete_namespace, unique_namespace
from weakincentives.clock import FakeClock
from weakincentives.contrib.distributed import (
    Backoff,
    redis_client,
    reply_mailbox_name,
    run_distributed,
)
from weakincentives.contrib.mailbox import RedisMailbox
from weakincentives.errors import (
    ConfigurationError,
    InvalidDatasetError,
    MailboxClosedError,
    MailboxConnectionError,
    MailboxFullError,
)
from weakincentives.evals import (
    EvalRequest,
    EvalResult,
    Experiment,
    Fingerprint,
    RunStore,
    Sample,
    Score,
    StoredResults,
)
from weakincentives.experiment import BASELINE

FINGERPRINT = Fingerprint(dataset_sha256="0" * 64, target="test")


@pytest.fixture
def namespace(redis_server: RedisEndpoint) -> Iterator[str]:
    ns = unique_namespace()
    yield ns
    with redis_server.client() as client:
        delete_namespace(client, ns)


def result_for(request: EvalRequest[Any, Any], **changes: Any) -> EvalResult:
    result = EvalResult(
        sample_id=request.sample.id,
        experiment_name=request.experiment.name,
        score=Score(value=1.0, passed=True),
        latency_ms=1,
        epoch=request.epoch,
        request_id=str(request.request_id),
        run_id=request.run_id,
    )
    return dataclasses.replace(result, **changes)


class ScriptedWorker:
    """Answers every request `copies` times, plus a foreign result and garbage each."""

    def __init__(self, endpoint: RedisEndpoint, namespace: str, *, copies: int = 1) -> None:
        self.client = endpoint.client()
        self.requests: RedisMailbox[EvalRequest[str, str], Any] = RedisMailbox(
            "eval-requests", client=self.client, namespace=namespace,
            body_type=EvalRequest[str, str],
        )  # fmt: skip
        self.copies = copies
        self.served: list[EvalRequest[str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> ScriptedWorker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.requests.close()
        self.client.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            for message in self.requests.receive(max_messages=10, wait_time_seconds=0.2):
                request = message.body
                self.served.append(request)
                outbox = message.reply_to
                assert outbox is not None
                # The foreign result and the garbage go first: once the last real result
                # is in, the client may complete and purge at once, and nothing of this
                # run's may arrive after that (a test could not tell a leak from a race).
                outbox.send(result_for(request, run_id="someone-else"))
                outbox.send({"not": "a result"})
                for _ in range(self.copies):
                    # A redelivered request answers again, under the same request id.
                    outbox.send(result_for(request, delivery_count=2))
                message.acknowledge()


@pytest.mark.redis
def test_duplicate_and_foreign_replies_count_once_in_the_report_and_the_store(
    redis_server: RedisEndpoint, namespace: str, tmp_path: Path
) -> None:
    store = RunStore(tmp_path / "runs")
    experiments = (BASELINE, Experiment(name="v2"))

    with ScriptedWorker(redis_server, namespace, copies=3):
        report = run_distributed(
            questions(5), experiments, redis_url=redis_server.url, namespace=namespace,
            run_store=store, fingerprint=FINGERPRINT, epochs=2, timeout=20,
        )  # fmt: skip

    assert report.complete and report.expected_count == 20
    assert len(report.results) == 20
    assert len({r.key for r in report.results}) == 20
    run = store.open(str(report.run_id))
    assert len(list(run.iter_results())) == 20
    assert run.status == "complete"
    assert run.manifest.counts.expected == 20
    assert report.config["mode"] == "distributed"


@pytest.mark.redis
def test_with_a_store_the_report_reads_slim_results_back_and_the_store_has_them_whole(
    redis_server: RedisEndpoint, namespace: str, tmp_path: Path
) -> None:
    # The client's memory per result is the report's slim copy (as the local runner's):
    # the request id, input and expected value are read back from the store.
    store = RunStore(tmp_path / "runs")
    with ScriptedWorker(redis_server, namespace):
        report = run_distributed(
            questions(4), redis_url=redis_server.url, namespace=namespace, run_store=store,
            fingerprint=FINGERPRINT, timeout=20,
        )  # fmt: skip
        unstored = run_distributed(
            questions(4), redis_url=redis_server.url, namespace=namespace, timeout=20
        )

    assert report.complete and report.pass_rate == 1.0
    # Nothing of the results was kept while collecting: the report reads them back.
    assert isinstance(report.results, StoredResults) and len(report.results) == 4
    assert all(r.request_id is None for r in report.results)
    stored = list(store.open(str(report.run_id)).iter_results())
    assert sorted(r.key for r in stored) == sorted(r.key for r in report.results)
    assert all(r.request_id for r in stored)
    assert all(r.request_id for r in unstored.results)  # no store: kept whole


@pytest.mark.redis
def test_results_for_an_epoch_or_experiment_the_run_does_not_have_are_foreign(
    redis_server: RedisEndpoint, namespace: str
) -> None:
    class StrayWorker(ScriptedWorker):
        def _serve(self) -> None:
            while not self._stop.is_set():
                for message in self.requests.receive(max_messages=10, wait_time_seconds=0.2):
                    request, outbox = message.body, message.reply_to
                    assert outbox is not None
                    outbox.send(result_for(request, epoch=1))
                    outbox.send(result_for(request, experiment_name="other"))
                    outbox.send(result_for(request))
                    message.acknowledge()

    with StrayWorker(redis_server, namespace):
        report = run_distributed(
            questions(3), redis_url=redis_server.url, namespace=namespace, timeout=20
        )

    assert report.complete and report.expected_count == 3
    assert sorted(r.key for r in report.results) == [(f"s{i}", "baseline", 0) for i in range(3)]


@pytest.mark.redis
def test_requests_reply_to_a_mailbox_of_their_run_only(
    redis_server: RedisEndpoint, namespace: str
) -> None:
    with ScriptedWorker(redis_server, namespace) as worker:
        report = run_distributed(
            questions(3), redis_url=redis_server.url, namespace=namespace, run_id="run-42",
            timeout=20,
        )  # fmt: skip

    assert report.run_id == "run-42" and report.complete
    assert {r.run_id for r in worker.served} == {"run-42"}
    assert reply_mailbox_name("run-42") == "eval-run-run-42"
    with redis_server.client() as client:
        leftovers: RedisMailbox[Any, Any] = RedisMailbox(
            "eval-run-run-42", client=client, namespace=namespace
        )
        assert leftovers.approximate_count() == 0  # purged once complete


class Recorder:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def start(self, total: int | None) -> None:
        self.calls.append(("start", total))

    def advance(self, result: EvalResult) -> None:
        self.calls.append(result.sample_id)

    def finish(self) -> None:
        self.calls.append("finish")


@pytest.mark.redis
def test_without_workers_the_run_times_out_incomplete_and_interrupted(
    redis_server: RedisEndpoint, namespace: str, tmp_path: Path
) -> None:
    store = RunStore(tmp_path / "runs")
    progress = Recorder()

    report = run_distributed(
        questions(4), redis_url=redis_server.url, namespace=namespace, run_store=store,
        fingerprint=FINGERPRINT, timeout=0.3, progress=progress,
    )  # fmt: skip

    assert not report.complete and report.missing == 4
    assert store.open(str(report.run_id)).status == "interrupted"
    assert progress.calls == [("start", 4), "finish"]


def test_an_unreachable_redis_is_refused_before_a_run_is_created(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")

    with pytest.raises(MailboxConnectionError, match=r"cannot reach Redis at 127\.0\.0\.1:9/0"):
        run_distributed(
            questions(3), redis_url="redis://127.0.0.1:9/0", run_store=store,
            fingerprint=FINGERPRINT, timeout=0.5,
        )  # fmt: skip

    assert store.list_runs() == []


@pytest.mark.redis
def test_a_resumed_run_submits_only_what_it_has_not_stored(
    redis_server: RedisEndpoint, namespace: str, tmp_path: Path
) -> None:
    store = RunStore(tmp_path / "runs")
    samples = questions(6)
    done = [EvalRequest(sample=s, experiment=BASELINE, run_id="again") for s in samples[:2]]
    with store.create(FINGERPRINT, run_id="again", expected_results=6) as first:
        first.extend(result_for(r) for r in done)
        first.append(result_for(done[0], sample_id="s5", error="boom", error_kind="cancelled"))
    progress = Recorder()

    with (
        ScriptedWorker(redis_server, namespace) as worker,
        store.resume("again", FINGERPRINT) as run,
    ):
        report = run_distributed(
            samples, client=worker.client, namespace=namespace, run_store=run, timeout=20,
            progress=progress,
        )  # fmt: skip

    assert sorted(r.sample.id for r in worker.served) == ["s2", "s3", "s4", "s5"]
    assert report.complete and sorted(r.sample_id for r in report.results) == sorted(
        s.id for s in samples
    )
    assert progress.calls[:3] == [("start", 6), "s0", "s1"]
    assert store.open("again").status == "complete"  # the caller's `with` finished it


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of redis_url= and client="),
        ({"redis_url": "redis://x", "client": object()}, "exactly one of"),
        ({"redis_url": "redis://x", "experiments": ()}, "at least one experiment"),
        ({"redis_url": "redis://x", "experiments": (BASELINE, BASELINE)}, "unique names"),
        ({"redis_url": "redis://x", "epochs": 0}, "epochs must be >= 1"),
        ({"redis_url": "redis://x", "timeout": 0}, "timeout must be > 0"),
    ],
)
def test_bad_arguments_fail_before_anything_is_sent(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        run_distributed(questions(2), **kwargs)


def test_duplicate_sample_ids_are_refused() -> None:
    twice = [Sample(id="same", input="q", expected="a")] * 2
    with pytest.raises(InvalidDatasetError, match="duplicate sample id"):
        run_distributed(twice, redis_url="redis://127.0.0.1:9/0")


def test_a_read_only_run_handle_is_refused(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.create(FINGERPRINT, run_id="done").finish()

    with pytest.raises(ConfigurationError, match="read-only"):
        run_distributed(
            questions(1), redis_url="redis://127.0.0.1:9/0", run_store=store.open("done")
        )


def test_backoff_doubles_up_to_its_cap_and_stops_at_the_deadline() -> None:
    clock = FakeClock()
    backoff = Backoff(clock, base=0.1, cap=0.5)
    waits = []
    for _ in range(5):
        before = clock.monotonic()
        backoff.wait()
        waits.append(round(clock.monotonic() - before, 6))
    before = clock.monotonic()
    backoff.wait(deadline=before + 0.2)
    cut = clock.monotonic() - before
    backoff.reset()

    assert waits == [0.1, 0.2, 0.4, 0.5, 0.5]
    assert cut == pytest.approx(0.2)
    assert backoff.next_delay() == 0.1
    with pytest.raises(ConfigurationError):
        Backoff(clock, base=1.0, cap=0.5)


def test_redis_client_refuses_an_unparseable_url() -> None:
    with pytest.raises(ConfigurationError, match="cannot use Redis URL"):
        redis_client("http://localhost:6379")


# -- pipelined sends ------------------------------------------------------------------------


@pytest.mark.redis
def test_send_many_enqueues_in_order_with_reply_to(
    redis_server: RedisEndpoint, namespace: str
) -> None:
    with redis_server.client() as client:
        mailbox: RedisMailbox[int, Any] = RedisMailbox(
            "batch", client=client, namespace=namespace, body_type=int
        )
        ids = mailbox.send_many(range(25), reply_to="answers")
        received = [m for _ in range(3) for m in mailbox.receive(max_messages=10)]

        assert mailbox.send_many([]) == []
    assert [m.body for m in received] == list(range(25))
    assert [m.id for m in received] == ids and len(set(ids)) == 25
    assert {m.reply_to_name for m in received} == {"answers"}


@pytest.mark.redis
def test_send_many_respects_max_size_and_a_closed_mailbox(
    redis_server: RedisEndpoint, namespace: str
) -> None:
    with redis_server.client() as client:
        bounded: RedisMailbox[int, Any] = RedisMailbox(
            "bounded", client=client, namespace=namespace, max_size=3
        )
        with pytest.raises(MailboxFullError):
            bounded.send_many(range(5))
        assert bounded.approximate_count() == 3
        bounded.close()
        with pytest.raises(MailboxClosedError):
            bounded.send_many(range(1))
