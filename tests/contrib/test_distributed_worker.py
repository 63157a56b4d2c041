"""The worker side of distributed evaluation: `wink worker`, `DistributedWorker`, specs.

This module is also the *worker app* that the subprocess tests (here and in
`test_distributed_chaos.py`) start with `wink worker <this file>:sleepy_worker`: an agent
that waits `WINK_TEST_AGENT_DELAY` seconds (default 50 ms) and answers `q17` with `a17`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.helpers.redis_server import RedisEndpoint, delete_namespace, free_port, unique_namespace
from weakincentives.cli import app
from weakincentives.clock import FakeClock
from weakincentives.contrib.distributed import (
    DistributedWorker,
    WorkerContext,
    WorkerOptions,
    WorkerSpec,
    redis_client,
    resolve_worker_spec,
    run_distributed,
)
from weakincentives.contrib.mailbox import RedisMailbox
from weakincentives.errors import ConfigurationError, MailboxArgumentError, MailboxConnectionError
from weakincentives.evals import EvalRequest, EvalResult, Sample, exact_match
from weakincentives.experiment import BASELINE
from weakincentives.runtime import AgentLoopRequest, FunctionLoop, MailboxWorker
from weakincentives.runtime.lease import WorkerHeartbeat
from weakincentives.runtime.mailbox import FakeMailbox, Message

REPO = Path(__file__).resolve().parents[2]
APP = f"{Path(__file__).resolve()}:sleepy_worker"
"""The `wink worker` target of the subprocess tests."""

# -- the worker app ---------------------------------------------------------------------


def answer(question: str) -> str:
    """The agent: wait `WINK_TEST_AGENT_DELAY` seconds (the model call), answer `a<n>`."""
    time.sleep(float(os.environ.get("WINK_TEST_AGENT_DELAY", "0.05")))
    return "a" + question[1:]


def sleepy_worker(context: WorkerContext) -> WorkerSpec:
    """The worker factory `wink worker` loads in the subprocess tests."""
    del context
    return WorkerSpec(
        loop=FunctionLoop(answer, name="sleepy"),
        evaluator=exact_match,
        input_type=str,
        expected_type=str,
    )


def questions(n: int, prefix: str = "s") -> list[Sample[str, str]]:
    return [Sample(id=f"{prefix}{i}", input=f"q{i}", expected=f"a{i}") for i in range(n)]


class WorkerProcess:
    """`wink worker APP` in a subprocess, logging to a file (shown when a test fails)."""

    def __init__(
        self, url: str, namespace: str, log_dir: Path, *args: str, delay: float = 0.05
    ) -> None:
        self.log_path = log_dir / f"worker-{time.monotonic_ns()}.log"
        command = [
            sys.executable, "-c", "from weakincentives.cli import main; main()",
            "worker", APP, "--redis", url, "--namespace", namespace, "--log-level", "INFO",
            *args,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO), "WINK_TEST_AGENT_DELAY": str(delay)}
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO
            )

    def alive(self) -> bool:
        return self.process.poll() is None

    def serving(self) -> bool:
        """True once the worker logged that it serves (its loops are starting)."""
        return b"serving " in self.log_path.read_bytes()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def terminate(self, timeout: float = 30.0) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def wait_until(predicate: Any, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not met within {timeout} s"
        time.sleep(0.02)


@pytest.fixture
def namespace(redis_server: RedisEndpoint) -> Iterator[str]:
    ns = unique_namespace()
    yield ns
    with redis_server.client() as client:
        delete_namespace(client, ns)


@pytest.fixture
def started(redis_server: RedisEndpoint, namespace: str) -> Iterator[DistributedWorker]:
    """An in-process worker (threads) on the shared server, concurrency 4."""
    client = redis_server.client()
    worker = DistributedWorker(
        sleepy_worker(WorkerContext(client=client)),
        client=client,
        options=WorkerOptions(namespace=namespace, concurrency=4, visibility_timeout=30),
    )
    worker.start()
    yield worker
    assert worker.shutdown(10)
    client.close()


# -- specs and options --------------------------------------------------------------------


SPEC = WorkerSpec(loop=FunctionLoop(str.upper, name="upper"), evaluator=exact_match)


def no_args() -> WorkerSpec:
    return SPEC


def with_context(context: WorkerContext) -> WorkerSpec:
    return WorkerSpec(loop=SPEC.loop, evaluator=exact_match, input_type=context.namespace)


@pytest.mark.parametrize("target", [SPEC, no_args], ids=["instance", "no-arg factory"])
def test_a_spec_or_a_factory_without_arguments_resolves(target: Any) -> None:
    assert resolve_worker_spec(target, WorkerContext(client=None)) is SPEC


def test_a_factory_with_one_argument_gets_the_context() -> None:
    spec = resolve_worker_spec(with_context, WorkerContext(client=None, namespace="ns-7"))

    assert spec.input_type == "ns-7"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (42, "must be a WorkerSpec or a factory"),
        (lambda a, b: SPEC, "takes 2 arguments"),
        (lambda: "not a spec", "returned a str, not a WorkerSpec"),
    ],
    ids=["not callable", "two arguments", "wrong return"],
)
def test_bad_worker_targets_are_configuration_errors(target: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        resolve_worker_spec(target, WorkerContext(client=None))


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"concurrency": 0}, ConfigurationError),
        ({"max_deliveries": 0}, ConfigurationError),
        ({"requests": ""}, ConfigurationError),
        ({"agent_requests": "eval-requests"}, ConfigurationError),
        ({"visibility_timeout": -1.0}, MailboxArgumentError),
        ({"wait_time_seconds": 60.0}, MailboxArgumentError),
        ({"shutdown_timeout": -1.0}, ConfigurationError),
    ],
)
def test_invalid_worker_options_are_rejected(options: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        WorkerOptions(**options)


def test_the_dead_letter_mailbox_is_named_after_the_requests_by_default() -> None:
    assert WorkerOptions(requests="evals").dlq_name == "evals-dlq"
    assert WorkerOptions(requests="evals", dlq="graveyard").dlq_name == "graveyard"


# -- surviving outages ---------------------------------------------------------------------


class Recording(MailboxWorker[Any, Any]):
    def __init__(self, requests: FakeMailbox[Any, Any]) -> None:
        super().__init__(requests=requests, clock=FakeClock())
        self.handled: list[Any] = []

    def handle(self, message: Message[Any, Any], heartbeat: WorkerHeartbeat) -> None:
        self.handled.append(message.body)


def test_a_worker_backs_off_through_failing_receives_and_keeps_serving() -> None:
    mailbox: FakeMailbox[str, None] = FakeMailbox(clock=FakeClock())
    mailbox.send("after the outage")
    mailbox.fail_next_receive(MailboxConnectionError("redis restarting"), times=3)
    worker = Recording(mailbox)

    started = time.monotonic()
    worker.run(until_drained=True, wait_time_seconds=0)

    assert worker.handled == ["after the outage"]
    assert worker.stats.receive_errors == 3
    # Backoff 0.05 + 0.1 + 0.2 s: it waited instead of spinning on a dead backend.
    assert time.monotonic() - started >= 0.3


# -- in-process workers on a real Redis ------------------------------------------------------


@pytest.mark.redis
def test_an_in_process_worker_evaluates_every_sample_once(
    started: DistributedWorker, redis_server: RedisEndpoint, namespace: str
) -> None:
    report = run_distributed(
        questions(20), redis_url=redis_server.url, namespace=namespace, timeout=30
    )

    assert report.complete
    assert sorted(r.sample_id for r in report.results) == sorted(s.id for s in questions(20))
    assert report.pass_rate == 1.0
    assert started.eval_loop.stats.succeeded == 20


class RawCodec:
    """Sends bytes as they are: how a foreign producer writes garbage into a queue."""

    def encode(self, body: bytes) -> bytes:
        return body

    def decode(self, payload: bytes) -> bytes:
        return payload


@pytest.mark.redis
@pytest.mark.parametrize(
    "payload",
    [b"\xff\xfe not json at all", b'{"sample": "no experiment, no id"}'],
    ids=["not JSON", "not an EvalRequest"],
)
def test_a_poison_message_goes_to_the_dead_letter_queue_and_work_goes_on(
    started: DistributedWorker, redis_server: RedisEndpoint, namespace: str, payload: bytes
) -> None:
    with redis_server.client() as client:
        raw: RedisMailbox[bytes, Any] = RedisMailbox(
            "eval-requests", client=client, namespace=namespace, codec=RawCodec()
        )
        poison_id = raw.send(payload)

        report = run_distributed(questions(10), client=client, namespace=namespace, timeout=30)

        dlq: RedisMailbox[Any, Any] = RedisMailbox(
            "eval-requests-dlq", client=client, namespace=namespace
        )
        wait_until(lambda: dlq.approximate_count() == 1, what="dead letter")
        (letter,) = dlq.receive()

    assert report.complete and report.pass_rate == 1.0
    dead = letter.body
    assert dead["message_id"] == poison_id
    assert dead["reason"] == "undecodable"
    assert dead["source"] == "eval-requests"
    assert dead["raw_body"] == payload.decode("utf-8", errors="backslashreplace")
    assert started.eval_loop.stats.dead_lettered == 1


@pytest.mark.redis
def test_with_agent_requests_the_worker_also_serves_production_traffic(
    redis_server: RedisEndpoint, namespace: str
) -> None:
    client = redis_server.client()
    options = WorkerOptions(namespace=namespace, agent_requests="agent-requests")
    worker = DistributedWorker(SPEC, client=client, options=options)
    worker.start()
    try:
        agent: RedisMailbox[Any, Any] = RedisMailbox(
            "agent-requests", client=client, namespace=namespace
        )
        answers: RedisMailbox[Any, Any] = RedisMailbox(
            "answers", client=client, namespace=namespace
        )
        request = AgentLoopRequest("hello")
        agent.send(request, reply_to="answers")
        (reply,) = answers.receive(wait_time_seconds=10)
    finally:
        assert worker.shutdown(10)
        client.close()

    assert reply.body["request_id"] == str(request.request_id)
    assert reply.body["output"] == "HELLO"
    assert reply.body["error"] is None


# -- the command line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nowhere_module_xyz:factory"], "nowhere_module_xyz"),
        ([f"{Path(__file__).resolve()}:SPEC", "--log-level", "LOUD"], "unknown --log-level"),
        ([f"{Path(__file__).resolve()}:_send"], "takes 2 arguments"),
        ([f"{Path(__file__).resolve()}:SPEC", "--redis", "http://x"], "Redis URL"),
    ],
    ids=["missing module", "bad log level", "not a factory", "bad url"],
)
def test_wink_worker_rejects_bad_configuration_with_status_2(args: list[str], message: str) -> None:
    if "--redis" not in args:
        args = [*args, "--redis", "redis://127.0.0.1:1/0"]

    result = CliRunner().invoke(app, ["worker", *args])

    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def http_get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
    except OSError:
        return 0, {}


@pytest.mark.redis
@pytest.mark.slow
def test_wink_worker_reports_health_and_finishes_in_flight_samples_on_sigterm(
    redis_server: RedisEndpoint, namespace: str, tmp_path: Path
) -> None:
    port = free_port()
    worker = WorkerProcess(
        redis_server.url, namespace, tmp_path, "--concurrency", "2", "--health-port",
        str(port), "--visibility-timeout", "120", delay=0.4,
    )  # fmt: skip
    try:
        ready = f"http://127.0.0.1:{port}/health/ready"
        wait_until(lambda: http_get(ready)[0] == 200, what="ready")
        assert http_get(f"http://127.0.0.1:{port}/health/live") == (200, {"live": True})
        with redis_server.client() as client:
            requests: RedisMailbox[Any, Any] = RedisMailbox(
                "eval-requests", client=client, namespace=namespace
            )
            replies: RedisMailbox[EvalResult, Any] = RedisMailbox(
                "replies", client=client, namespace=namespace, body_type=EvalResult
            )
            sent = {_send(requests, sample) for sample in questions(6)}
            first = replies.receive(wait_time_seconds=10)  # the worker is busy now
            assert first

            assert worker.terminate() == 0, worker.log()

            answered = {m.body.request_id for m in [*first, *replies.receive(max_messages=10)]}
            # Visible at once: nothing the worker had taken is hidden for 120 s.
            returned = {m.body["request_id"] for m in requests.receive(max_messages=10)}
    finally:
        if worker.alive():
            worker.kill()
    assert answered | returned == sent
    assert not answered & returned
    assert "shutting down" in worker.log()


def _send(requests: RedisMailbox[Any, Any], sample: Sample[str, str]) -> str:
    request = EvalRequest(sample=sample, experiment=BASELINE)
    requests.send(request, reply_to="replies")
    return str(request.request_id)


def test_redis_client_rejects_settings_that_break_long_polls() -> None:
    with pytest.raises(ConfigurationError, match="socket_timeout"):
        redis_client("redis://localhost:6379/0", socket_timeout=1.0)
    with pytest.raises(ConfigurationError, match="backoff_base"):
        redis_client("redis://localhost:6379/0", backoff_base=0)


@pytest.mark.redis
def test_concurrent_runs_on_one_queue_each_get_their_own_results(
    started: DistributedWorker, redis_server: RedisEndpoint, namespace: str
) -> None:
    results: list[Any] = []
    runs = [
        threading.Thread(
            target=lambda p=prefix: results.append(
                run_distributed(
                    questions(5, p), redis_url=redis_server.url, namespace=namespace, timeout=30
                )
            )
        )
        for prefix in ("x", "y")
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join(30)

    assert [r.complete for r in results] == [True, True]
    assert {r.results[0].sample_id[0] for r in results} == {"x", "y"}
