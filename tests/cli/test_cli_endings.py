"""How `wink` ends: one unwrapped error line, the documented exit codes, signals.

Error output is compared at two terminal widths (it must not depend on either, nor on
the temp path's length); exits and signals are checked on real `wink` subprocesses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers.redis_server import RedisEndpoint, delete_namespace, unique_namespace
from weakincentives.cli import app
from weakincentives.evals import RunStore

WINK = Path(sys.executable).with_name("wink")

AGENTS = """
import time

def shout(text: str) -> str:
    return text.upper()

def slow(text: str) -> str:
    time.sleep(0.05)
    return text.upper()
"""


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # A long directory name: an error naming a path must still be one line.
    deep = tmp_path / ("a-rather-long-directory-name-" * 4).rstrip("-")
    deep.mkdir()
    (deep / "agents.py").write_text(AGENTS)
    rows = [{"id": f"s{i}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(40)]
    (deep / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (deep / "empty.jsonl").write_text("")
    monkeypatch.chdir(deep)
    return deep


def invoke(columns: int, *args: str) -> tuple[int, str]:
    result = CliRunner(env={"COLUMNS": str(columns), "TERMINAL_WIDTH": str(columns)}).invoke(
        app, list(args)
    )
    return result.exit_code, result.output


BAD_INPUT = {
    "debug-missing-target": ["debug", "{work}/no/such/run/at/all", "--no-open"],
    "option-out-of-range": ["eval", "run", "agents.py:shout", "--concurrency", "0"],
    "unknown-option": ["eval", "run", "agents.py:shout", "--no-such-flag"],
    "redis-with-local-flags": [
        "eval", "run", "agents.py:shout", "--dataset", "data.jsonl", "--redis",
        "redis://127.0.0.1:9/0", "--evaluator", "exact_match", "--timeout", "5",
    ],
    "worker-given-a-task-function": ["worker", "{work}/agents.py:shout", "--redis", "redis://x"],
    "worker-negative-visibility": [
        "worker", "{work}/agents.py:shout", "--redis", "redis://x", "--visibility-timeout", "-1",
    ],
    "report-of-a-missing-run": ["eval", "report", "{work}/runs/not-a-run"],
    "stats-bad-rate": ["stats", "power", "--baseline-rate", "1.5", "--effect", "0.1"],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_an_error_is_one_line_identical_at_any_terminal_width(work: Path, case: str) -> None:
    args = [a.format(work=work) for a in BAD_INPUT[case]]
    narrow, wide = invoke(20, *args), invoke(400, *args)
    assert narrow == wide
    code, output = narrow
    assert code == 2, output
    assert "Traceback" not in output
    (line,) = [x for x in output.splitlines() if x.startswith("error:")]
    if case in NAMES_ITS_PATH:  # the long path is there whole, on that one line
        assert args[NAMES_ITS_PATH[case]] in line, line


NAMES_ITS_PATH = {"debug-missing-target": 1, "report-of-a-missing-run": 2}


def test_the_worker_names_the_task_function_it_was_given(work: Path) -> None:
    code, output = invoke(80, "worker", f"{work}/agents.py:shout", "--redis", "redis://x")
    assert code == 2
    assert "shout takes 1 argument (text), so it is not a worker factory" in output
    assert "FunctionLoop(shout)" in output


def test_an_empty_dataset_exits_3(work: Path) -> None:
    code, output = invoke(
        80, "eval", "run", "agents.py:shout", "--dataset", "empty.jsonl", "--evaluator",
        "exact_match",
    )  # fmt: skip
    assert code == 3, output
    assert output.strip() == "error: the dataset holds no samples; nothing to evaluate"


def test_an_unreachable_redis_is_one_line_and_exit_2(work: Path) -> None:
    code, output = invoke(
        80, "eval", "run", "agents.py:shout", "--dataset", "data.jsonl", "--redis",
        "redis://127.0.0.1:9/0",
    )  # fmt: skip
    assert code == 2, output
    assert output.startswith("error: cannot reach Redis at 127.0.0.1:9/0")
    assert "Traceback" not in output and len(output.strip().splitlines()) == 1


@pytest.mark.redis
def test_a_distributed_run_without_workers_exits_3_at_its_run_timeout(
    work: Path, redis_server: RedisEndpoint
) -> None:
    namespace = unique_namespace()
    try:
        code, output = invoke(
            80, "eval", "run", "agents.py:shout", "--dataset", "data.jsonl", "--redis",
            redis_server.url, "--namespace", namespace, "--run-timeout", "1", "--run-id", "r1",
        )  # fmt: skip
    finally:
        with redis_server.client() as client:
            delete_namespace(client, namespace)
    assert code == 3, output
    (line,) = [x for x in output.splitlines() if x.startswith("incomplete:")]
    assert "40 of 40 results missing" in line
    assert "40 requests still wait in the requests mailbox" in line
    assert f"--redis {redis_server.url} --namespace {namespace} --resume r1" in line
    assert RunStore(work / "runs").open("r1").manifest.status == "interrupted"


def start(work: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(WINK), *args], cwd=work, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "80"},
    )  # fmt: skip


def wait_for_results(process: subprocess.Popen[str], results: Path, at_least: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        if results.is_file() and results.read_bytes().count(b"\n") >= at_least:
            return
        time.sleep(0.01)
    pytest.fail("no results within 60 s")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sent", "code", "label"),
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
)
def test_sigterm_is_handled_like_ctrl_c(
    work: Path, sent: signal.Signals, code: int, label: str
) -> None:
    process = start(
        work, "eval", "run", "agents.py:slow", "--dataset", "data.jsonl", "--evaluator",
        "exact_match", "--concurrency", "2", "--run-id", "sig",
    )  # fmt: skip
    wait_for_results(process, work / "runs" / "sig" / "results.jsonl", 2)
    process.send_signal(sent)
    _, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    assert "Traceback" not in err
    assert f"{label}: run sig is saved as interrupted." in err
    assert "--resume sig" in err
    run = RunStore(work / "runs").open("sig")
    assert run.manifest.status == "interrupted"
    assert 2 <= len(list(run.iter_results())) < 40


@pytest.mark.slow
def test_ctrl_c_while_loading_the_target_is_one_line(work: Path) -> None:
    (work / "slow_import.py").write_text(
        "import pathlib, time\npathlib.Path('importing').touch()\ntime.sleep(30)\n"
        "def f(x): return x\n"
    )
    process = start(work, "eval", "run", "slow_import.py:f", "--dataset", "data.jsonl")
    deadline = time.monotonic() + 60
    while not (work / "importing").exists():  # `wink` is importing the target
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip() == "interrupted: before the run started; nothing was recorded."


def test_a_run_resumes_from_another_directory(work: Path, tmp_path: Path) -> None:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": os.environ.get("PATH", "")}  # fmt: skip
    for command in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "x"]):
        subprocess.run(command, cwd=work, check=True, env=env, capture_output=True)
    args = ["eval", "run", "agents.py:shout", "--dataset", "data.jsonl", "--evaluator",
            "exact_match", "--run-id", "r1"]  # fmt: skip
    code, output = invoke(80, *args)
    assert code == 0, output
    elsewhere = tmp_path / "elsewhere"  # not in the checkout: another git commit, or none
    elsewhere.mkdir()
    os.chdir(elsewhere)
    code, output = invoke(
        80, "eval", "run", f"{work}/agents.py:shout", "--dataset", f"{work}/data.jsonl",
        "--evaluator", "exact_match", "--resume", f"{work}/runs/r1", "--json",
    )  # fmt: skip
    assert code == 0, output
    data = json.loads(output)
    assert data["complete"] and data["total"] == 40
    assert data["run_dir"] == f"{work}/runs/r1"
    assert len(list(RunStore(work / "runs").open("r1").iter_results())) == 40  # none re-ran
