"""Reading a large run on two cores: the second half of its lines in a child process.

Decoding a run's lines (`_viewer_lines.decode_batches`) is Python work, so threads do
not share it (the GIL). For a large `results.jsonl` (`SPLIT_BYTES` or more, on a
machine with a CPU to spare: more than one, and a load average below the others),
`read_batches` starts `python -m` this module on the
second half of the file (from the first line that starts at or after its middle), as
`python -I _viewer_lines.py` (`_viewer_lines.write_batches`): the child counts the lines
before its half, decodes its lines exactly as the parent would (the same function), and
writes each batch to its stdout as msgpack. Meanwhile the
parent decodes and indexes the first half; then it indexes the child's batches, in file
order. The batches are the ones the parent would have made itself, and the index the
same; when the child fails in any way (it cannot start, exits with an error, or writes
something unexpected), the parent reads the second half itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from . import _viewer_lines
from ._viewer_lines import FRAME_HEADER, DecodedBatch, decode_batches, lines_before

__all__ = ["SPLIT_BYTES", "read_batches"]

SPLIT_BYTES = 32 * 2**20
"""Files at least this large are read in two halves (about 20,000 results of 1.5 KB)."""
CHILD_TIMEOUT = 60.0
"""Seconds the parent waits for the child once its own half is read (then reads it)."""
_CHUNK = 8 * 2**20
_Frame = tuple[
    list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]],
    list[Any], int, int,
]  # fmt: skip
"""A batch as the child writes it: rows, metadata, metrics, failed, staged, lines, last."""


def read_batches(path: Path, *, id_base: int, run_id: str) -> Iterator[DecodedBatch]:
    """`decode_batches(path, ...)`, the second half decoded by a child when it is large.

    Raises:
        OSError: the file cannot be opened or read.
    """
    child_can_run = _spare_core() and Path(_viewer_lines.__file__).is_file()
    middle = _middle(path) if child_can_run else None
    if middle is None:
        yield from decode_batches(path, id_base=id_base, run_id=run_id)
        return
    child = _Child(path, middle, id_base=id_base, run_id=run_id)
    try:
        yield from decode_batches(path, id_base=id_base, run_id=run_id, stop=middle)
        batches = child.batches()
    finally:
        child.stop()
    if batches is not None:
        yield from batches
        return
    first_line = lines_before(path, middle) + 1  # read it here, as if there were no child
    yield from decode_batches(
        path, id_base=id_base, run_id=run_id, start=middle, first_line=first_line
    )


def _spare_core() -> bool:
    """Whether a second CPU is likely idle (more than one, and a load below the rest).

    On a busy machine the child would only compete for the CPU, and it costs some
    (its start, and handing its batches over): the parent reads the whole file then.
    """
    cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on this platform
        load = 0.0
    return cpus > 1 and load <= cpus - 1


def _middle(path: Path) -> int | None:
    """Where the second half starts (a line start), or None for a file read whole."""
    size = path.stat().st_size
    if size < SPLIT_BYTES:
        return None
    with path.open("rb") as handle:
        handle.seek(size // 2)
        handle.readline()  # the rest of the line the middle falls in
        middle = handle.tell()
    return middle if middle < size else None


def _command(path: Path, middle: int, id_base: int, run_id: str) -> list[str]:
    """The child's command: `_viewer_lines.py` as a script, isolated (`-I`).

    It needs msgspec and the standard library only, so it starts in milliseconds.
    """
    script = _viewer_lines.__file__
    return [sys.executable, "-I", script, str(path), str(middle), str(id_base), run_id]


class _Child:
    """The child process decoding the second half, and its output as it arrives."""

    def __init__(self, path: Path, middle: int, *, id_base: int, run_id: str) -> None:
        self._out = bytearray()
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            self._proc = subprocess.Popen(
                _command(path, middle, id_base, run_id), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        except OSError:
            return
        # Drained as it comes: a full pipe would stop the child until the parent reads.
        self._drain = threading.Thread(target=self._read, name="wink-debug-split", daemon=True)
        self._drain.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while chunk := self._proc.stdout.read(_CHUNK):
            self._out += chunk

    def stop(self) -> None:
        """End the child if it still runs (the parent stopped reading), and reap it."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._drain.join()
        assert self._proc.stdout is not None
        self._proc.stdout.close()

    def batches(self) -> list[DecodedBatch] | None:
        """The child's batches once it is done; None when it failed (or hung)."""
        if self._proc is None:
            return None
        try:
            status = self._proc.wait(CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            return None  # `stop` ends it
        self._drain.join()
        if status != 0:
            return None
        try:
            return _frames(bytes(self._out))
        except (msgspec.DecodeError, ValueError):
            return None


def _frames(data: bytes) -> list[DecodedBatch]:
    """The batches of the child's output (see `_viewer_lines.write_batches`).

    Raises:
        msgspec.DecodeError: a batch is not one.
        ValueError: the output does not end where its last batch does.
    """
    decode = msgspec.msgpack.Decoder(_Frame).decode
    batches, at = [], 0
    while True:
        size = int.from_bytes(data[at : at + FRAME_HEADER], "little")
        at += FRAME_HEADER
        if size == 0:
            break
        rows, metadata, metrics, failed, staged, lines, last = decode(data[at : at + size])
        batches.append(DecodedBatch(rows, metadata, metrics, failed, staged, lines, last))
        at += size
    if at != len(data):
        raise ValueError("the child wrote more than its batches")
    return batches
