"""The git commit and dirty flag a run records, as `git` reports them (issue 20, point 2).

The dirty flag is asked of `git status` in the background while the run starts: the
manifest must still record it as git answers it, during the run (so a crashed run keeps
it) and at the end, and a run that stops before git answered records None.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from weakincentives.evals import Sample, exact_match, run_eval
from weakincentives.evals.store import RunHandle, _fingerprint, _provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

_AUTHOR = [
    "-c", "user.name=t", "-c", "user.email=t@e", "-c", "init.defaultBranch=main",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_git_answers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    _fingerprint._git_commit.cache_clear()
    monkeypatch.setattr(_provenance, "_dirty", None)  # each test asks git anew
    yield
    _fingerprint._git_commit.cache_clear()


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *_AUTHOR, *args], cwd=cwd, check=True, capture_output=True, text=True
    )
    return proc.stdout.strip()


def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Callable[..., Any]]:
    """A checkout holding the task's module (its code directory), the current directory."""
    path = tmp_path / "project"
    path.mkdir()
    (path / "task.py").write_text("def answer(question):\n    return 'a' + question[1:]\n")
    (path / "notes.txt").write_text("first\n")
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "x")
    spec = importlib.util.spec_from_file_location("wink_git_task", path / "task.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(path)
    return path, module.answer


def samples(n: int = 2) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"a{i}") for i in range(n)]


def manifest(runs: Path, run_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((runs / run_id / "run.json").read_text())
    return data


@pytest.mark.parametrize("dirty", [False, True])
def test_the_run_records_commit_and_dirty_flag_as_git_reports_them(
    dirty: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, answer = checkout(tmp_path, monkeypatch)
    if dirty:
        (path / "notes.txt").write_text("changed\n")
    (path / "untracked.txt").write_text("not counted\n")
    report = run_eval(samples(), answer, exact_match, store=tmp_path / "runs", run_id="r")
    assert report.pass_rate == 1.0
    provenance = manifest(tmp_path / "runs", "r")["provenance"]
    assert provenance["git_commit"] == git(path, "rev-parse", "HEAD")
    status = git(path, "status", "--porcelain", "--untracked-files=no")
    assert provenance["git_dirty"] is bool(status) is dirty
    fingerprint = manifest(tmp_path / "runs", "r")["fingerprint"]
    assert fingerprint["git_commit"] == provenance["git_commit"]


def slow_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[], None]:
    """`git status` held until the returned function is called (a file it waits for)."""
    release = tmp_path / "release-git"
    script = f"while [ ! -e '{release}' ]; do sleep 0.01; done; exec git \"$@\""
    monkeypatch.setattr(
        _provenance, "_STATUS", ("sh", "-c", script, "sh", *_provenance._STATUS[1:])
    )
    return release.touch


def test_the_flag_reaches_run_json_during_the_run_so_a_crash_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, answer = checkout(tmp_path, monkeypatch)
    (path / "notes.txt").write_text("changed\n")
    release = slow_git(monkeypatch, tmp_path)
    runs = tmp_path / "runs"
    seen: list[Any] = []

    def task(question: str) -> str:
        if question == "q0":  # the run is under way: git has not answered yet
            seen.append(manifest(runs, "r")["provenance"]["git_dirty"])
            release()
            for _ in range(1000):  # until the answer is in run.json, as a crash finds it
                value = manifest(runs, "r")["provenance"]["git_dirty"]
                if value is not None:
                    seen.append(value)
                    break
                threading.Event().wait(0.01)
        return str(answer(question))

    task.__module__ = answer.__module__  # the checkout's code
    task.__code__ = task.__code__.replace(co_filename=str(path / "task.py"))
    run_eval(samples(), task, exact_match, store=runs, run_id="r", max_concurrent=1)
    assert seen == [None, True]  # unknown until git answered, then what git says
    assert manifest(runs, "r")["provenance"]["git_dirty"] is True
    assert manifest(runs, "r")["status"] == "complete"


def test_finish_waits_for_git_and_records_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, answer = checkout(tmp_path, monkeypatch)
    release = slow_git(monkeypatch, tmp_path)
    rewrites: list[object] = []
    real = RunHandle.record_provenance

    def spy(self: RunHandle, changes: Mapping[str, Any]) -> bool:
        rewrites.append(changes)
        return real(self, changes)

    monkeypatch.setattr(RunHandle, "record_provenance", spy)
    timer = threading.Timer(0.2, release)  # answers after the one sample is done
    timer.start()
    run_eval(samples(1), answer, exact_match, store=tmp_path / "runs", run_id="r")
    timer.join()
    assert rewrites == []  # finish was already waiting: run.json is written once, by it
    assert manifest(tmp_path / "runs", "r")["provenance"]["git_dirty"] is False


def test_a_run_that_dies_before_git_answers_records_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a crash leaves: the manifest as created, git still running. A process that
    # dies cannot be finished, so the run here is stopped where the crash would be.
    _, answer = checkout(tmp_path, monkeypatch)
    release = slow_git(monkeypatch, tmp_path)
    runs = tmp_path / "runs"

    def crash(question: str) -> str:
        on_disk = manifest(runs, "r")
        assert on_disk["status"] == "running"
        assert on_disk["provenance"]["git_dirty"] is None
        assert on_disk["provenance"]["git_commit"] is not None
        release()
        return str(answer(question))

    crash.__code__ = crash.__code__.replace(co_filename=answer.__code__.co_filename)
    run_eval(samples(1), crash, exact_match, store=runs, run_id="r")


def test_a_resumed_run_keeps_its_provenance_and_asks_git_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, answer = checkout(tmp_path, monkeypatch)
    data = samples(3)
    runs = tmp_path / "runs"
    run_eval(data, answer, exact_match, store=runs, run_id="r")
    before = manifest(runs, "r")["provenance"]
    (path / "notes.txt").write_text("changed\n")
    monkeypatch.setattr(_provenance, "_dirty", None)
    monkeypatch.setattr(_provenance, "_STATUS", ("false-git-status-must-not-run",))
    report = run_eval(data, answer, exact_match, store=runs, resume="r")
    assert len(report.results) == 3
    assert manifest(runs, "r")["provenance"] == before
    assert _provenance._dirty is None  # git status was not asked


def test_git_status_is_asked_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = checkout(tmp_path, monkeypatch)
    first = _provenance.git_dirty_future()
    assert first.result(10) is False
    (path / "notes.txt").write_text("changed\n")
    assert _provenance.git_dirty_future() is first
    assert _provenance.git_dirty() is False  # the process's answer, as before


def test_no_git_gives_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert _provenance.git_dirty() is None


@pytest.mark.parametrize("dirty", [False, True])
def test_an_async_run_whose_first_result_writes_run_json_records_the_dirty_flag(
    dirty: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An instant `async def` task: its result comes before the runner's own write of
    # run.json (after the first samples started), so that result publishes it; git is
    # asked then, and its answer reaches the final manifest.
    path, answer = checkout(tmp_path, monkeypatch)
    if dirty:
        (path / "notes.txt").write_text("changed\n")

    async def task(question: str) -> str:
        return str(answer(question))

    task.__code__ = task.__code__.replace(co_filename=str(path / "task.py"))
    run_eval(samples(1), task, exact_match, store=tmp_path / "runs", run_id="r")
    provenance = manifest(tmp_path / "runs", "r")["provenance"]
    assert provenance["git_commit"] == git(path, "rev-parse", "HEAD")
    assert provenance["git_dirty"] is dirty
