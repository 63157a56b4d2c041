"""Files of a run directory: the streaming results reader, atomic writes and the writer lock.

A run directory holds `run.json` (the manifest, replaced atomically) and `results.jsonl`
(one `EvalResult` as JSON per line, append-only). The reader streams the file, so reading
a run costs memory for one line at a time.

**Which line counts.** A run records each `(sample_id, experiment_name, epoch)` once,
except that a retried key (`--retry-errors`, or a duplicate delivery in a distributed run)
appends a second line: *the last line for a key wins*. `latest_results` applies that rule;
`iter_results` yields every line as written.

**Crashes.** Lines are written with one `write` call each, so a killed process leaves at
worst one unterminated last line. Readers skip an unterminated last line that does not parse
(it was cut mid-write); any other line that does not parse is corruption and is reported
with its `file:line`.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from weakincentives import serde
from weakincentives.errors import RunStoreError, SerdeError

from .._records import EvalResult

__all__ = [
    "LOCK_FILE",
    "MANIFEST_FILE",
    "RESULTS_FILE",
    "WriterLock",
    "iter_results",
    "latest_results",
    "lock_is_held",
    "repair_tail",
    "results_path",
    "sync_file_and_dir",
    "write_atomic",
]

RESULTS_FILE = "results.jsonl"
"""Name of the append-only results file in a run directory."""
MANIFEST_FILE = "run.json"
"""Name of the manifest in a run directory."""
LOCK_FILE = ".lock"
"""Lock file held (flock) by the one process allowed to append to a run."""

_log = logging.getLogger(__name__)
_MAX_DETAIL = 300


def results_path(run: str | Path) -> Path:
    """`run/results.jsonl` for a run directory; a path to a file is returned as is."""
    path = Path(run)
    return path if path.suffix == ".jsonl" else path / RESULTS_FILE


def _decode(raw: bytes) -> EvalResult:
    return serde.loads(EvalResult, raw)


def iter_results(run: str | Path, *, strict: bool = True) -> Iterator[EvalResult]:
    """Stream every result of a run directory (or a `results.jsonl` file), in written order.

    Args:
        run: The run directory, or the results file itself.
        strict: Raise on a corrupt line (default); when False, log it and go on.

    Raises:
        RunStoreError: when the file is missing, or (strict) a line other than an
            unterminated last line does not parse; the message names `file:line`.
    """
    path = results_path(run)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise RunStoreError(f"cannot read results {path}: {exc}; is this a run directory?") from exc
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                result = _decode(raw)
            except SerdeError as exc:
                if not raw.endswith(b"\n"):
                    # The last write was cut short (the process died mid-line): skip it.
                    _log.warning("%s:%d: skipping truncated last line", path, lineno)
                    return
                if strict:
                    raise _corrupt(path, lineno, exc) from exc
                _log.warning("%s:%d: skipping corrupt line: %s", path, lineno, exc)
                continue
            yield result


def _corrupt(path: Path, lineno: int, exc: Exception) -> RunStoreError:
    detail = str(exc)
    if len(detail) > _MAX_DETAIL:
        detail = detail[:_MAX_DETAIL] + "…"
    return RunStoreError(
        f"{path}:{lineno}: corrupt result line ({detail}). Delete or fix that line (its sample "
        "is re-run on resume), or read with strict=False to skip it."
    )


def latest_results(run: str | Path, *, strict: bool = True) -> list[EvalResult]:
    """One result per `(sample_id, experiment_name, epoch)`: the last line written wins.

    Results come in the order their key first appeared in the file.
    """
    latest: dict[tuple[str, str, int], EvalResult] = {}
    for result in iter_results(run, strict=strict):
        latest[result.key] = result
    return list(latest.values())


def repair_tail(path: Path) -> int:
    """Make `path` end with a complete line before appending to it again.

    An unterminated last line that parses gets its newline; one that does not (cut
    mid-write) is truncated away. Returns how many bytes were dropped.
    """
    with path.open("r+b") as f:
        size = f.seek(0, os.SEEK_END)
        start = _last_line_start(f, size)
        if start == size:
            return 0
        f.seek(start)
        tail = f.read()
        try:
            _decode(tail)
        except SerdeError:
            _log.warning("%s: dropping %d bytes of a truncated last line", path, size - start)
            f.truncate(start)
            os.fsync(f.fileno())
            return size - start
        f.write(b"\n")
        os.fsync(f.fileno())
        return 0


def _last_line_start(f: BinaryIO, size: int, chunk: int = 65536) -> int:
    """Offset just past the last newline of the file (0 when there is none)."""
    end = size
    while end > 0:
        begin = max(0, end - chunk)
        f.seek(begin)
        block = f.read(end - begin)
        idx = block.rfind(b"\n")
        if idx >= 0:
            return begin + idx + 1
        end = begin
    return 0


def write_atomic(
    path: Path,
    data: bytes,
    *,
    durable: bool = True,
    before_replace: Callable[[], None] | None = None,
) -> None:
    """Replace `path` with `data` so readers see the old or the new file, never a mix.

    Writes a temporary file in the same directory, fsyncs it, renames it over `path`
    and fsyncs the directory so the rename survives a machine crash. With
    `durable=False` the two fsyncs are left to the caller (`sync_file_and_dir`): the
    replacement is still atomic for readers, but a machine crash may undo it.
    `before_replace` runs once the temporary file is written, just before the rename
    (what must be durable before the new file is; an error it raises leaves `path`
    as it was).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        if before_replace is not None:
            before_replace()
        tmp.replace(path)
        if durable:
            _fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise RunStoreError(f"cannot write {path}: {exc}") from exc
    except BaseException:  # from `before_replace`: `path` stays as it was
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def sync_file_and_dir(path: Path) -> None:
    """Make `path` and its directory entry durable (what `write_atomic(durable=False)` skips).

    Raises:
        OSError: the file or the directory cannot be synced.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class WriterLock:
    """An exclusive `flock` on a run's lock file: one writer per run, across processes.

    The kernel releases it when the process exits, `kill -9` included, so a crashed
    writer never leaves a stale lock behind.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(self._fd)
            os.close(self._fd)
            raise RunStoreError(
                f"run {path.parent.name} is being written by another writer ({holder}); "
                "wait for it to finish or stop it, then resume."
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"pid {os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 64, 0).decode(errors="replace").strip() or "pid unknown"
    except OSError:
        return "pid unknown"


def lock_is_held(path: Path) -> bool:
    """Whether some writer holds the lock file at `path` right now."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
