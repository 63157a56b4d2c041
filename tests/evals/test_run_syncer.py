"""The run store's fsync policy: a background syncer per handle, never the appender."""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from weakincentives.clock import FakeClock
from weakincentives.errors import RunStoreError
from weakincentives.evals._records import EvalResult, Score
from weakincentives.evals.store._files import MANIFEST_FILE, iter_results
from weakincentives.evals.store._fingerprint import Fingerprint
from weakincentives.evals.store._handle import RunHandle
from weakincentives.evals.store._run_store import RunStore

WAIT = 5.0  # seconds a test waits for the syncer before it fails
FINGERPRINT = Fingerprint(dataset_sha256="0" * 64)


def result(sample_id: str, *, passed: bool = True) -> EvalResult:
    return EvalResult(
        sample_id=sample_id,
        experiment_name="baseline",
        score=Score(value=float(passed), passed=passed),
        latency_ms=1,
    )


def syncers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("wink-run-sync")]


class FsyncLog:
    """Stands in for `os.fsync`: records what was synced, by which thread, at what size."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str, int]] = []  # inode, thread name, file size
        self.changed = threading.Condition()
        self.gate: threading.Event | None = None  # when set up, fsync blocks until it is set
        self.entered = threading.Event()
        self.error: OSError | None = None
        self.failing: int | None = None  # with `error`: only this inode fails

    def __call__(self, fd: int) -> None:
        stat = os.fstat(fd)
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(WAIT)
        if self.error is not None and self.failing in (None, stat.st_ino):
            raise self.error
        with self.changed:
            self.calls.append((stat.st_ino, threading.current_thread().name, stat.st_size))
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[], bool]) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, WAIT)

    def inodes(self) -> list[int]:
        with self.changed:
            return [inode for inode, _, _ in self.calls]


@pytest.fixture
def fsync(monkeypatch: pytest.MonkeyPatch) -> Iterator[FsyncLog]:
    log = FsyncLog()
    monkeypatch.setattr(os, "fsync", log)
    yield log
    if log.gate is not None:
        log.gate.set()  # never leave a syncer stuck in a fake fsync


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_the_syncer_fsyncs_at_most_once_per_interval_of_the_clock(
    tmp_path: Path, clock: FakeClock, fsync: FsyncLog
) -> None:
    run = RunStore(tmp_path, clock=clock).create(FINGERPRINT)
    results, manifest, directory = (
        p.stat().st_ino for p in (run.results_path, run.path / MANIFEST_FILE, run.path)
    )
    run.extend([result("s1"), result("s2")])
    run.append(result("s3"))
    assert fsync.calls == []  # creating a run and appending force nothing to disk yet
    clock.advance(0.05)
    run.append(result("s4"))
    # The first sync makes the results, the manifest and their directory entries durable,
    # on the syncer's thread.
    assert fsync.wait_for(lambda: len(fsync.calls) >= 3)
    assert fsync.inodes() == [results, manifest, directory]
    assert {name for _, name, _ in fsync.calls} == {f"wink-run-sync-{run.run_id}"}
    run.append(result("s5"))
    # The clock has not moved since: the syncer leaves s5 (and maybe s4) to this sync().
    run.sync()
    run.sync()  # nothing new to sync
    assert fsync.calls[3:] == [(results, "MainThread", run.results_path.stat().st_size)]
    run.finish()


def test_an_append_never_waits_for_an_fsync(
    tmp_path: Path, clock: FakeClock, fsync: FsyncLog
) -> None:
    fsync.gate = threading.Event()
    run = RunStore(tmp_path, clock=clock).create(FINGERPRINT)
    clock.advance(1.0)
    run.append(result("s0"))
    assert fsync.entered.wait(WAIT)  # the syncer is now stuck in fsync
    appended = threading.Event()

    def append_more() -> None:
        for i in range(1, 50):
            run.append(result(f"s{i}"))
        appended.set()

    threading.Thread(target=append_more).start()
    assert appended.wait(WAIT), "appends waited for the blocked fsync"
    assert fsync.calls == []
    fsync.gate.set()
    run.finish()
    assert len(list(iter_results(run.path))) == 50


@pytest.mark.parametrize("sync_interval", [0.05, 0.0, None])
def test_finish_leaves_nothing_unsynced_and_no_thread(
    tmp_path: Path, clock: FakeClock, fsync: FsyncLog, sync_interval: float | None
) -> None:
    before = syncers()
    run = RunStore(tmp_path, clock=clock, sync_interval=sync_interval).create(FINGERPRINT)
    results = run.results_path

    def synced_size() -> int:
        return [size for inode, _, size in fsync.calls if inode == results.stat().st_ino][-1]

    for i in range(20):
        run.append(result(f"s{i}"))
        clock.advance(0.01)
        if sync_interval == 0:  # fsynced before append returned
            assert synced_size() == results.stat().st_size
    assert len(syncers()) == len(before) + (1 if sync_interval else 0)
    run.finish()
    assert syncers() == before
    assert synced_size() == results.stat().st_size  # the last results fsync saw every line
    assert RunStore(tmp_path).open(run.run_id).counts.results == 20


def test_the_last_expected_result_is_synced_at_once_and_finish_does_not_sync_it_again(
    tmp_path: Path, clock: FakeClock, fsync: FsyncLog
) -> None:
    run = RunStore(tmp_path, clock=clock, sync_interval=3600.0).create(
        FINGERPRINT, expected_results=3
    )
    results = run.results_path.stat().st_ino
    run.extend([result("s1"), result("s2")])
    run.append(result("s1"))  # a duplicate key: still two of three
    assert fsync.calls == []  # the interval is an hour of a clock that never moves

    run.append(result("s3"))  # the clock never moves: only the hurry syncs it

    assert fsync.wait_for(lambda: results in fsync.inodes())
    size = run.results_path.stat().st_size
    assert [s for inode, _, s in fsync.calls if inode == results] == [size]
    run.finish()
    assert [s for inode, _, s in fsync.calls if inode == results] == [size], "synced once"


def test_finish_syncs_what_landed_after_the_hurried_sync(
    tmp_path: Path, clock: FakeClock, fsync: FsyncLog
) -> None:
    run = RunStore(tmp_path, clock=clock, sync_interval=3600.0).create(
        FINGERPRINT, expected_results=1
    )
    results = run.results_path.stat().st_ino
    run.append(result("s1"))
    assert fsync.wait_for(lambda: results in fsync.inodes())
    run.append(result("s1", passed=False))  # a retry's line, after the hurried sync

    run.finish()

    sizes = [s for inode, _, s in fsync.calls if inode == results]
    assert sizes[-1] == run.results_path.stat().st_size > sizes[0]


@pytest.mark.parametrize(
    "end",
    [lambda run: run.finish(), lambda run: run.close(), lambda run: run.__exit__(None, None, None)],
    ids=["finish", "close", "exit"],
)
def test_every_way_of_ending_a_run_stops_its_syncer(
    tmp_path: Path, end: Callable[[RunHandle], None]
) -> None:
    before = syncers()
    run = RunStore(tmp_path).create(FINGERPRINT)
    assert syncers() == before  # started by the first append, not by create
    run.append(result("s1"))
    assert len(syncers()) == len(before) + 1
    end(run)
    assert syncers() == before


@pytest.mark.parametrize("reported_by", ["finish", "sync"])
def test_a_failed_background_fsync_is_logged_and_reported_once(
    tmp_path: Path,
    clock: FakeClock,
    fsync: FsyncLog,
    caplog: pytest.LogCaptureFixture,
    reported_by: str,
) -> None:
    fsync.error = OSError(errno.EIO, "Input/output error")
    run = RunStore(tmp_path, clock=clock).create(FINGERPRINT, run_id="r1")
    clock.advance(1.0)
    with caplog.at_level(logging.ERROR, logger="weakincentives.evals"):
        run.append(result("s1"))
        assert fsync.entered.wait(WAIT)
        for _ in range(100):  # the failure is logged right after the fake fsync raises
            if "cannot fsync the results of run r1" in caplog.text:
                break
            threading.Event().wait(0.01)
    assert "Input/output error" in caplog.text
    run.append(result("s2"))  # appends go on
    fsync.error = None
    with pytest.raises(RunStoreError, match=r"background fsync .* failed .*Input/output"):
        getattr(run, reported_by)()
    run.sync()  # reported once
    if reported_by == "sync":
        run.finish()
    store = RunStore(tmp_path)
    assert store.open("r1").status == "complete"  # finish did its work before raising
    assert [r.sample_id for r in iter_results(run.path)] == ["s1", "s2"]


def test_an_explicit_sync_that_fails_raises_a_run_store_error(
    tmp_path: Path, fsync: FsyncLog
) -> None:
    run = RunStore(tmp_path, sync_interval=None).create(FINGERPRINT)
    run.append(result("s1"))
    fsync.error = OSError(errno.EIO, "Input/output error")
    with pytest.raises(RunStoreError, match=r"cannot fsync .*Input/output error"):
        run.sync()
    fsync.error = None
    run.sync()  # still dirty: this one syncs
    assert fsync.calls
    run.finish()


@pytest.mark.parametrize("sync_interval", [0.05, None])
def test_finish_never_announces_results_that_are_not_on_disk(
    tmp_path: Path, clock: FakeClock, fsync: FsyncLog, sync_interval: float | None
) -> None:
    run = RunStore(tmp_path, clock=clock, sync_interval=sync_interval).create(
        FINGERPRINT, run_id="r1"
    )
    run.append(result("s1"))
    fsync.error = OSError(errno.EIO, "Input/output error")
    fsync.failing = run.results_path.stat().st_ino

    with pytest.raises(RunStoreError, match=r"cannot fsync .*results.* unfinished"):
        run.finish()

    # The final manifest was written and synced, but never renamed into place.
    assert RunStore(tmp_path).open("r1").status == "interrupted"
    assert sorted(p.name for p in run.path.iterdir() if p.name.endswith(".tmp")) == []
    fsync.error = None
    resumed = RunStore(tmp_path).resume("r1", FINGERPRINT)  # the writer's lock was released
    resumed.finish()
    assert RunStore(tmp_path).open("r1").status == "complete"


def test_finish_that_fails_before_its_manifest_still_syncs_and_lets_go(
    tmp_path: Path, clock: FakeClock, fsync: FsyncLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = syncers()
    run = RunStore(tmp_path, clock=clock).create(FINGERPRINT, run_id="r1")
    run.append(result("s1"))

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("manifest serializer broke")

    monkeypatch.setattr("weakincentives.evals.store._handle.write_manifest", broken)
    with pytest.raises(RuntimeError, match="serializer broke"):
        run.finish()

    assert syncers() == before  # the syncer thread was stopped
    results = run.results_path.stat()
    assert (results.st_ino, results.st_size) in {(i, size) for i, _, size in fsync.calls}
    monkeypatch.undo()
    RunStore(tmp_path).resume("r1", FINGERPRINT).finish()  # the writer's lock was released
    assert RunStore(tmp_path).open("r1").status == "complete"


def test_finish_waits_for_appends_in_flight_from_other_threads(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create(FINGERPRINT)
    started = threading.Barrier(5)
    accepted: list[int] = []

    def append_until_finished(t: int) -> None:
        started.wait()
        i = 0
        while True:
            try:
                run.append(result(f"t{t}-{i}"))
            except RunStoreError:
                return
            accepted.append(1)
            i += 1

    threads = [threading.Thread(target=append_until_finished, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    started.wait()
    while len(accepted) < 200:
        threading.Event().wait(0.001)
    run.finish()
    for thread in threads:
        thread.join(WAIT)
    lines = run.results_path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert len(lines) - 1 >= len(accepted)  # every accepted append landed, whole
    assert len(list(iter_results(run.path))) == len(lines) - 1
    assert RunStore(tmp_path).open(run.run_id).counts.results == len(lines) - 1
