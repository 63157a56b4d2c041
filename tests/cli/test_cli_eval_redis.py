"""`wink eval run --redis`: submit to workers on Redis and collect into the run store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers.redis_server import RedisEndpoint, delete_namespace, unique_namespace
from weakincentives.cli import app
from weakincentives.contrib.distributed import DistributedWorker, WorkerOptions, WorkerSpec
from weakincentives.evals import EvalReport, exact_match
from weakincentives.runtime import FunctionLoop


def shout(text: str) -> str:
    return text.upper()


def target() -> FunctionLoop[str, str]:
    """The TARGET the client names (for the fingerprint); the workers run the same."""
    return FunctionLoop(shout, name="shout")


@pytest.fixture
def namespace(redis_server: RedisEndpoint) -> Iterator[str]:
    ns = unique_namespace()
    yield ns
    with redis_server.client() as client:
        delete_namespace(client, ns)


@pytest.fixture
def worker(redis_server: RedisEndpoint, namespace: str) -> Iterator[DistributedWorker]:
    client = redis_server.client()
    spec = WorkerSpec(loop=target(), evaluator=exact_match, input_type=str, expected_type=str)
    running = DistributedWorker(
        spec, client=client, options=WorkerOptions(namespace=namespace, concurrency=4)
    )
    running.start()
    yield running
    assert running.shutdown(10)
    client.close()


def test_run_on_redis_collects_every_result_into_the_run_store(
    tmp_path: Path, redis_server: RedisEndpoint, namespace: str, worker: DistributedWorker
) -> None:
    dataset = tmp_path / "d.jsonl"
    rows = [
        {"id": f"s{i}", "input": f"q{i}", "expected": f"Q{i}" if i % 4 else "x"} for i in range(20)
    ]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "run",
            f"{__name__}:target",
            "--dataset",
            str(dataset),
            "--redis",
            redis_server.url,
            "--namespace",
            namespace,
            "--runs-dir",
            str(tmp_path / "runs"),
            "--run-id",
            "dist-1",
            "--run-timeout",
            "60",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = EvalReport.load(tmp_path / "runs" / "dist-1")
    assert sorted(r.sample_id for r in report.results) == sorted(f"s{i}" for i in range(20))
    assert report.pass_rate == pytest.approx(15 / 20)
    # The samples ran on the worker, not in the client.
    assert worker.eval_loop.stats.succeeded == 20
    # The manifest records the provenance, and every result line its input and expected.
    manifest = json.loads((tmp_path / "runs" / "dist-1" / "run.json").read_text())
    assert manifest["provenance"]["python_version"]
    lines = (tmp_path / "runs" / "dist-1" / "results.jsonl").read_text().splitlines()
    assert all(json.loads(line)["input"] is not None for line in lines)


def test_run_on_redis_applies_the_selection_and_keeps_tags(
    tmp_path: Path, redis_server: RedisEndpoint, namespace: str, worker: DistributedWorker
) -> None:
    dataset = tmp_path / "d.jsonl"
    rows = [{"id": f"s{i}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(20)]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [
        "eval", "run", f"{__name__}:target", "--dataset", str(dataset),
        "--redis", redis_server.url, "--namespace", namespace, "--runs-dir",
        str(tmp_path / "runs"), "--run-id", "dist-sel", "--run-timeout", "60", "--json",
        "--where", 'id != "s0"', "--limit", "5", "--tag", "dist", "--note", "on redis",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["run"]["selection"] == 'where id != "s0"; limit 5'
    report = EvalReport.load(tmp_path / "runs" / "dist-sel")
    assert sorted(r.sample_id for r in report.results) == ["s1", "s2", "s3", "s4", "s5"]
    manifest = json.loads((tmp_path / "runs" / "dist-sel" / "run.json").read_text())
    assert (manifest["config"]["tags"], manifest["config"]["note"]) == (["dist"], "on redis")
    assert manifest["fingerprint"]["extra"]["selection"] == {"where": 'id != "s0"', "limit": 5}
