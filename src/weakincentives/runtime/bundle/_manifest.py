"""The manifest of a debug bundle and the names of the files a bundle holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_FORMAT_VERSION",
    "ERROR_FILE",
    "EVAL_FILE",
    "EXTRA_DIR",
    "LOGS_FILE",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "REQUEST_FILE",
    "RESPONSE_FILE",
    "SESSION_AFTER_FILE",
    "SESSION_BEFORE_FILE",
    "BundleErrorInfo",
    "BundleFile",
    "BundleIds",
    "BundleKind",
    "BundleManifest",
    "BundleTimings",
    "json_bytes",
    "jsonl_bytes",
]

BUNDLE_FORMAT = "wink-debug-bundle"
"""Value of `BundleManifest.format`: tells a bundle from any other zip."""
BUNDLE_FORMAT_VERSION = 1
"""Layout version written by this code; readers refuse bundles with a newer version."""

MANIFEST_FILE = "manifest.json"
"""Ids, status, timings and the size and sha256 of every other file."""
REQUEST_FILE = "request.json"
"""The request the sample ran (an `EvalRequest`, or the agent's request)."""
RESPONSE_FILE = "response.json"
"""What the agent answered (a `PromptResponse` or any JSON-ready value)."""
SESSION_BEFORE_FILE = "session/before.json"
"""`SessionSnapshot` taken before the agent ran."""
SESSION_AFTER_FILE = "session/after.json"
"""`SessionSnapshot` taken after the agent ran."""
LOGS_FILE = "logs.jsonl"
"""One JSON object per log record: time, level, logger, message, thread, exception."""
METRICS_FILE = "metrics.json"
"""Duration, token usage and whatever else the caller measured."""
EVAL_FILE = "eval.json"
"""Evaluation metadata (EvalLoop only): sample id, experiment, score, latency, error."""
ERROR_FILE = "error.json"
"""Error kind, type, message and traceback, when the sample failed."""
EXTRA_DIR = "extra/"
"""Prefix of the caller's extra files (`BundleWriter.add_file`)."""

BundleKind = Literal["agent", "eval"]
"""Who wrote the bundle: an `AgentLoop` request or an `EvalLoop` sample."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleFile:
    """One file of a bundle, as listed in the manifest."""

    name: str
    """Member name inside the zip (POSIX separators, relative)."""
    size: int
    """Size in bytes, uncompressed."""
    sha256: str
    """Hex SHA-256 of the uncompressed bytes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleIds:
    """Ids that tie a bundle to its request, sample, run and session."""

    request_id: str
    """Id of the request (for evals: the `EvalRequest.request_id`)."""
    sample_id: str | None = None
    """Sample id (evals only)."""
    experiment: str | None = None
    """Experiment name (evals only)."""
    session_id: str | None = None
    """Id of the agent's session, when one was recorded."""
    run_id: str | None = None
    """Run the request belongs to, if any."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleErrorInfo:
    """Why a sample failed."""

    kind: str
    """Failure stage: an eval `ErrorKind` (`agent`, `timeout`...), `unhandled` for an
    exception that escaped the recorder, or `cancelled` for an interrupt."""
    message: str
    """Error message (redacted)."""
    type: str | None = None
    """Exception class name, when the error was an exception."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleTimings:
    """When the recorded sample started and finished."""

    started_at: datetime
    """Wall time when recording started."""
    finished_at: datetime
    """Wall time when recording finished."""
    duration_ms: float
    """Monotonic duration between the two."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleManifest:
    """The table of contents of a bundle (`manifest.json`)."""

    format: str = BUNDLE_FORMAT
    """Always `wink-debug-bundle`."""
    format_version: int = BUNDLE_FORMAT_VERSION
    """Layout version (see `BUNDLE_FORMAT_VERSION`)."""
    bundle_id: str
    """Unique id of this bundle."""
    kind: BundleKind
    """`agent` or `eval`."""
    created_at: datetime
    """When the bundle was written."""
    ids: BundleIds
    """Request, sample, experiment, session and run ids."""
    status: Literal["ok", "error"]
    """`error` when the sample failed (see `error`)."""
    error: BundleErrorInfo | None = None
    """What failed, when `status` is `error`."""
    timings: BundleTimings
    """Start, end and duration of the recorded sample."""
    files: tuple[BundleFile, ...]
    """Every other member of the zip, with its size and checksum."""
    log_records: int = 0
    """Log records written to `logs.jsonl`."""
    logs_dropped: int = 0
    """Log records left out because the sample logged more than `max_log_records`."""
    capture_errors: tuple[str, ...] = ()
    """Parts that could not be captured (for example a request that is not serializable)."""


def json_bytes(data: Any) -> bytes:
    """Encode JSON-compatible `data` as indented UTF-8 JSON (readable with `unzip -p | jq`)."""
    return (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def jsonl_bytes(rows: list[Any]) -> bytes:
    """Encode each row as one line of compact JSON."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
