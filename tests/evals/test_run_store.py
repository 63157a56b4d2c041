from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from weakincentives.clock import FakeClock
from weakincentives.errors import ConfigurationError, FingerprintMismatchError, RunStoreError
from weakincentives.evals import EvalReport
from weakincentives.evals._records import ErrorKind, EvalResult, Score
from weakincentives.evals.store._files import iter_results, latest_results
from weakincentives.evals.store._fingerprint import Fingerprint
from weakincentives.evals.store._run_store import RunStore
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.runtime.session import TokenUsage

START = datetime(2026, 11, 20, 23, 35, 1, tzinfo=UTC)


def make_result(
    sample_id: str = "s1",
    experiment: str = "baseline",
    epoch: int = 0,
    *,
    passed: bool = True,
    error_kind: ErrorKind | None = None,
    **fields: Any,
) -> EvalResult:
    error = None if error_kind is None else f"{error_kind} failed"
    return EvalResult(
        sample_id=sample_id,
        experiment_name=experiment,
        epoch=epoch,
        score=Score(value=1.0 if passed and error is None else 0.0, passed=passed),
        latency_ms=2,
        error=error,
        error_kind=error_kind,
        **fields,
    )


def make_fingerprint(**changes: Any) -> Fingerprint:
    fields: dict[str, Any] = {
        "dataset_sha256": "a" * 64,
        "experiments": [BASELINE],
        "evaluators": ["evals.exact_match"],
        "target": "agent.run",
        "git_commit": "1" * 40,
        "package_version": "1.0",
    }
    fields.update(changes)
    return Fingerprint.build(**fields)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> RunStore:
    return RunStore(tmp_path / "runs", clock=clock)


def test_appended_results_read_back_equal_and_stamped_with_the_run_id(store: RunStore) -> None:
    written = [
        make_result("s1", usage=TokenUsage(input_tokens=3, output_tokens=4)),
        make_result("s2", passed=False, metadata={"topic": "math"}, output={"answer": [1, 2]}),
        make_result("s3", error_kind="agent", bundle_path=Path("bundles/s3.zip")),
    ]
    with store.create(make_fingerprint(), expected_results=3) as run:
        run.append(written[0])
        run.extend(written[1:])
    read = list(iter_results(run.path))
    assert [r.sample_id for r in read] == ["s1", "s2", "s3"]
    assert all(r.run_id == run.run_id for r in read)
    assert read[0].usage == TokenUsage(input_tokens=3, output_tokens=4)
    assert read[1].metadata == {"topic": "math"}
    assert read[1].output == {"answer": [1, 2]}
    assert read[2].bundle_path == Path("bundles/s3.zip")
    assert read[2].error_kind == "agent"
    lines = run.results_path.read_bytes().splitlines()
    assert len(lines) == 3
    assert all(json.loads(line)["run_id"] == run.run_id for line in lines)


def test_manifest_records_status_counts_and_fingerprint(store: RunStore) -> None:
    fingerprint = make_fingerprint(epochs=2)
    run = store.create(fingerprint, config={"max_concurrent": 4}, expected_results=4)
    assert json.loads((run.path / "run.json").read_text())["status"] == "running"
    run.extend([make_result("s1"), make_result("s2", passed=False)])
    run.append(make_result("s3", error_kind="timeout"))
    run.finish()
    raw = json.loads((run.path / "run.json").read_text())
    assert raw["format_version"] == 1
    assert raw["status"] == "complete"
    assert raw["run_id"] == run.run_id == run.path.name
    assert raw["counts"] == {"expected": 4, "results": 3, "passed": 1, "errors": 1}
    assert raw["config"] == {"max_concurrent": 4}
    assert raw["fingerprint"]["git_commit"] == "1" * 40
    reopened = store.open(run.run_id)
    assert reopened.fingerprint == fingerprint
    assert reopened.status == "complete"
    assert reopened.counts.failed == 1
    assert not list(run.path.glob(".run.json.*.tmp"))  # the atomic write left no temp file


@pytest.mark.parametrize(("raises", "status"), [(False, "complete"), (True, "interrupted")])
def test_context_manager_records_how_the_run_ended(
    store: RunStore, raises: bool, status: str
) -> None:
    interrupted = False
    try:
        with store.create(make_fingerprint(), run_id="r1") as run:
            run.append(make_result())
            if raises:
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        interrupted = True
    assert interrupted == raises
    assert store.open("r1").status == status
    assert not run.writable
    with pytest.raises(RunStoreError, match="not open for writing"):
        run.append(make_result("s2"))


@pytest.mark.parametrize("tail", [b'{"sample_id":"s4","experim', b"{", b"\x00\x00\x00"])
def test_a_truncated_last_line_is_skipped_and_resume_drops_it(store: RunStore, tail: bytes) -> None:
    fingerprint = make_fingerprint()
    with store.create(fingerprint, run_id="r1") as run:
        run.extend([make_result(f"s{i}") for i in range(1, 4)])
    with run.results_path.open("ab") as f:
        f.write(tail)  # the process died in the middle of this write
    assert [r.sample_id for r in iter_results(run.path)] == ["s1", "s2", "s3"]
    with store.resume("r1", fingerprint) as resumed:
        assert resumed.completed_keys() == {(f"s{i}", "baseline", 0) for i in range(1, 4)}
        resumed.append(make_result("s4"))
    assert [r.sample_id for r in iter_results(run.path)] == ["s1", "s2", "s3", "s4"]
    assert run.results_path.read_bytes().count(b"\n") == 4


def test_an_unterminated_but_complete_last_line_is_kept_and_terminated_on_resume(
    store: RunStore,
) -> None:
    fingerprint = make_fingerprint()
    with store.create(fingerprint, run_id="r1") as run:
        run.append(make_result("s1"))
    data = run.results_path.read_bytes()
    run.results_path.write_bytes(data.rstrip(b"\n"))  # cut exactly before the newline
    assert [r.sample_id for r in iter_results(run.path)] == ["s1"]
    with store.resume("r1", fingerprint) as resumed:
        resumed.append(make_result("s2"))
    assert [r.sample_id for r in iter_results(run.path)] == ["s1", "s2"]


@pytest.mark.parametrize("bad", [b"not json", b'{"sample_id": "s2"}', b'{"sample_id":"s2",'])
def test_a_corrupt_middle_line_is_reported_with_file_and_line(store: RunStore, bad: bytes) -> None:
    with store.create(make_fingerprint(), run_id="r1") as run:
        run.append(make_result("s1"))
    good = run.results_path.read_bytes()
    with run.results_path.open("ab") as f:
        f.write(bad + b"\n" + good)
    with pytest.raises(RunStoreError, match=re.escape(f"{run.results_path}:2: corrupt")):
        list(iter_results(run.path))
    with pytest.raises(RunStoreError, match=re.escape(f"{run.results_path}:2")):
        store.resume("r1", make_fingerprint())
    assert [r.sample_id for r in iter_results(run.path, strict=False)] == ["s1", "s1"]
    assert store.open("r1").status == "complete"  # the failed resume released the run


def test_completed_keys_with_and_without_errors(store: RunStore) -> None:
    with store.create(make_fingerprint(), run_id="r1") as run:
        run.extend(
            [
                make_result("ok"),
                make_result("failed", passed=False),
                make_result("errored", error_kind="agent"),
                make_result("cancelled", error_kind="cancelled"),
                make_result("ok", epoch=1),
            ]
        )
        live_all = run.completed_keys()
        live_ok = run.completed_keys(include_errors=False)
    reader = store.open("r1")
    for keys_all, keys_ok in [(live_all, live_ok), (reader.completed_keys(), None)]:
        assert keys_all == {
            ("ok", "baseline", 0),
            ("failed", "baseline", 0),
            ("errored", "baseline", 0),
            ("ok", "baseline", 1),
        }  # a cancelled sample never counts as done
        if keys_ok is not None:
            assert keys_ok == keys_all - {("errored", "baseline", 0)}
    assert reader.completed_keys(include_errors=False) == live_ok


def test_a_retried_error_supersedes_the_errored_line(store: RunStore) -> None:
    fingerprint = make_fingerprint()
    with store.create(fingerprint, run_id="r1", expected_results=2) as run:
        run.extend([make_result("a"), make_result("b", error_kind="timeout")])
    resumed = store.resume("r1", fingerprint)
    to_retry = {("a", "baseline", 0), ("b", "baseline", 0)} - resumed.completed_keys(
        include_errors=False
    )
    assert to_retry == {("b", "baseline", 0)}
    resumed.append(make_result("b"))
    assert resumed.counts.errors == 0
    resumed.finish()
    assert run.results_path.read_bytes().count(b"\n") == 3  # history is kept...
    latest = latest_results(run.path)  # ...and the last line per key wins
    assert [(r.sample_id, r.is_error) for r in latest] == [("a", False), ("b", False)]
    assert store.open("r1").counts == store.open("r1").manifest.counts
    assert store.open("r1").manifest.counts.passed == 2


def test_resume_with_a_changed_dataset_raises_a_readable_diff(store: RunStore) -> None:
    with store.create(make_fingerprint(), run_id="r1") as run:
        run.append(make_result())
    changed = make_fingerprint(
        dataset_sha256="b" * 64, experiments=[BASELINE, Experiment(name="concise")]
    )
    with pytest.raises(FingerprintMismatchError) as info:
        store.resume("r1", changed)
    message = str(info.value)
    assert "cannot resume run r1" in message
    assert "  - dataset sha256: aaaaaaaaaaaa… -> bbbbbbbbbbbb…" in message
    assert "  - experiments: added 'concise'" in message
    assert "start a new run" in message
    assert store.open("r1").status == "complete"  # untouched, and not left locked
    store.resume("r1", make_fingerprint()).close()


def test_resume_may_ignore_named_fingerprint_fields(store: RunStore) -> None:
    store.create(make_fingerprint(), run_id="r1").finish()
    other_commit = make_fingerprint(git_commit="2" * 40)
    with pytest.raises(FingerprintMismatchError, match="git commit"):
        store.resume("r1", other_commit)
    with store.resume("r1", other_commit, ignore={"git_commit"}) as run:
        assert run.status == "running"


def test_one_writer_at_a_time(store: RunStore) -> None:
    run = store.create(make_fingerprint(), run_id="r1")
    with pytest.raises(
        RunStoreError, match=rf"being written by another writer \(pid {os.getpid()}"
    ):
        store.resume("r1", make_fingerprint())
    reader = store.open("r1")
    seen = [reader.status]
    run.finish()
    seen.append(reader.status)
    assert seen == ["running", "complete"]  # a read-only handle sees the writer finish
    store.resume("r1", make_fingerprint()).finish()


@pytest.mark.parametrize("sync_interval", [None, 0.0])
def test_concurrent_writers_produce_exactly_n_well_formed_lines(
    tmp_path: Path, sync_interval: float | None
) -> None:
    store = RunStore(tmp_path, sync_interval=sync_interval)
    threads, per_thread = 8, 25
    barrier = threading.Barrier(threads)
    run = store.create(make_fingerprint())

    def write(t: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            run.append(make_result(f"t{t}-{i}", output="x" * (100 * i)))

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    run.finish()
    lines = run.results_path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert len(lines) - 1 == threads * per_thread
    ids = {json.loads(line)["sample_id"] for line in lines[:-1]}
    assert ids == {f"t{t}-{i}" for t in range(threads) for i in range(per_thread)}
    assert store.open(run.run_id).manifest.counts.results == threads * per_thread


def test_a_failed_write_leaves_no_partial_line(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = store.create(make_fingerprint())
    run.append(make_result("s1"))
    real_write = os.write

    def disk_full(fd: int, data: Any) -> int:
        if b'"s2"' in bytes(data):
            real_write(fd, bytes(data)[:20])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", disk_full)
    with pytest.raises(RunStoreError, match=r"cannot append to .*No space left"):
        run.append(make_result("s2"))
    run.append(make_result("s3"))
    run.finish()
    assert [r.sample_id for r in iter_results(run.path)] == ["s1", "s3"]
    assert run.completed_keys() == {("s1", "baseline", 0), ("s3", "baseline", 0)}


def test_a_failed_write_takes_back_what_it_counted(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = store.create(make_fingerprint(), expected_results=2)
    run.append(make_result("s1"))
    before = run.counts
    real_write = os.write

    def disk_full(fd: int, data: Any) -> int:
        if b'"s2"' in bytes(data):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", disk_full)
    batch = [
        make_result("s1", error_kind="agent"),
        make_result("s2"),
        make_result("s2", passed=False),
    ]
    with pytest.raises(RunStoreError, match="No space left"):
        run.extend(batch)  # a line superseding s1, and s2 twice: all taken back
    assert run.counts == before
    assert run.completed_keys(include_errors=False) == {("s1", "baseline", 0)}
    run.finish()
    assert store.open(run.run_id).counts == before


def test_a_short_write_drops_its_cut_line_and_appends_go_on(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = store.create(make_fingerprint())
    run.append(make_result("s1"))
    real_write = os.write

    def full_mid_line(fd: int, data: Any) -> int:
        if b'"s2"' in bytes(data):
            return real_write(fd, bytes(data)[:25])  # the disk filled up after 25 bytes
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_mid_line)
    with pytest.raises(RunStoreError, match=r"only 25 of \d+ bytes were written"):
        run.append(make_result("s2"))
    assert run.results_path.read_bytes().endswith(b"\n")
    run.append(make_result("s3"))
    run.finish()
    assert [r.sample_id for r in iter_results(run.path)] == ["s1", "s3"]
    assert run.counts.results == 2


def test_a_sigkilled_writer_leaves_a_readable_resumable_run(tmp_path: Path) -> None:
    script = """
import sys
from weakincentives.evals import EvalReport
from weakincentives.evals.store._fingerprint import Fingerprint
from weakincentives.evals.store._run_store import RunStore
from weakincentives.evals._records import EvalResult, Score

run = RunStore(sys.argv[1]).create(Fingerprint(dataset_sha256="0" * 64), run_id="killed")
i = 0
while True:
    run.append(EvalResult(sample_id=f"s{i}", experiment_name="baseline",
                          score=Score(1.0, True), latency_ms=1.0, output="x" * 5000))
    i += 1
    if i == 200:
        print("ready", flush=True)
"""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    proc.stdout.close()

    results = list(iter_results(tmp_path / "killed"))
    assert len(results) >= 200  # everything appended before the kill reached the OS
    assert [r.sample_id for r in results] == [f"s{i}" for i in range(len(results))]
    store = RunStore(tmp_path)
    killed = store.open("killed")
    assert killed.manifest.status == "running"
    assert killed.status == "interrupted"  # the kernel released the dead writer's lock
    with store.resume("killed", Fingerprint(dataset_sha256="0" * 64)) as run:
        assert len(run.completed_keys()) == len(results)
        run.append(make_result("after"))
    assert list(iter_results(run.path))[-1].sample_id == "after"


def test_run_ids_are_sortable_readable_and_unique(store: RunStore, clock: FakeClock) -> None:
    first = [store.create(make_fingerprint()) for _ in range(20)]
    for run in first:
        run.finish()
    ids = [r.run_id for r in first]
    assert len(set(ids)) == 20
    assert all(re.fullmatch(r"20261120-233501-[0-9a-f]{6}", i) for i in ids)
    clock.advance(1)
    later = store.create(make_fingerprint())
    assert later.run_id > max(ids)
    later.finish()
    assert [r.run_id for r in store.list_runs()] == sorted([*ids, later.run_id])


def test_explicit_run_ids_are_checked(store: RunStore) -> None:
    store.create(make_fingerprint(), run_id="nightly-1").finish()
    with pytest.raises(RunStoreError, match="already exists"):
        store.create(make_fingerprint(), run_id="nightly-1")
    with pytest.raises(ConfigurationError, match="run id"):
        store.create(make_fingerprint(), run_id="../escape")


def test_locate_finds_a_run_without_reading_its_manifest(store: RunStore) -> None:
    store.create(make_fingerprint(), run_id="r1").finish()
    (store.root / "r1" / "run.json").write_text('{"format_version": 1}')  # not a valid manifest
    assert store.locate("r1") == store.root / "r1"
    assert store.locate(store.root / "r1") == store.root / "r1"
    with pytest.raises(RunStoreError, match="r1"):
        store.open("r1")  # open reads and validates it
    with pytest.raises(RunStoreError, match=r"no run 'r2' .*latest runs: r1"):
        store.locate("r2")


def test_open_by_id_or_path_and_helpful_errors(store: RunStore, tmp_path: Path) -> None:
    store.create(make_fingerprint(), run_id="r1").finish()
    assert store.open(store.root / "r1").run_id == "r1"
    with pytest.raises(RunStoreError, match=r"no run 'r2' .*latest runs: r1"):
        store.open("r2")
    read_only = store.open("r1")
    with pytest.raises(RunStoreError, match=r"RunStore\.resume"):
        read_only.append(make_result())
    with pytest.raises(RunStoreError, match="not open for writing"):
        read_only.finish()
    (store.root / "junk").mkdir()
    assert [r.run_id for r in store.list_runs()] == ["r1"]
    assert RunStore(tmp_path / "nowhere").list_runs() == []


def test_a_result_of_another_run_is_refused(store: RunStore) -> None:
    run = store.create(make_fingerprint(), run_id="r1")
    with pytest.raises(RunStoreError, match="belongs to run 'r0'"):
        run.append(make_result(run_id="r0"))
    run.append(make_result(run_id="r1"))
    run.finish()
    assert store.open("r1").counts.results == 1


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('{"format_version": 99}', "upgrade weakincentives"),
        ("{not json", "cannot read"),
        ('{"format_version": 1, "run_id": "r1"}', "fingerprint"),
    ],
)
def test_unreadable_manifests_are_reported(store: RunStore, content: str, match: str) -> None:
    store.create(make_fingerprint(), run_id="r1").finish()
    (store.root / "r1" / "run.json").write_text(content)
    with pytest.raises(RunStoreError, match=match):
        store.open("r1")


def test_reading_a_missing_results_file_says_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(RunStoreError, match="is this a run directory"):
        list(iter_results(tmp_path))


def test_eval_report_loads_a_run_directory(store: RunStore) -> None:
    fingerprint = make_fingerprint()
    with store.create(fingerprint, run_id="r1", expected_results=3) as run:
        run.extend([make_result("a"), make_result("b", error_kind="agent")])
    with store.resume("r1", fingerprint) as resumed:
        resumed.append(make_result("b"))  # the retry supersedes the error
    with run.results_path.open("ab") as f:
        f.write(b'{"sample_id": "c", "exp')  # and a crash cut the next line short
    report = EvalReport.load(run.path)
    assert report.run_id == "r1"
    assert report.total == 2
    assert report.pass_rate == 1.0
    assert report.expected_count == 3
    assert not report.complete
