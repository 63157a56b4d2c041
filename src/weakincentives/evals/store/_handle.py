"""One run directory: its manifest and the handle that appends results to it.

**Durability.** Each result is written to the OS with one unbuffered `write` as soon as it
is appended, so `kill -9` of the process loses nothing already appended: the page cache
belongs to the kernel and survives the process. Only a machine crash (power loss, kernel
panic) can lose what the kernel has not written to disk yet; `fsync` guards against that.
Measured on an ext4 virtual disk, an fsync costs 0.2-30 ms against about 1 µs for the
write (a whole append is a few µs, half of it serialization), so fsync per result would
dominate, and an fsync on the thread that appends stalls it: on the event loop, every
sample in flight. The policy (`sync_interval`, default 50 ms):

- `sync_interval > 0`: appenders never fsync. A background thread per writable handle
  (started by the first append, stopped by `finish`) fsyncs at most once every
  `sync_interval` seconds of the handle's clock while there is something new to sync,
  and at once after the append that brings the last expected result (so that `finish`,
  which follows, usually finds the file synced and skips its own fsync);
- `sync_interval == 0`: each append fsyncs before it returns;
- `sync_interval is None`: only `sync()` and `finish()` fsync.

`sync()` and `finish()` always fsync what the latest fsync did not cover (and block until
done). A machine crash therefore loses only results appended since the last fsync, and
resume re-runs them. The manifest written when the run is created becomes durable with
the first of those syncs (before it there is nothing to lose), which keeps two fsyncs off
the start of every run.

**Failed fsyncs.** A background fsync that fails is logged (the first failure, with its
error) and kept; appends go on (the data is still in the page cache), the next round
tries again, and the next `sync()` or `finish()` raises it as a `RunStoreError` once
`finish` has done its own work: after a failed fsync the kernel may have dropped what it
could not write, so the run's results on disk may be incomplete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from weakincentives import serde
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import RunStoreError

from .._records import EvalResult
from ._files import (
    LOCK_FILE,
    MANIFEST_FILE,
    RESULTS_FILE,
    WriterLock,
    iter_results,
    latest_results,
    lock_is_held,
    repair_tail,
)
from ._fingerprint import Fingerprint
from ._lines import result_dumps
from ._manifest import FORMAT_VERSION, RunManifest, RunStatus, read_manifest, write_manifest
from ._syncer import Syncer
from ._tally import ResultKey, RunCounts, Tally

__all__ = [
    "FORMAT_VERSION",
    "ResultKey",
    "RunCounts",
    "RunHandle",
    "RunManifest",
    "RunStatus",
    "Tally",
    "read_manifest",
    "write_manifest",
]

_log = logging.getLogger(__name__)


class RunHandle:
    """One run directory. Writable from `RunStore.create`/`resume`, read-only from `open`.

    Appends are thread-safe: one lock, one append-mode file descriptor; with a positive
    `sync_interval`, a background (daemon) thread fsyncs from the first append until
    `finish` (see the module's docs). Use it as a context manager to finish the run:
    `complete` on a normal exit, `interrupted` when an exception (KeyboardInterrupt
    included) leaves the block.
    """

    def __init__(
        self,
        path: Path,
        manifest: RunManifest,
        *,
        clock: Clock = SYSTEM_CLOCK,
        sync_interval: float | None = 0.05,
        lock: WriterLock | None = None,
        tally: Tally | None = None,
        manifest_unsynced: bool = False,
        unpublished: Callable[[RunManifest], RunManifest] | None = None,
    ) -> None:
        self._path = path
        self._manifest = manifest
        self._clock = clock
        self._sync_interval = sync_interval
        self._writer_lock = lock
        self._tally = tally or Tally()
        # `append` and `extend` serialize each result before they write it: the first
        # serialization (`_first_dumps`) writes a deferred run.json first, so no result
        # reaches a run without a manifest, and builds the serializer (a millisecond in a
        # fresh process: a read-only handle never needs it).
        self._dumps: Callable[[EvalResult], bytes] = self._first_dumps
        # run.json not written yet (`RunStore.create(defer_manifest=True)`): completes the
        # manifest (its provenance, its fingerprint) when it is written.
        self._unpublished = unpublished
        self._lock = threading.Lock()  # guards the fd, the tally and `_start_syncer`
        # Orders the writes of run.json (`publish`, `record_provenance`, `finish`): one
        # temp file.
        self._manifest_lock = threading.Lock()
        # Appenders write outside the lock (see `_write`); `finish` waits for them here.
        self._no_writers = threading.Condition(self._lock)
        # One entry per append between taking the fd and its write returning. Appended
        # under the lock, popped without it: `list.pop` is atomic, so an append takes the
        # lock once (see `_record` and `_wait_for_writers`).
        self._writing: list[None] = []
        self._draining = 0  # threads waiting for `_writing` to empty (finish, repair)
        self._repairing = False  # a write failed: its cut line is being dropped
        self._syncer = Syncer(
            lambda: self._fd, name=manifest.run_id, clock=clock,
            interval=sync_interval or 0.0,
            pending=path / MANIFEST_FILE if manifest_unsynced else None,
        )  # fmt: skip
        self._start_syncer = bool(sync_interval)  # by the first append
        self._hurried = False  # `Syncer.hurry` is called once, by the last expected result
        self._fd = -1
        if lock is not None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            try:
                self._fd = os.open(self.results_path, flags, 0o644)
            except OSError as exc:
                raise RunStoreError(
                    f"cannot open {self.results_path} for appending: {exc}"
                ) from exc

    # -- reading -------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The run directory."""
        return self._path

    @property
    def results_path(self) -> Path:
        """`results.jsonl` in the run directory."""
        return self._path / RESULTS_FILE

    @property
    def run_id(self) -> str:
        """The run's id (its directory name)."""
        return self._manifest.run_id

    @property
    def manifest(self) -> RunManifest:
        """The manifest as last written (or last read, for a read-only handle).

        A deferred manifest (`RunStore.create(defer_manifest=True)`) is written first.
        """
        if self._unpublished is not None:
            self.publish()
        return self._manifest

    @property
    def fingerprint(self) -> Fingerprint:
        """The run's fingerprint."""
        return self.manifest.fingerprint

    @property
    def writable(self) -> bool:
        """Whether this handle may still append."""
        return self._fd >= 0

    @property
    def status(self) -> RunStatus:
        """`running` while some writer holds the run; a dead writer's run is `interrupted`."""
        if self.writable:
            return "running"
        held = lock_is_held(self._path / LOCK_FILE)
        # Re-read after probing the lock: a writer that let go in between has already
        # written its final status, so "running" here with no lock means it died.
        self._manifest = read_manifest(self._path)
        if self._manifest.status == "running" and not held:
            return "interrupted"
        return self._manifest.status

    @property
    def counts(self) -> RunCounts:
        """Progress so far (read-only handles scan `results.jsonl`)."""
        expected = self._manifest.counts.expected
        if self.writable:
            with self._lock:
                return self._tally.counts(expected)
        return Tally.scan(self._path).counts(expected)

    def completed_keys(self, *, include_errors: bool = True) -> set[ResultKey]:
        """`(sample_id, experiment_name, epoch)` keys that need no re-run.

        A key counts by its latest line. Cancelled results (the run stopped while the
        sample was in flight) never count; errored ones count unless
        `include_errors=False` (`--retry-errors`), so the retry's line supersedes them.
        """
        if self.writable:
            with self._lock:
                if not self._tally.untracked:
                    return self._tally.keys(include_errors=include_errors)
        return Tally.scan(self._path).keys(include_errors=include_errors)

    def expect_unique_keys(self) -> None:
        """Promise that each key appended from now on is appended once.

        (A key already recorded may be appended once more, to supersede it.) The handle
        then counts new keys without remembering them, so its memory does not grow with
        the run.

        The local runner promises it (it runs each key once); a collector of mailbox
        replies, which may see a result twice, must not. `completed_keys` then reads the
        file.
        """
        with self._lock:
            self._tally.unique = True

    def iter_results(self, *, strict: bool = True) -> Iterator[EvalResult]:
        """Stream every line of `results.jsonl` (see `iter_results`)."""
        return iter_results(self._path, strict=strict)

    def latest_results(self, *, strict: bool = True) -> list[EvalResult]:
        """One result per key, the last line winning (see `latest_results`)."""
        return latest_results(self._path, strict=strict)

    # -- writing -------------------------------------------------------------------------

    def publish(self) -> None:
        """Write a deferred `run.json` now (see `RunStore.create`); once written, nothing.

        Its provenance (and a deferred fingerprint) is collected here, and the result
        serializer built. Appending a result, `record_provenance`, `finish`, `manifest`
        and `fingerprint` call it first, so results never reach a run without its
        manifest; the local runner calls it once its first samples are under way.

        Raises:
            RunStoreError: `run.json` cannot be written (the run stays unpublished: the
                next call tries again).
        """
        with self._manifest_lock:
            complete = self._unpublished
            if complete is not None:
                manifest = complete(self._manifest)
                # Not fsynced, like a manifest written by `create`: the first sync makes
                # it durable with the results (see `RunStore.create`).
                write_manifest(self._path, manifest, durable=False)
                self._manifest = manifest
                self._unpublished = None  # only once written: a failed write is retried
        if self._dumps == self._first_dumps:  # ready to append: the serializer too
            self._dumps = result_dumps()

    def _first_dumps(self, result: EvalResult) -> bytes:
        """Serialize the first result: publish a deferred manifest, build the serializer."""
        self.publish()
        return self._dumps(result)

    def append(self, result: EvalResult) -> None:
        """Record one result; it reaches the OS before this returns.

        A result without `run_id` is stamped with this run's id.

        Raises:
            RunStoreError: on a read-only or finished handle, a result of another run,
                or when the file cannot be written.
        """
        result = self._stamp(result)
        self._record(self._dumps(result) + b"\n", (result,))

    def extend(self, results: Iterable[EvalResult]) -> None:
        """Record several results with one write (see `append`)."""
        stamped = [self._stamp(r) for r in results]
        if stamped:
            self._record(b"".join(self._dumps(r) + b"\n" for r in stamped), stamped)

    def _record(self, data: bytes, results: Sequence[EvalResult]) -> None:
        """Write `data` (the lines of `results`) and count `results` in."""
        with self._lock:
            if self._repairing:  # wait it out (see `_repair`); the run may end meanwhile
                self._no_writers.wait_for(lambda: not self._repairing)
            fd = self._fd
            if fd < 0:
                msg = f"run {self.run_id} is not open for writing here; use RunStore.resume"
                raise RunStoreError(f"{msg} to append")
            start_syncer, self._start_syncer = self._start_syncer, False
            expected = self._manifest.counts.expected
            # Counted before the write lands (a failed write takes them back), so that
            # this is the append's only trip through the lock.
            previous = list(map(self._tally.add, results))
            # The last expected result: sync it now rather than at the interval's end.
            hurry = not self._hurried and expected is not None and self._tally.distinct >= expected
            self._hurried = self._hurried or hurry
            self._writing.append(None)
        if start_syncer:
            self._syncer.start()
        failure: RunStoreError | None = None
        try:
            failure = self._write(fd, data)
        finally:
            self._writing.pop()
            # `_wait_for_writers` raises `_draining` before it looks at `_writing`: a
            # waiter that saw this write in flight is woken here.
            if self._draining:
                with self._lock:
                    self._no_writers.notify_all()
        if failure is not None:
            self._repair(results, previous)
            raise failure
        dirty = self._syncer.dirty
        if not dirty.is_set():  # after the write: the sync that clears it covers it
            dirty.set()  # wakes the syncer
        if self._sync_interval == 0:
            self.sync()
        elif hurry:
            self._syncer.hurry()

    def sync(self) -> None:
        """Force what was appended so far to disk (fsync): it then survives a machine crash.

        Raises:
            RunStoreError: this fsync failed, or an earlier background one did (see the
                module's docs); either way, results on disk may be incomplete.
        """
        try:
            self._syncer.sync()
        except OSError as exc:
            raise RunStoreError(
                f"cannot fsync {self.results_path}: {exc}; check the disk, then resume the run"
            ) from exc
        self._raise_sync_failure()

    def finish(
        self,
        status: RunStatus = "complete",
        *,
        fingerprint: Fingerprint | None = None,
        expected_results: int | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> None:
        """fsync, close the file, record `status` and counts in `run.json`, release the run.

        Stops the background syncer first; appends still in flight land and are synced.

        Args:
            status: The run's final status.
            fingerprint: Replaces the stored fingerprint (a streamed dataset's hash is
                known only once the run has read it to the end).
            expected_results: Replaces the expected number of results.
            provenance: Merged into the stored provenance (see `record_provenance`).

        Raises:
            RunStoreError: when the handle is read-only or already finished, when the
                file or the manifest cannot be written, or when a background fsync
                failed earlier (raised after the run was finished and released).
        """
        with self._lock:
            if self._fd < 0:
                raise RunStoreError(f"run {self.run_id} is not open for writing here")
            fd, self._fd = self._fd, -1  # later appends fail; those that took `fd` land
            self._wait_for_writers()
            expected = self._manifest.counts.expected
            counts = self._tally.counts(expected if expected_results is None else expected_results)

        closed = False

        def results_durable() -> None:
            # Before the final manifest's rename: it must never announce results a
            # crash could still take away. The manifest's temporary file was written
            # and fsynced meanwhile, beside the syncer's fsync of the results (which
            # the last expected result started).
            nonlocal closed
            self._syncer.stop()
            with self._syncer.lock:  # no `sync()` call is using `fd` meanwhile
                try:
                    if os.fstat(fd).st_size != self._syncer.synced_size:  # not covered
                        os.fsync(fd)
                except OSError as exc:
                    raise RunStoreError(
                        f"cannot fsync {self.results_path}: {exc}; the run stays unfinished "
                        "(check the disk, then resume it)"
                    ) from exc
                finally:
                    closed = True
                    os.close(fd)

        try:
            with self._manifest_lock:  # after a `record_provenance` under way: it is kept
                self._collect_unpublished()
                self._manifest = dataclasses.replace(
                    self._manifest, status=status, counts=counts, updated_at=self._clock.now(),
                    fingerprint=fingerprint or self._manifest.fingerprint,
                    provenance=_merged(self._manifest.provenance, provenance),
                )  # fmt: skip
                write_manifest(self._path, self._manifest, before_replace=results_durable)
        except OSError as exc:
            raise RunStoreError(f"cannot finish run {self.run_id}: {exc}") from exc
        finally:
            if not closed:  # the manifest failed first: the results still go to disk
                with contextlib.suppress(RunStoreError):
                    results_durable()
            if self._writer_lock is not None:
                self._writer_lock.release()
        self._raise_sync_failure()

    def record_provenance(self, changes: Mapping[str, Any]) -> bool:
        """Merge `changes` into the manifest's provenance and rewrite `run.json` now.

        For what is learnt once the run is under way (the local runner's git dirty flag).
        The new `run.json` replaces the old one atomically; like the one written when the
        run was created, it becomes durable with the handle's next sync (or `finish`).
        Does nothing once the run is finishing (pass `changes` to `finish` instead).

        Returns:
            Whether `run.json` was rewritten.

        Raises:
            RunStoreError: `run.json` cannot be written.
        """
        with self._manifest_lock:
            if not self.writable:
                return False
            self._collect_unpublished()
            manifest = dataclasses.replace(
                self._manifest, updated_at=self._clock.now(),
                provenance=_merged(self._manifest.provenance, changes),
            )  # fmt: skip
            write_manifest(self._path, manifest, durable=False)
            self._manifest = manifest
            self._syncer.sync_with_next(self._path / MANIFEST_FILE)
        return True

    def _abandon(self) -> None:
        """Close the results file and let go of the run, writing nothing more.

        For a run whose creation failed before it was of any use (`RunStore.create`).
        """
        with self._lock:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
        if self._writer_lock is not None:
            self._writer_lock.release()

    def _collect_unpublished(self) -> None:
        # With `_manifest_lock` held, before a write of run.json that replaces the
        # deferred one: the manifest about to be written is completed first.
        complete = self._unpublished
        if complete is not None:
            self._manifest = complete(self._manifest)
            self._unpublished = None

    def close(self) -> None:
        """Finish as `interrupted` if still writable; otherwise do nothing."""
        if self.writable:
            self.finish("interrupted")

    def __enter__(self) -> RunHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.writable:
            self.finish("interrupted" if exc_type is not None else "complete")

    def _stamp(self, result: EvalResult) -> EvalResult:
        if result.run_id is None:
            return dataclasses.replace(result, run_id=self.run_id)
        if result.run_id != self.run_id:
            raise RunStoreError(
                f"result for {result.key} belongs to run {result.run_id!r}, "
                f"not {self.run_id!r}; collect results per run"
            )
        return result

    def _wait_for_writers(self) -> None:
        # Called with self._lock held: until every append in flight has landed.
        self._draining += 1
        try:
            self._no_writers.wait_for(lambda: not self._writing)
        finally:
            self._draining -= 1

    def _write(self, fd: int, data: bytes) -> RunStoreError | None:
        # One `write` per batch, *not* under self._lock: on an O_APPEND file each write
        # lands whole at the end (the kernel serializes them), and a Python lock held
        # across a syscall, which releases the GIL, makes every other appender queue
        # behind this thread's wait to get the GIL back (with 200 threads that convoy
        # cost ~10 ms per append). A killed process leaves at worst one cut line at the
        # end, which readers skip and resume truncates.
        # Returns the error to raise once this append no longer counts as a writer.
        try:
            written = os.write(fd, data)
        except OSError as exc:
            error = RunStoreError(
                f"cannot append to {self.results_path}: {exc}; fix the cause and resume the run"
            )
            error.__cause__ = exc
            return error
        if written < len(data):  # the disk filled up mid-line
            return RunStoreError(
                f"cannot append to {self.results_path}: only {written} of {len(data)} bytes "
                "were written (is the disk full?); fix the cause and resume the run"
            )
        return None

    def _repair(self, results: Sequence[EvalResult], previous: list[int | None]) -> None:
        """After a failed write: uncount it, let other appends land, drop a cut last line.

        New appends wait meanwhile, so the line cut by the failure is the last one (a
        write racing past a full disk could only put a whole line after it; strict
        readers then name that corrupt line).
        """
        with self._lock:
            for result, old in zip(reversed(results), reversed(previous), strict=True):
                self._tally.undo(result, old)
            self._repairing = True
            try:
                self._wait_for_writers()
                try:
                    repair_tail(self.results_path)  # never leave half a line behind
                except OSError:
                    _log.exception("cannot roll back a partial write to %s", self.results_path)
            finally:
                self._repairing = False
                self._no_writers.notify_all()

    def _raise_sync_failure(self) -> None:
        failure = self._syncer.take_failure()
        if failure is not None:
            raise RunStoreError(
                f"a background fsync of {self.results_path} failed ({failure}): results "
                "written before it may not be on disk; check the disk, then resume the run "
                "(or re-run it)"
            ) from failure


def _merged(old: Mapping[str, Any], changes: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return old if not changes else {**old, **serde.dump(dict(changes))}
