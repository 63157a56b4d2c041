"""Writing a bundle's zip: `<directory>/<request_id>/<timestamp>.zip`, atomically."""

from __future__ import annotations

import contextlib
import os
import re
import uuid
import zipfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["bundle_path_parts", "write_zip_atomically"]

_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_MAX_NAME = 128


def bundle_path_parts(request_id: str, when: datetime) -> tuple[str, str]:
    """Return the directory name for `request_id` and the file stem for `when`.

    The request id comes from a message and may hold anything; characters other than
    letters, digits, `.`, `_` and `-` become `_`, so it can never leave the bundle
    directory. Timestamps are UTC, e.g. `20240101T000000.000000Z`.
    """
    name = _UNSAFE_CHARS.sub("_", request_id)[:_MAX_NAME]
    if name in {"", ".", ".."}:
        name = "_" * max(1, len(name))
    stem = when.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return name, stem


def write_zip_atomically(
    directory: Path, request_id: str, when: datetime, members: Mapping[str, bytes]
) -> Path:
    """Write `members` (in order) to a new zip under `directory` and return its path.

    The zip is written to a temporary file in the target directory, flushed to disk and
    then published under its final name, so a reader never sees a half-written bundle.
    An existing bundle is never overwritten: a second bundle for the same request and
    timestamp gets a `-1`, `-2`... suffix.

    Raises:
        OSError: when the directory cannot be created or written.
    """
    sub, stem = bundle_path_parts(request_id, when)
    target_dir = directory / sub
    target_dir.mkdir(parents=True, exist_ok=True)
    tmp = target_dir / f".{stem}.{uuid.uuid4().hex}.tmp"
    try:
        _write_zip(tmp, when, members)
        return _publish(tmp, target_dir, stem)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _write_zip(path: Path, when: datetime, members: Mapping[str, bytes]) -> None:
    # Zip timestamps cannot predate 1980; a fake clock may well start earlier.
    date_time = max(when.astimezone(UTC).timetuple()[:6], (1980, 1, 1, 0, 0, 0))
    with path.open("wb") as raw:
        with zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, data in members.items():
                info = zipfile.ZipInfo(name, date_time=date_time)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o100644 << 16  # regular file, rw-r--r--
                zf.writestr(info, data)
        raw.flush()
        os.fsync(raw.fileno())


def _publish(tmp: Path, target_dir: Path, stem: str) -> Path:
    for n in range(1000):
        final = target_dir / (f"{stem}.zip" if n == 0 else f"{stem}-{n}.zip")
        try:
            # A hard link publishes atomically and, unlike rename, refuses to overwrite.
            os.link(tmp, final)
        except FileExistsError:
            continue
        except OSError:
            # Filesystems without hard links: rename, after checking the name is free.
            if final.exists():
                continue
            tmp.replace(final)
        return final
    raise FileExistsError(f"too many bundles named {stem}*.zip in {target_dir}")
