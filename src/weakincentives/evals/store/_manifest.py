"""`run.json`, a run's manifest: what it holds (`RunManifest`), how it is read and written."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from weakincentives import serde
from weakincentives.errors import RunStoreError, SerdeError
from weakincentives.redaction import default_redactor

from ._files import MANIFEST_FILE, write_atomic
from ._fingerprint import Fingerprint
from ._tally import RunCounts

__all__ = ["FORMAT_VERSION", "RunManifest", "RunStatus", "read_manifest", "write_manifest"]

FORMAT_VERSION = 1
"""Version of the run directory layout written by this code."""

RunStatus = Literal["running", "complete", "interrupted"]
"""`running` while a writer holds the run, `complete` when it finished, `interrupted` when it
stopped early (a `running` run whose writer died reads as `interrupted`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunManifest:
    """Contents of `run.json`. Counts are a snapshot from the last status change."""

    format_version: int = FORMAT_VERSION
    """Layout version (see `FORMAT_VERSION`)."""
    run_id: str
    """Directory name and id of the run."""
    created_at: datetime
    """When the run was created."""
    updated_at: datetime
    """When the manifest was last written."""
    status: RunStatus
    """See `RunStatus`."""
    fingerprint: Fingerprint
    """What must match to resume the run."""
    counts: RunCounts = field(default_factory=RunCounts)
    """Progress when the manifest was last written; `results.jsonl` is the truth."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """Run settings that may change on resume (concurrency, timeouts...), JSON form."""
    provenance: Mapping[str, Any] = field(default_factory=dict)
    """What produced the run (`RunProvenance`, JSON form): models, versions, git commit,
    host, command line, dataset. Empty for runs written before it was recorded."""


def read_manifest(run_dir: Path) -> RunManifest:
    """Read and validate `run_dir/run.json`.

    Raises:
        RunStoreError: when it is missing, not JSON, from a newer version, or invalid.
    """
    path = run_dir / MANIFEST_FILE
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise RunStoreError(f"{run_dir} is not a run directory: it has no {MANIFEST_FILE}") from exc
    except (OSError, ValueError) as exc:
        raise RunStoreError(f"cannot read {path}: {exc}") from exc
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise RunStoreError(
            f"{path}: format_version {version!r} is not one this weakincentives reads "
            f"(<= {FORMAT_VERSION}); upgrade weakincentives to read this run"
        )
    try:
        return serde.load(RunManifest, raw)
    except SerdeError as exc:
        raise RunStoreError(f"{path}: {exc}") from exc


def write_manifest(
    run_dir: Path,
    manifest: RunManifest,
    *,
    durable: bool = True,
    before_replace: Callable[[], None] | None = None,
) -> None:
    """Atomically replace `run_dir/run.json` (temp file + fsync + rename).

    With `durable=False` the fsyncs are skipped (see `write_atomic`, and for
    `before_replace`).
    """
    data = default_redactor().data(serde.dump(manifest))
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    write_atomic(
        run_dir / MANIFEST_FILE, text.encode(), durable=durable, before_replace=before_replace
    )
