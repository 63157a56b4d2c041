"""Kill `wink eval run` midway, resume it, and check that nothing recorded ran twice.

The agent appends one line per call to a log file, so the test knows exactly which
samples were executed, by which process, and when relative to the kill.
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

from weakincentives.evals import RunStore

pytestmark = pytest.mark.slow

WINK = Path(sys.executable).with_name("wink")
N = 2000
POLL = 0.005
DEADLINE = 60.0

COUNTING_AGENT = """
import os
import time

LOG = os.environ["CALL_LOG"]


def task(text: str) -> str:
    # One small O_APPEND write per call: lines from concurrent threads never interleave.
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(text + "\\n")
    time.sleep(0.004)
    return text.upper()
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "counting.py").write_text(COUNTING_AGENT)
    with (tmp_path / "data.jsonl").open("w") as out:
        for i in range(N):
            out.write(
                json.dumps({"id": f"s{i:04d}", "input": f"s{i:04d}", "expected": f"S{i:04d}"})
            )
            out.write("\n")
    return tmp_path


def wink_eval(work: Path, *extra: str) -> list[str]:
    return [
        str(WINK), "eval", "run", "counting.py:task", "--dataset", "data.jsonl",
        "--evaluator", "exact_match", "--concurrency", "8", *extra,
    ]  # fmt: skip


def start(work: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CALL_LOG": str(work / "calls.log")}
    return subprocess.Popen(
        wink_eval(work, *extra), cwd=work, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def wait_for_results(process: subprocess.Popen[str], results: Path, at_least: int) -> None:
    """Poll until `results` has `at_least` lines, failing if the run ends first."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        assert process.poll() is None, (
            f"the run ended before it could be stopped: {process.communicate()}"
        )
        if results.is_file() and results.read_bytes().count(b"\n") >= at_least:
            return
        time.sleep(POLL)
    pytest.fail(f"no {at_least} results within {DEADLINE} s")


def recorded_ids(results: Path) -> set[str]:
    """Sample ids of the complete lines (a kill can cut the last one short)."""
    ids = set()
    for line in results.read_bytes().splitlines(keepends=True):
        if line.endswith(b"\n"):
            ids.add(json.loads(line)["sample_id"])
    return ids


def calls(work: Path) -> list[str]:
    return (work / "calls.log").read_text().splitlines()


def resume(work: Path, run_id: str) -> dict[str, object]:
    env = {**os.environ, "CALL_LOG": str(work / "calls.log")}
    done = subprocess.run(
        [*wink_eval(work, "--resume", run_id), "--json"], cwd=work, env=env, text=True,
        capture_output=True, timeout=DEADLINE, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data: dict[str, object] = json.loads(done.stdout)
    return data


def test_sigkill_then_resume_records_every_sample_once_and_reruns_nothing_recorded(
    work: Path,
) -> None:
    results = work / "runs" / "killed" / "results.jsonl"
    process = start(work, "--run-id", "killed")
    wait_for_results(process, results, at_least=200)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=DEADLINE)

    before = recorded_ids(results)
    calls_before = len(calls(work))
    assert 200 <= len(before) < N
    store = RunStore(work / "runs")
    assert store.open("killed").status == "interrupted"

    data = resume(work, "killed")

    assert data["total"] == N
    assert data["complete"] is True
    latest = store.open("killed").latest_results()
    assert len(latest) == N
    assert {r.sample_id for r in latest} == {f"s{i:04d}" for i in range(N)}
    assert all(r.passed for r in latest)
    rerun = calls(work)[calls_before:]
    assert not before & set(rerun), "a sample recorded before the kill was executed again"
    assert len(rerun) == len(set(rerun)), "the resumed run executed a sample twice"
    assert set(calls(work)) == {f"s{i:04d}" for i in range(N)}
    assert store.open("killed").status == "complete"


def test_sigint_exits_130_marks_the_run_interrupted_and_says_how_to_resume(work: Path) -> None:
    results = work / "runs" / "stopped" / "results.jsonl"
    process = start(work, "--run-id", "stopped")
    wait_for_results(process, results, at_least=100)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=DEADLINE)

    assert process.returncode == 130, stderr
    assert "--resume stopped" in stderr
    store = RunStore(work / "runs")
    assert store.open("stopped").status == "interrupted"
    before = recorded_ids(results)
    assert len(before) < N

    data = resume(work, "stopped")
    assert data["total"] == N
    assert len(store.open("stopped").latest_results()) == N
