"""The run store: one directory per run, results appended as they complete.

```
runs/20261120-233501-ab12cd/
  run.json        manifest: format_version, run_id, status, counts, fingerprint, config
  results.jsonl   one EvalResult per line (serde JSON), append-only; last line per key wins
  .lock           flock held by the one writer (released by the kernel if it dies)
```

Examples:
    >>> import tempfile
    >>> from weakincentives.evals.store._fingerprint import Fingerprint
    >>> fp = Fingerprint(dataset_sha256="0" * 64)
    >>> with tempfile.TemporaryDirectory() as root:
    ...     store = RunStore(root)
    ...     with store.create(fp, run_id="demo") as run:
    ...         pass  # run.append(result) as each result completes
    ...     print(store.open("demo").status, store.open("demo").counts.results)
    complete 0

**Resume.** `RunStore.resume` refuses, with `diff_fingerprints` in the message, a run whose
stored fingerprint differs from the current one; it then drops a truncated last line and
reopens the file for appending. `RunHandle.completed_keys()` tells the runner what to skip
(`completed_keys(include_errors=False)` for `--retry-errors`).

See `_handle.py` for the durability policy (write per result, fsync at most every 50 ms,
off the appending thread).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import secrets
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from weakincentives import serde
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError, FingerprintMismatchError, RunStoreError

from ._files import LOCK_FILE, MANIFEST_FILE, RESULTS_FILE, WriterLock, repair_tail
from ._fingerprint import Fingerprint, diff_fingerprints
from ._handle import RunCounts, RunHandle, Tally
from ._manifest import RunManifest, read_manifest, write_manifest

__all__ = ["RunStore", "new_run_id"]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ID_ATTEMPTS = 8
_UNKNOWN = Fingerprint(dataset_sha256="")  # a deferred fingerprint, until run.json is written
_log = logging.getLogger(__name__)


def new_run_id(now: datetime) -> str:
    """A sortable, readable, unique run id: `YYYYmmdd-HHMMSS-xxxxxx` (UTC, 6 random hex).

    Examples:
        >>> new_run_id(datetime(2026, 11, 20, 23, 35, 1, tzinfo=UTC))[:16]
        '20261120-233501-'
    """
    return f"{now.astimezone(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


class RunStore:
    """Run directories under `root`: create, open (read-only), resume (append again), list.

    Args:
        root: Directory holding one subdirectory per run (created on first use).
        clock: Clock for run ids, timestamps and the fsync interval.
        sync_interval: Seconds between fsyncs while appending, done by a background
            thread per writable run (0 = by each append before it returns, None = only on
            `sync()` and `finish()`); see `_handle.py` for the trade-off.
    """

    def __init__(
        self,
        root: str | Path = "runs",
        *,
        clock: Clock = SYSTEM_CLOCK,
        sync_interval: float | None = 0.05,
    ) -> None:
        self._root = Path(root)
        self._clock = clock
        self._sync_interval = sync_interval

    @property
    def root(self) -> Path:
        """The directory holding the runs."""
        return self._root

    def create(
        self,
        fingerprint: Fingerprint | Callable[[], Fingerprint],
        *,
        run_id: str | None = None,
        config: Mapping[str, Any] | None = None,
        expected_results: int | None = None,
        provenance: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        defer_manifest: bool = False,
    ) -> RunHandle:
        """Create a new run directory and return a writable handle to it.

        Args:
            fingerprint: What must match for a later `resume`, or a function that
                returns it (called when `run.json` is written).
            run_id: Directory name; a fresh `new_run_id` when None.
            config: Run settings worth keeping (concurrency, timeout...), JSON-compatible.
            expected_results: Planned number of results, for progress and completeness.
            provenance: What produced the run (`RunProvenance`, JSON form), or a function
                that returns it (called when `run.json` is written).
            defer_manifest: Write `run.json` later: at `RunHandle.publish()`, or before
                the first result is appended, whichever comes first (the local runner
                publishes once its first samples are under way, so that the one-time
                work of a fresh process does not delay them). The directory, the
                writer's lock and the results file are made here either way, so a store
                that cannot be written fails here.

        Raises:
            ConfigurationError: `run_id` is not a safe directory name.
            RunStoreError: a run with that id exists, or the directory or the results
                file cannot be written.
        """
        if run_id is not None and not _RUN_ID.match(run_id):
            raise ConfigurationError(
                f"run id {run_id!r} must be 1-128 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        run_dir = self._make_run_dir(run_id)
        lock = WriterLock(run_dir / LOCK_FILE)
        try:
            now = self._clock.now()
            manifest = RunManifest(
                run_id=run_dir.name,
                created_at=now,
                updated_at=now,
                status="running",
                fingerprint=_UNKNOWN if callable(fingerprint) else fingerprint,
                counts=RunCounts(expected=expected_results),
                config=serde.dump(dict(config or {})),  # checked now, whenever written
            )

            def complete(manifest: RunManifest) -> RunManifest:
                found = provenance() if callable(provenance) else provenance
                return dataclasses.replace(
                    manifest, provenance=serde.dump(dict(found or {})),
                    fingerprint=fingerprint() if callable(fingerprint) else fingerprint,
                )  # fmt: skip

            # The handle opens the results file: a store that cannot be written fails
            # here, whether its manifest is written now or later.
            handle = self._handle(
                run_dir, manifest, lock, Tally(), manifest_unsynced=True, unpublished=complete
            )
        except BaseException:
            lock.release()
            raise
        if not defer_manifest:
            # Not fsynced now: nothing in the run can be lost yet. The handle's first sync
            # (within `sync_interval` of the first result, or `finish`) makes it durable
            # together with the results, and saves two fsyncs on every run's start.
            try:
                handle.publish()
            except BaseException:
                handle._abandon()
                raise
        return handle

    def open(self, run: str | Path) -> RunHandle:
        """A read-only handle on a run, by id (under `root`) or by path.

        Raises:
            RunStoreError: when there is no such run or its manifest is unreadable.
        """
        run_dir = self.locate(run)
        return RunHandle(run_dir, read_manifest(run_dir), clock=self._clock)

    def resume(
        self, run: str | Path, fingerprint: Fingerprint, *, ignore: Collection[str] = ()
    ) -> RunHandle:
        """Reopen a run for appending, after checking that its configuration is unchanged.

        Args:
            run: Run id or path.
            fingerprint: The current configuration's fingerprint.
            ignore: Fingerprint fields allowed to differ (e.g. `{"git_commit"}`).

        Raises:
            FingerprintMismatchError: the stored fingerprint differs; the message lists how.
            RunStoreError: no such run, another writer holds it, or its results are corrupt.
        """
        run_dir = self.locate(run)
        lock = WriterLock(run_dir / LOCK_FILE)
        try:
            return self._reopen(run_dir, lock, fingerprint, ignore)
        except BaseException:
            lock.release()
            raise

    def list_runs(self) -> list[RunHandle]:
        """Read-only handles on every run under `root`, oldest id first.

        Directories without a readable manifest are skipped (with a logged warning).
        """
        if not self._root.is_dir():
            return []
        runs: list[RunHandle] = []
        for run_dir in sorted(p for p in self._root.iterdir() if p.is_dir()):
            try:
                runs.append(self.open(run_dir))
            except RunStoreError as exc:
                _log.warning("skipping %s: %s", run_dir, exc)
        return runs

    def _reopen(
        self, run_dir: Path, lock: WriterLock, fingerprint: Fingerprint, ignore: Collection[str]
    ) -> RunHandle:
        stored = read_manifest(run_dir)
        changes = diff_fingerprints(stored.fingerprint, fingerprint, ignore=ignore)
        if changes:
            listed = "\n".join(f"  - {c}" for c in changes)
            raise FingerprintMismatchError(
                f"cannot resume run {stored.run_id}: its configuration changed since it "
                f"was created:\n{listed}\nUndo these changes to resume, or start a new run."
            )
        results = run_dir / RESULTS_FILE
        results.touch()
        repair_tail(results)
        tally = Tally.scan(run_dir)
        manifest = dataclasses.replace(
            stored,
            updated_at=self._clock.now(),
            status="running",
            counts=tally.counts(stored.counts.expected),
        )
        write_manifest(run_dir, manifest)
        return self._handle(run_dir, manifest, lock, tally)

    def _handle(
        self,
        run_dir: Path,
        manifest: RunManifest,
        lock: WriterLock,
        tally: Tally,
        *,
        manifest_unsynced: bool = False,
        unpublished: Callable[[RunManifest], RunManifest] | None = None,
    ) -> RunHandle:
        return RunHandle(
            run_dir, manifest, clock=self._clock, sync_interval=self._sync_interval,
            lock=lock, tally=tally, manifest_unsynced=manifest_unsynced,
            unpublished=unpublished,
        )  # fmt: skip

    def _make_run_dir(self, run_id: str | None) -> Path:
        try:
            self._root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunStoreError(f"cannot create run store root {self._root}: {exc}") from exc
        for _ in range(_ID_ATTEMPTS if run_id is None else 1):
            run_dir = self._root / (run_id or new_run_id(self._clock.now()))
            try:
                run_dir.mkdir()
            except FileExistsError:
                continue
            except OSError as exc:
                raise RunStoreError(f"cannot create run directory {run_dir}: {exc}") from exc
            return run_dir
        if run_id is not None:
            raise RunStoreError(
                f"run {run_id!r} already exists in {self._root}; resume it or pick another id"
            )
        raise RunStoreError(f"could not find a free run id in {self._root}")  # pragma: no cover

    def locate(self, run: str | Path) -> Path:
        """The directory of a run, by id (under `root`) or by path, without reading it.

        `open` also reads and validates the manifest; a reader that reads the run's
        files itself (`EvalReport.load`) needs only where they are.

        Raises:
            RunStoreError: there is no such run (the message lists the latest ones).
        """
        path = Path(run)
        if (path / MANIFEST_FILE).is_file():
            return path
        candidate = self._root / path
        if (candidate / MANIFEST_FILE).is_file():
            return candidate
        known = sorted(p.parent.name for p in self._root.glob(f"*/{MANIFEST_FILE}"))[-5:]
        hint = f"; latest runs: {', '.join(known)}" if known else ""
        raise RunStoreError(f"no run {str(run)!r} in {self._root}{hint}")
