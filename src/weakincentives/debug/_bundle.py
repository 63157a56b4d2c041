"""Reading debug bundles safely: `DebugBundle.open(path)`, then `verify()` and accessors."""

from __future__ import annotations

import hashlib
import json
import re
import stat
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weakincentives import serde
from weakincentives.errors import BundleError, SerdeError
from weakincentives.runtime.bundle import (
    BUNDLE_FORMAT,
    BUNDLE_FORMAT_VERSION,
    ERROR_FILE,
    EVAL_FILE,
    EXTRA_DIR,
    LOGS_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
    REQUEST_FILE,
    RESPONSE_FILE,
    SESSION_AFTER_FILE,
    SESSION_BEFORE_FILE,
    BundleManifest,
)
from weakincentives.runtime.session import SessionSnapshot

__all__ = ["BundleLimits", "DebugBundle"]

_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleLimits:
    """Bounds that keep a hostile zip from exhausting memory (zip-bomb guard)."""

    max_members: int = 10_000
    """Most members a bundle may have."""
    max_member_bytes: int = 64 * 1024 * 1024
    """Largest uncompressed size of one member."""
    max_total_bytes: int = 256 * 1024 * 1024
    """Largest uncompressed size of all members together."""


class DebugBundle:
    """A debug bundle read into memory, checked for unsafe members on the way in.

    Nothing is ever extracted to disk by member name: members are read into memory,
    after rejecting absolute names, `..` segments, backslashes, drive letters, symlinks,
    encrypted or duplicate members, and anything over `BundleLimits`. `open` does not
    check checksums, so a damaged bundle can still be inspected; call `verify()` for that.

    Examples:
        >>> bundle = DebugBundle.open(path)  # doctest: +SKIP
        >>> bundle.verify()  # doctest: +SKIP
        >>> [r["message"] for r in bundle.logs]  # doctest: +SKIP
    """

    __slots__ = ("_manifest", "_members", "_path")

    def __init__(self, path: Path, manifest: BundleManifest, members: Mapping[str, bytes]) -> None:
        self._path = path
        self._manifest = manifest
        self._members = dict(members)

    @classmethod
    def open(cls, path: str | Path, *, limits: BundleLimits | None = None) -> DebugBundle:
        """Read the bundle at `path`.

        Raises:
            BundleError: when the file is missing, not a zip, unsafe, over `limits`, has
                no valid manifest, or was written by a newer format version.
        """
        path = Path(path)
        members = _read_members(path, limits or BundleLimits())
        return cls(path, _parse_manifest(path, members), members)

    @classmethod
    def load(cls, path: str | Path, *, limits: BundleLimits | None = None) -> DebugBundle:
        """The reference implementation's name for `open` (same checks, same errors)."""
        return cls.open(path, limits=limits)

    @property
    def path(self) -> Path:
        """Where the bundle was read from."""
        return self._path

    @property
    def manifest(self) -> BundleManifest:
        """The bundle's manifest."""
        return self._manifest

    def names(self) -> tuple[str, ...]:
        """Names of every member, manifest included, sorted."""
        return tuple(sorted(self._members))

    def read_bytes(self, name: str) -> bytes:
        """Return the bytes of member `name`.

        Raises:
            BundleError: when the bundle has no such member.
        """
        try:
            return self._members[name]
        except KeyError:
            raise BundleError(f"{self._path}: bundle has no file {name!r}") from None

    def verify(self) -> None:
        """Recompute every file's size and sha256 against the manifest.

        Also fails when a member is missing from the manifest.

        Raises:
            BundleError: naming the first file that is missing, unlisted or altered.
        """
        listed = {MANIFEST_FILE}
        for entry in self._manifest.files:
            listed.add(entry.name)
            data = self._members.get(entry.name)
            if data is None:
                raise BundleError(f"{self._path}: {entry.name} is listed but missing")
            digest = hashlib.sha256(data).hexdigest()
            if len(data) != entry.size or digest != entry.sha256:
                raise BundleError(
                    f"{self._path}: {entry.name} fails its checksum (expected sha256 "
                    f"{entry.sha256}, {entry.size} bytes; got {digest}, {len(data)} bytes); "
                    "the bundle was altered or damaged",
                )
        unlisted = sorted(set(self._members) - listed)
        if unlisted:
            raise BundleError(f"{self._path}: {unlisted[0]} is not listed in the manifest")

    @property
    def request(self) -> Any:
        """The recorded request as JSON data (None when not recorded)."""
        return self._json(REQUEST_FILE)

    @property
    def response(self) -> Any:
        """The recorded response as JSON data (None when not recorded)."""
        return self._json(RESPONSE_FILE)

    @property
    def session_before(self) -> SessionSnapshot | None:
        """Session snapshot taken before the agent ran."""
        return self._snapshot(SESSION_BEFORE_FILE)

    @property
    def session_after(self) -> SessionSnapshot | None:
        """Session snapshot taken after the agent ran."""
        return self._snapshot(SESSION_AFTER_FILE)

    @property
    def logs(self) -> list[dict[str, Any]]:
        """Captured log records: time, level, logger, message, thread, exception."""
        data = self._members.get(LOGS_FILE)
        if data is None:
            return []
        rows = []
        for lineno, line in enumerate(data.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BundleError(f"{self._path}: {LOGS_FILE} line {lineno}: {exc}") from exc
            if not isinstance(row, dict):
                raise BundleError(f"{self._path}: {LOGS_FILE} line {lineno} is not an object")
            rows.append(row)
        return rows

    @property
    def metrics(self) -> dict[str, Any] | None:
        """`metrics.json`: duration, token usage and the caller's metrics."""
        return self._json_object(METRICS_FILE)

    @property
    def eval(self) -> dict[str, Any] | None:
        """`eval.json` (EvalLoop bundles only)."""
        return self._json_object(EVAL_FILE)

    @property
    def error(self) -> dict[str, Any] | None:
        """`error.json`: kind, type, message and traceback, when the sample failed."""
        return self._json_object(ERROR_FILE)

    def extra_files(self) -> dict[str, bytes]:
        """The caller's extra files, by name without the `extra/` prefix."""
        return {
            name.removeprefix(EXTRA_DIR): data
            for name, data in sorted(self._members.items())
            if name.startswith(EXTRA_DIR)
        }

    def _json(self, name: str) -> Any:
        data = self._members.get(name)
        if data is None:
            return None
        try:
            return json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BundleError(f"{self._path}: {name} is not valid JSON: {exc}") from exc

    def _json_object(self, name: str) -> dict[str, Any] | None:
        value = self._json(name)
        if value is not None and not isinstance(value, dict):
            raise BundleError(f"{self._path}: {name} must hold a JSON object")
        return value

    def _snapshot(self, name: str) -> SessionSnapshot | None:
        data = self._members.get(name)
        if data is None:
            return None
        try:
            return SessionSnapshot.from_json(data)
        except SerdeError as exc:
            raise BundleError(f"{self._path}: {name} is not a session snapshot: {exc}") from exc


def _read_members(path: Path, limits: BundleLimits) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            _check_infos(path, infos, limits)
            return {info.filename: _read_member(zf, info) for info in infos if not info.is_dir()}
    except FileNotFoundError:
        raise BundleError(f"{path}: no such bundle file") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise BundleError(f"{path}: not a readable zip file ({exc})") from exc


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    # Reads at most the declared size (checked against the limits), and zipfile checks the
    # CRC at the end, so a member that inflates past its header fails instead of growing.
    with zf.open(info) as member:
        data = member.read(info.file_size + 1)
    if len(data) != info.file_size:
        raise BundleError(
            f"member {info.filename!r} holds {len(data)} bytes but declares {info.file_size}",
        )
    return data


def _check_infos(path: Path, infos: list[zipfile.ZipInfo], limits: BundleLimits) -> None:
    if len(infos) > limits.max_members:
        raise BundleError(
            f"{path}: {len(infos)} members is over the limit of {limits.max_members}; "
            "this is not a bundle wink wrote (raise BundleLimits.max_members to read it)",
        )
    seen: set[str] = set()
    total = 0
    for info in infos:
        _check_name(path, info.filename)
        if info.filename in seen:
            raise BundleError(f"{path}: member {info.filename!r} appears twice")
        seen.add(info.filename)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise BundleError(f"{path}: member {info.filename!r} is a symlink")
        if info.flag_bits & 0x1:
            raise BundleError(f"{path}: member {info.filename!r} is encrypted")
        if info.file_size > limits.max_member_bytes:
            raise BundleError(
                f"{path}: member {info.filename!r} inflates to {info.file_size} bytes, over "
                f"the limit of {limits.max_member_bytes} (possible zip bomb)",
            )
        total += info.file_size
        if total > limits.max_total_bytes:
            raise BundleError(
                f"{path}: members inflate to more than {limits.max_total_bytes} bytes "
                "(possible zip bomb; raise BundleLimits.max_total_bytes to read it)",
            )


def _check_name(path: Path, name: str) -> None:
    problem = None
    parts = name.removesuffix("/").split("/")
    if not name or "\x00" in name:
        problem = "is empty or holds a NUL byte"
    elif "\\" in name:
        problem = "holds a backslash"
    elif name.startswith("/"):
        problem = "is absolute"
    elif _DRIVE.match(name):
        problem = "starts with a drive letter"
    elif any(part in {"", ".", ".."} for part in parts):
        problem = "has an empty, '.' or '..' path segment"
    if problem is not None:
        raise BundleError(f"{path}: unsafe member name {name!r} {problem}")


def _parse_manifest(path: Path, members: Mapping[str, bytes]) -> BundleManifest:
    data = members.get(MANIFEST_FILE)
    if data is None:
        raise BundleError(f"{path}: no {MANIFEST_FILE}; this is not a wink debug bundle")
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path}: {MANIFEST_FILE} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"{path}: {MANIFEST_FILE} is not a {BUNDLE_FORMAT} manifest")
    version = raw.get("format_version")
    if isinstance(version, int) and version > BUNDLE_FORMAT_VERSION:
        raise BundleError(
            f"{path}: format version {version} is newer than this wink reads "
            f"({BUNDLE_FORMAT_VERSION}); upgrade weakincentives",
        )
    try:
        return serde.load(BundleManifest, raw)
    except SerdeError as exc:
        raise BundleError(f"{path}: invalid {MANIFEST_FILE}: {exc}") from exc
