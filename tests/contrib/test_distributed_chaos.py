"""Distributed runs under fire: workers SIGKILLed mid-run, Redis restarted mid-run.

Real `wink worker` subprocesses (the app in `test_distributed_worker.py`) and real
redis-servers. The report must hold exactly one result per request either way: nothing
lost, nothing counted twice.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contrib.test_distributed_worker import WorkerProcess, questions, wait_until
from tests.helpers.redis_server import (
    RedisEndpoint,
    RedisServer,
    delete_namespace,
    find_redis_server,
    missing_redis,
    unique_namespace,
)
from weakincentives.contrib.distributed import run_distributed
from weakincentives.evals import EvalReport, EvalResult, RunStore

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
def namespace(redis_server: RedisEndpoint) -> Iterator[str]:
    ns = unique_namespace()
    yield ns
    with redis_server.client() as client:
        delete_namespace(client, ns)


class Workers:
    """A pool of worker subprocesses that can be killed and replaced."""

    def __init__(self, url: str, namespace: str, log_dir: Path, *args: str) -> None:
        self._url, self._namespace, self._log_dir, self._args = url, namespace, log_dir, args
        self.live: list[tuple[WorkerProcess, float]] = []
        self.killed: list[WorkerProcess] = []

    def spawn(self) -> None:
        worker = WorkerProcess(self._url, self._namespace, self._log_dir, *self._args)
        self.live.append((worker, 0.0))  # 0.0: not serving yet

    def kill_one(self, rng: random.Random, *, min_age: float) -> bool:
        """SIGKILL a random worker serving for `min_age` s (so it holds work, usually)."""
        now = time.monotonic()
        for index, (worker, since) in enumerate(self.live):
            if since == 0.0 and worker.serving():
                self.live[index] = (worker, now)
        busy = [entry for entry in self.live if entry[1] and now - entry[1] >= min_age]
        if not busy:
            return False
        entry = rng.choice(busy)
        self.live.remove(entry)
        entry[0].kill()
        self.killed.append(entry[0])
        return True

    def stop(self) -> None:
        for worker, _ in self.live:
            if worker.alive():
                worker.kill()

    def logs(self) -> str:
        return "\n---\n".join(w.log() for w, _ in self.live)


def check_exactly_once(report: EvalReport, store: RunStore, n: int) -> None:
    assert report.complete, f"{report.missing} results missing"
    assert len(report.results) == n
    assert sorted(r.sample_id for r in report.results) == sorted(s.id for s in questions(n))
    assert report.pass_rate == 1.0
    run = store.open(str(report.run_id))
    lines = list(run.iter_results())
    assert len(lines) == n, "the run store got a duplicate (or lost a result)"
    # The report keeps slim results (no request id); the store has them whole.
    assert len({r.request_id for r in lines}) == n
    assert run.status == "complete"


def test_sigkilled_workers_lose_nothing_and_duplicate_nothing(
    redis_server: RedisEndpoint, namespace: str, tmp_path: Path
) -> None:
    rng = random.Random(20261120)
    workers = Workers(
        redis_server.url, namespace, tmp_path, "--visibility-timeout", "2", "--concurrency", "1"
    )
    stop = threading.Event()

    def chaos() -> None:
        # A dozen kills, then the survivors finish: a loaded machine starts workers
        # slowly, and an endless kill loop would measure its speed, not exactly-once.
        while len(workers.killed) < 12 and not stop.wait(rng.uniform(0.8, 1.2)):
            if workers.kill_one(rng, min_age=0.3):
                workers.spawn()

    for _ in range(3):
        workers.spawn()
    killer = threading.Thread(target=chaos, daemon=True)
    store = RunStore(tmp_path / "runs")
    try:
        killer.start()
        report = run_distributed(
            questions(300), redis_url=redis_server.url, namespace=namespace, run_store=store,
            timeout=240,
        )  # fmt: skip
    finally:
        stop.set()
        killer.join(10)
        logs = workers.logs()
        workers.stop()

    check_exactly_once(report, store, 300)
    assert len(workers.killed) >= 3, logs
    redelivered = [r for r in report.results if r.delivery_count > 1]
    assert redelivered, "no killed worker held a message: the test did not test anything"


class Counting:
    """A progress sink that fires `reached` once `threshold` results are in."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.count = 0
        self.reached = threading.Event()
        self.finished = False

    def start(self, total: int | None) -> None:
        assert total is not None

    def advance(self, result: EvalResult) -> None:
        self.count += 1
        if self.count >= self.threshold:
            self.reached.set()

    def finish(self) -> None:
        self.finished = True


@pytest.fixture
def private_server(tmp_path: Path) -> Iterator[RedisServer]:
    executable = find_redis_server()
    if executable is None:
        missing_redis("no redis-server binary to start a private server")
    with RedisServer(executable, tmp_path / "redis", appendonly=True) as server:
        yield server


def server_run_id(server: RedisServer) -> str:
    with server.client() as client:
        return str(client.info("server")["run_id"])


def test_workers_and_the_client_ride_out_a_redis_outage_and_restart(
    private_server: RedisServer, tmp_path: Path
) -> None:
    namespace = unique_namespace()
    workers = Workers(
        private_server.url, namespace, tmp_path, "--visibility-timeout", "3", "--concurrency", "2"
    )
    for _ in range(2):
        workers.spawn()
    progress = Counting(threshold=60)
    store = RunStore(tmp_path / "runs")
    reports: list[EvalReport] = []
    client = threading.Thread(
        target=lambda: reports.append(
            run_distributed(
                questions(200),
                redis_url=private_server.url,
                namespace=namespace,
                run_store=store,
                timeout=240,
                progress=progress,
            )
        ),
        daemon=True,
    )
    before = server_run_id(private_server)
    try:
        client.start()
        assert progress.reached.wait(30), workers.logs()
        # Down long enough for the clients' own retries to give up: the workers must
        # back off and wait for the server instead of dying.
        private_server.stop()
        wait_until(
            lambda: "backend unreachable while" in workers.logs(), what="an outage seen by a worker"
        )
        private_server.start()
        client.join(245)

        def recovered() -> bool:  # a worker still in its backoff says so when it polls
            logs = [w.log_path.read_text(errors="replace") for w, _ in workers.live]
            return all(
                log.count("backend reachable again") >= min(1, log.count("backend unreachable"))
                for log in logs
            )

        wait_until(recovered, timeout=60, what="every worker that saw the outage back")
        survivors = [w.alive() for w, _ in workers.live]
        logs = workers.logs()
    finally:
        workers.stop()

    assert server_run_id(private_server) != before  # it really restarted
    assert reports, f"the client did not finish\n{logs}"
    check_exactly_once(reports[0], store, 200)
    assert survivors == [True, True], logs
    for worker, _ in workers.live:  # calm logs: one warning and one recovery line at most
        log = worker.log_path.read_text(errors="replace")
        assert "Traceback" not in log, log
        outages = log.count("backend unreachable while")
        assert outages <= 1 and log.count("backend reachable again") == outages, log
    assert "backend reachable again" in logs
    assert progress.finished
