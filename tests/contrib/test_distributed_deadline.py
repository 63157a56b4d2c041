"""Each request has a deadline: lost without a Redis restart, it is sent again, then recorded.

A request the client sent is queued, held by a worker, or answered. When one has had no
result for `request_deadline` seconds and the requests mailbox and the run's results
mailbox both hold nothing (no worker holds it, none is waiting, no answer is on its
way), it was lost (a worker that acknowledged without answering, a deleted key): the
client sends it again, and records an error of kind `lost` when that is lost too, each
time in one log line. On the real redis-server (`LossyWorker` loses what it is told
to), and the rule itself on in-memory mailboxes with a fake clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.contrib.test_distributed_client import FINGERPRINT, result_for
from tests.contrib.test_distributed_worker import questions
from tests.helpers.redis_server import RedisEndpoint, delete_namespace, unique_namespace
from weakincentives.clock import FakeClock
from weakincentives.contrib.distributed import DEFAULT_REQUEST_DEADLINE, run_distributed
from weakincentives.contrib.distributed._tracking import RequestDeadline
from weakincentives.contrib.mailbox import RedisMailbox
from weakincentives.errors import ConfigurationError
from weakincentives.evals import EvalRequest, RunStore, Sample
from weakincentives.runtime.mailbox import InMemoryMailbox

LOST_ONCE = "sending them again"
LOST_TWICE = "recording them as errors"


@pytest.fixture
def namespace(redis_server: RedisEndpoint) -> Iterator[str]:
    ns = unique_namespace()
    yield ns
    with redis_server.client() as client:
        delete_namespace(client, ns)


class LossyWorker:
    """Answers every request, except that it loses the first `drops[sample]` deliveries
    of a sample (acknowledges them without answering), and holds `hold[sample]` seconds
    before answering (the request stays with it, invisible, all that time)."""

    def __init__(
        self,
        endpoint: RedisEndpoint,
        namespace: str,
        *,
        drops: dict[str, int] | None = None,
        hold: dict[str, float] | None = None,
    ) -> None:
        self.client = endpoint.client()
        self.requests: RedisMailbox[EvalRequest[str, str], Any] = RedisMailbox(
            "eval-requests", client=self.client, namespace=namespace,
            body_type=EvalRequest[str, str],
        )  # fmt: skip
        self.drops = dict(drops or {})
        self.hold = dict(hold or {})
        self.seen: dict[str, int] = {}
        self.received: list[Sample[str, str]] = []
        """Every delivery's sample, in order."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> LossyWorker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.requests.close()
        self.client.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            batch = self.requests.receive(
                max_messages=10, visibility_timeout=60, wait_time_seconds=0.2
            )
            for message in batch:
                request = message.body
                sample = request.sample.id
                self.seen[sample] = self.seen.get(sample, 0) + 1
                self.received.append(request.sample)
                if self.seen[sample] <= self.drops.get(sample, 0):
                    message.acknowledge()  # lost: no answer, and gone from the queue
                    continue
                time.sleep(self.hold.get(sample, 0.0))
                outbox = message.reply_to
                assert outbox is not None
                outbox.send(result_for(request))
                message.acknowledge()


class ReadEachTime:
    """A re-iterable dataset that makes fresh `Sample`s on every pass (a file read again),
    counting its passes: the client reads it again instead of holding the samples."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.passes = 0

    def __iter__(self) -> Iterator[Sample[str, str]]:
        self.passes += 1
        for i in range(self.n):
            yield Sample(
                id=f"s{i}", input=f"question {i}", expected=f"answer {i}",
                metadata={"row": i, "tag": f"t{i % 3}"},
            )  # fmt: skip


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


@pytest.mark.redis
def test_a_request_lost_without_a_restart_is_sent_again_once(
    redis_server: RedisEndpoint, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with LossyWorker(redis_server, namespace, drops={"s1": 1}) as worker:
        report = run_distributed(
            questions(4), redis_url=redis_server.url, namespace=namespace, timeout=30,
            request_deadline=0.5,
        )  # fmt: skip

    assert report.complete and report.pass_rate == 1.0
    assert worker.seen == {"s0": 1, "s1": 2, "s2": 1, "s3": 1}
    (line,) = lines(caplog, LOST_ONCE)
    assert "1 request had no result 0.5s after it was sent" in line
    assert lines(caplog, LOST_TWICE) == []


@pytest.mark.redis
def test_a_request_lost_twice_is_an_error_result_of_kind_lost(
    redis_server: RedisEndpoint, namespace: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.INFO)
    store = RunStore(tmp_path / "runs")
    with LossyWorker(redis_server, namespace, drops={"s2": 99}) as worker:
        report = run_distributed(
            questions(3), redis_url=redis_server.url, namespace=namespace, timeout=30,
            request_deadline=0.5, run_store=store, fingerprint=FINGERPRINT, run_id="lossy",
        )  # fmt: skip

    assert report.complete and report.total == 3
    lost = {r.sample_id: r for r in report.results}["s2"]
    assert lost.error_kind == "lost" and not lost.passed
    assert lost.error == (
        "lost: no result 0.5s after it was sent, twice, and neither queued nor held by a worker"
    )
    assert worker.seen["s2"] == 2  # sent twice, no more
    assert len(lines(caplog, LOST_ONCE)) == 1 and len(lines(caplog, LOST_TWICE)) == 1
    stored = {r.sample_id: r for r in store.open("lossy").latest_results()}
    assert stored["s2"].error_kind == "lost"
    assert store.open("lossy").status == "complete"


@pytest.mark.redis
def test_a_request_a_worker_holds_past_the_deadline_is_not_lost(
    redis_server: RedisEndpoint, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with LossyWorker(redis_server, namespace, hold={"s0": 2.0}) as worker:
        report = run_distributed(
            questions(2), redis_url=redis_server.url, namespace=namespace, timeout=30,
            request_deadline=0.3,
        )  # fmt: skip

    assert report.complete and report.pass_rate == 1.0
    assert worker.seen == {"s0": 1, "s1": 1}  # never sent again
    assert lines(caplog, LOST_ONCE) == []


@pytest.mark.redis
def test_without_a_deadline_a_lost_request_waits_for_the_run_timeout(
    redis_server: RedisEndpoint, namespace: str
) -> None:
    with LossyWorker(redis_server, namespace, drops={"s0": 1}) as worker:
        report = run_distributed(
            questions(2), redis_url=redis_server.url, namespace=namespace, timeout=2,
            request_deadline=None,
        )  # fmt: skip

    assert not report.complete and report.missing == 1
    assert worker.seen == {"s0": 1, "s1": 1}


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan")])
def test_a_deadline_must_be_positive(seconds: float) -> None:
    with pytest.raises(ConfigurationError, match="request_deadline must be > 0"):
        run_distributed(questions(1), redis_url="redis://127.0.0.1:9/0", request_deadline=seconds)


def test_the_default_deadline_is_a_workers_visibility_timeout() -> None:
    assert DEFAULT_REQUEST_DEADLINE == 300.0


# -- the rule, on in-memory mailboxes ---------------------------------------------------


def mailboxes() -> tuple[InMemoryMailbox[str, Any], InMemoryMailbox[str, Any]]:
    return InMemoryMailbox("requests"), InMemoryMailbox("results")


def test_nothing_is_lost_before_the_deadline() -> None:
    clock = FakeClock()
    requests, results = mailboxes()
    deadline = RequestDeadline(10.0, requests, results, clock)
    clock.advance(9.9)
    assert not deadline.lost()
    clock.advance(0.1)
    assert deadline.lost()  # both mailboxes empty: nothing queued, held or answered


@pytest.mark.parametrize(
    "state", ["queued", "held by a worker", "answer waiting", "answer being collected"]
)
def test_a_request_that_is_somewhere_is_not_lost(state: str) -> None:
    clock = FakeClock()
    requests, results = mailboxes()
    deadline = RequestDeadline(10.0, requests, results, clock)
    if state in ("queued", "held by a worker"):
        requests.send("request")
        if state == "held by a worker":
            (held,) = requests.receive(visibility_timeout=3600)
            assert held.body == "request"
    else:
        results.send("result")
        if state == "answer being collected":
            results.receive(visibility_timeout=60)
    clock.advance(3600)
    assert not deadline.lost()


def test_sending_again_restarts_the_deadline() -> None:
    clock = FakeClock()
    requests, results = mailboxes()
    deadline = RequestDeadline(10.0, requests, results, clock)
    clock.advance(11)
    assert deadline.lost()
    deadline.restart()
    clock.advance(5)
    assert not deadline.lost()
    clock.advance(5)
    assert deadline.lost()


def test_no_deadline_never_loses_anything() -> None:
    clock = FakeClock()
    requests, results = mailboxes()
    deadline = RequestDeadline(None, requests, results, clock)
    clock.advance(10**6)
    assert not deadline.lost()
    assert deadline.check_every(5.0) == 5.0
    assert RequestDeadline(0.5, requests, results, clock).check_every(5.0) == 0.5


# -- wink eval run --redis --request-deadline ----------------------------------------------


def shout(text: str) -> str:
    return text.upper()


@pytest.mark.redis
def test_wink_eval_run_takes_the_deadline_and_records_what_was_lost(
    redis_server: RedisEndpoint, namespace: str, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from weakincentives.cli import app
    from weakincentives.cli._eval import DEFAULT_REQUEST_DEADLINE as CLI_DEFAULT

    assert CLI_DEFAULT == DEFAULT_REQUEST_DEADLINE  # the CLI keeps its own copy (no redis)
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(
        "".join(f'{{"id": "s{i}", "input": "q{i}", "expected": "Q{i}"}}\n' for i in range(3))
    )
    with LossyWorker(redis_server, namespace, drops={"s0": 99}):
        result = CliRunner().invoke(app, [
            "eval", "run", f"{__name__}:shout", "--dataset", str(dataset), "--redis",
            redis_server.url, "--namespace", namespace, "--runs-dir", str(tmp_path / "runs"),
            "--run-id", "cli-lost", "--run-timeout", "30", "--request-deadline", "0.5",
        ])  # fmt: skip
    assert result.exit_code == 0, result.output  # complete: every sample has a result
    stored = {r.sample_id: r for r in RunStore(tmp_path / "runs").open("cli-lost").latest_results()}
    assert stored["s0"].error_kind == "lost"
    assert RunStore(tmp_path / "runs").open("cli-lost").manifest.config["request_deadline"] == 0.5


@pytest.mark.redis
def test_a_request_sent_again_carries_the_same_sample_read_again_from_the_dataset(
    redis_server: RedisEndpoint, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    dataset = ReadEachTime(5)
    with LossyWorker(redis_server, namespace, drops={"s3": 1}) as worker:
        report = run_distributed(
            dataset, redis_url=redis_server.url, namespace=namespace, timeout=30,
            request_deadline=0.5,
        )  # fmt: skip

    assert report.complete and report.pass_rate == 1.0
    assert worker.seen == {"s0": 1, "s1": 1, "s2": 1, "s3": 2, "s4": 1}
    first, again = [s for s in worker.received if s.id == "s3"]
    assert (
        again
        == first
        == Sample(
            id="s3", input="question 3", expected="answer 3", metadata={"row": 3, "tag": "t0"}
        )
    )
    # Read for the ids, the submission and the resend (the samples themselves not held).
    assert dataset.passes >= 3
    assert len(lines(caplog, LOST_ONCE)) == 1


@pytest.mark.redis
def test_a_request_lost_twice_names_its_sample_read_again_from_the_dataset(
    redis_server: RedisEndpoint, namespace: str, tmp_path: Path
) -> None:
    dataset = ReadEachTime(3)
    with LossyWorker(redis_server, namespace, drops={"s1": 2}) as worker:
        report = run_distributed(
            dataset, redis_url=redis_server.url, namespace=namespace, timeout=30,
            request_deadline=0.5, run_store=RunStore(tmp_path),
        )  # fmt: skip

    assert worker.seen["s1"] == 2
    (lost,) = [r for r in report.results if r.error_kind == "lost"]
    assert (lost.sample_id, lost.metadata) == ("s1", {"row": 1, "tag": "t1"})
    assert report.total == 3 and report.error_count == 1


def test_the_clients_bookkeeping_keeps_a_few_bytes_per_request_and_no_sample() -> None:
    # What the client keeps per request while it runs: the expected keys (an index of
    # the ids), the done flags and the sent-again flags; the samples are read again.
    import gc
    import tracemalloc

    import numpy  # noqa: F401  # loaded before tracing: its import is not the client's

    from weakincentives.contrib.distributed._client import _index_ids
    from weakincentives.contrib.distributed._collector import Collector, ExpectedKeys
    from weakincentives.contrib.distributed._lost import LostRequests
    from weakincentives.evals import BASELINE

    def measure(n: int) -> int:
        dataset = ReadEachTime(n)
        tracemalloc.start()
        try:
            expected = ExpectedKeys(_index_ids(dataset), (BASELINE,), 2)
            collector = Collector(expected, "run", None, None)
            lost = LostRequests(dataset, (BASELINE,), 2, collector, 1.0)
            lost.send_again()  # every request is missing: all marked, none held
            kept = tracemalloc.get_traced_memory()[0]
            held = [o for o in gc.get_referents(expected, collector, lost) if type(o) is Sample]
            assert held == [] and len(expected) == 2 * n
            return kept
        finally:
            tracemalloc.stop()

    small, large = measure(2_000), measure(20_000)
    # Per sample: 8 bytes of id hash (and its spare room), 2 x 2 one-byte flags.
    assert (large - small) / 18_000 < 16.0
