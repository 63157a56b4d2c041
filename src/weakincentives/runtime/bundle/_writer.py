"""`BundleWriter`: records one sample and writes it as one debug bundle zip."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import traceback
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, Self

from weakincentives import serde
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.runtime.bundle._archive import write_zip_atomically
from weakincentives.runtime.bundle._config import DebugBundleConfig
from weakincentives.runtime.bundle._logs import BUNDLE_LOGGER_NAME, LogCapture
from weakincentives.runtime.bundle._manifest import (
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
    BundleErrorInfo,
    BundleFile,
    BundleIds,
    BundleKind,
    BundleManifest,
    BundleTimings,
    json_bytes,
    jsonl_bytes,
)
from weakincentives.runtime.bundle._redact import Redactor
from weakincentives.runtime.session import PromptExecuted, SessionSnapshot, ToolInvoked

__all__ = ["BundleWriter", "SupportsSnapshot", "bundle_recorder"]

_LOGGER = logging.getLogger(BUNDLE_LOGGER_NAME)
_EXTRA_NAME = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")
_PROMPT_EXECUTED = f"{PromptExecuted.__module__}:{PromptExecuted.__qualname__}"
_TOOL_INVOKED = f"{ToolInvoked.__module__}:{ToolInvoked.__qualname__}"


class SupportsSnapshot(Protocol):
    """Anything that can take a `SessionSnapshot` (`Session`, `SessionView`)."""

    def snapshot(self) -> SessionSnapshot:
        """Return a snapshot of the session."""
        ...


@dataclass(frozen=True, slots=True)
class _Pending:
    """A file waiting to be written: JSON data or raw bytes, redacted at write time."""

    kind: Literal["json", "bytes"]
    data: Any


class BundleWriter:
    """Records one request or sample and writes it as a debug bundle when the block exits.

    Use it as a context manager around one sample (`bundle_recorder` builds one). Inside
    the block, log records of the current context are captured and the caller adds the
    request, response, session snapshots, metrics, eval metadata and extra files. On
    exit the bundle is written to `<directory>/<request_id>/<timestamp>.zip`.

    Recording never fails the sample: a value that cannot be captured is named in the
    manifest's `capture_errors`, and a bundle that cannot be written is logged (to the
    `weakincentives.runtime.bundle` logger) and leaves `path` as None. Exceptions raised
    inside the block propagate unchanged, after the bundle is written with status error.

    With `config=None` the writer is disabled: every call is a cheap no-op and `path`
    stays None, so callers need no `if` around it.

    Args:
        config: Where and what to write; None disables the writer.
        request_id: Id of the request; names the bundle's directory.
        kind: `eval` for EvalLoop samples, `agent` for AgentLoop requests.
        clock: Clock for timestamps and durations.
        sample_id: Sample id (evals); also taken from `set_eval` data.
        experiment: Experiment name (evals); also taken from `set_eval` data.
        session_id: Session id; also taken from the first session snapshot.
        run_id: Run the request belongs to, if any.
        bundle_id: Id of the bundle (default: a random UUID).
    """

    def __init__(
        self,
        config: DebugBundleConfig | None,
        *,
        request_id: str,
        kind: BundleKind = "agent",
        clock: Clock = SYSTEM_CLOCK,
        sample_id: str | None = None,
        experiment: str | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        bundle_id: str | None = None,
    ) -> None:
        self._config = config
        self._kind: BundleKind = kind
        self._clock = clock
        self._bundle_id = bundle_id or str(uuid.uuid4())
        self._ids: dict[str, str | None] = {
            "request_id": request_id,
            "sample_id": sample_id,
            "experiment": experiment,
            "session_id": session_id,
            "run_id": run_id,
        }
        self._files: dict[str, _Pending] = {}
        self._metrics: dict[str, Any] = {}
        self._error: BundleErrorInfo | None = None
        self._traceback: str | None = None
        self._capture_errors: list[str] = []
        self._logs: LogCapture | None = None
        self._state: Literal["new", "recording", "done"] = "new"
        self._started_at: datetime | None = None
        self._started_mono = 0.0
        self._path: Path | None = None
        self._manifest: BundleManifest | None = None

    @property
    def enabled(self) -> bool:
        """Whether a bundle will be written (a config was given)."""
        return self._config is not None

    @property
    def path(self) -> Path | None:
        """The written bundle; None before exit, when disabled, or when writing failed."""
        return self._path

    @property
    def manifest(self) -> BundleManifest | None:
        """The written bundle's manifest (None when `path` is None)."""
        return self._manifest

    # -- recording -------------------------------------------------------------------

    def __enter__(self) -> Self:
        if self._config is None or self._state != "new":
            return self
        self._state = "recording"
        self._started_at = self._clock.now()
        self._started_mono = self._clock.monotonic()
        if self._config.include_logs:
            self._logs = LogCapture(
                level=self._config.log_level, max_records=self._config.max_log_records
            )
            self._logs.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._config is None or self._state != "recording":
            return
        self._state = "done"
        finished_at = self._clock.now()
        duration_ms = max(0.0, (self._clock.monotonic() - self._started_mono) * 1000.0)
        if self._logs is not None:
            self._logs.stop()
        if exc is not None and self._error is None:
            self.set_error("unhandled" if isinstance(exc, Exception) else "cancelled", exc)
        try:
            self._manifest, self._path = self._write(self._config, finished_at, duration_ms)
        except Exception as err:
            _LOGGER.warning(
                "debug bundle for request %s was not written (%s: %s); the sample is not "
                "affected. Check that %s is writable.",
                self._ids["request_id"],
                type(err).__name__,
                err,
                self._config.directory,
                exc_info=True,
            )
            self._manifest = self._path = None

    def discard(self) -> None:
        """Write no bundle for this block; log capture stops now.

        For a sample that passed, when only failures keep a bundle.
        """
        if self._state != "recording":
            return
        self._state = "done"
        if self._logs is not None:
            self._logs.stop()

    def set_request(self, request: object) -> None:
        """Record the request (a dataclass or JSON-compatible value) as `request.json`."""
        self._put_json(REQUEST_FILE, request)

    def set_response(self, response: object) -> None:
        """Record the agent's response (e.g. a `PromptResponse`) as `response.json`."""
        self._put_json(RESPONSE_FILE, response)

    def set_session_before(self, session: SessionSnapshot | SupportsSnapshot) -> None:
        """Snapshot the session now, before the agent runs (`session/before.json`)."""
        self._put_session(SESSION_BEFORE_FILE, session)

    def set_session_after(self, session: SessionSnapshot | SupportsSnapshot) -> None:
        """Snapshot the session now, after the agent ran (`session/after.json`).

        Token usage, prompt runs and tool calls found in it are added to the metrics
        unless the caller sets those metrics itself.
        """
        self._put_session(SESSION_AFTER_FILE, session)

    def set_metrics(self, metrics: Mapping[str, object]) -> None:
        """Merge `metrics` (name -> JSON-ready value) into `metrics.json`."""
        if self._accepting("metrics"):
            with self._guard(METRICS_FILE):
                self._metrics.update(serde.dump(dict(metrics)))

    def set_eval(self, data: Mapping[str, object]) -> None:
        """Record evaluation metadata as `eval.json`.

        Pass a JSON-ready mapping (this layer does not know eval types): `sample_id`,
        `experiment_name`, `score` (`value`, `passed`, `reason`), `latency_ms`, `error`,
        `error_kind`. `sample_id` and `experiment_name` also fill the manifest's ids.
        """
        if not self._accepting(EVAL_FILE):
            return
        with self._guard(EVAL_FILE):
            dumped = serde.dump(dict(data))
            self._files[EVAL_FILE] = _Pending("json", dumped)
            for id_name, key in (("sample_id", "sample_id"), ("experiment", "experiment_name")):
                if self._ids[id_name] is None and isinstance(dumped.get(key), str):
                    self._ids[id_name] = dumped[key]

    def add_file(self, name: str, data: bytes | str | object) -> None:
        """Add an extra file `extra/<name>`: bytes and text as they are, anything else as JSON.

        `name` is a relative POSIX path of letters, digits, `.`, `_` and `-`.
        """
        if not self._accepting(name):
            return
        with self._guard(f"{EXTRA_DIR}{name}"):
            if not _EXTRA_NAME.fullmatch(name) or ".." in name.split("/"):
                raise ValueError(
                    f"extra file name {name!r} is not a relative path of letters, digits, "
                    "'.', '_' and '-' segments",
                )
            if isinstance(data, bytes):
                self._files[f"{EXTRA_DIR}{name}"] = _Pending("bytes", data)
            elif isinstance(data, str):
                self._files[f"{EXTRA_DIR}{name}"] = _Pending("bytes", data.encode("utf-8"))
            else:
                self._files[f"{EXTRA_DIR}{name}"] = _Pending("json", serde.dump(data))

    def set_ids(
        self,
        *,
        sample_id: str | None = None,
        experiment: str | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
    ) -> None:
        """Set manifest ids once they are known; None leaves an id as it is."""
        given = {
            "sample_id": sample_id,
            "experiment": experiment,
            "session_id": session_id,
            "run_id": run_id,
        }
        self._ids.update({k: v for k, v in given.items() if v is not None})

    def set_error(self, kind: str, error: BaseException | str) -> None:
        """Mark the sample failed: `kind` is the stage (`agent`, `timeout`...)."""
        if isinstance(error, BaseException):
            self._error = BundleErrorInfo(kind=kind, message=str(error), type=type(error).__name__)
            self._traceback = "".join(traceback.format_exception(error))
        else:
            self._error = BundleErrorInfo(kind=kind, message=error)
            self._traceback = None

    # -- internals -------------------------------------------------------------------

    def _accepting(self, what: str) -> bool:
        if self._config is None:
            return False
        if self._state == "done":
            _LOGGER.warning(
                "%s added to the debug bundle of request %s after it was written; ignored",
                what,
                self._ids["request_id"],
            )
            return False
        return True

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except Exception as err:
            message = f"{what}: {type(err).__name__}: {err}"
            self._capture_errors.append(message)
            _LOGGER.warning("debug bundle could not capture %s", message)

    def _put_json(self, name: str, value: object) -> None:
        if self._accepting(name):
            with self._guard(name):
                self._files[name] = _Pending("json", serde.dump(value))

    def _put_session(self, name: str, session: SessionSnapshot | SupportsSnapshot) -> None:
        if not self._accepting(name):
            return
        with self._guard(name):
            snapshot = session if isinstance(session, SessionSnapshot) else session.snapshot()
            if self._ids["session_id"] is None:
                self._ids["session_id"] = snapshot.session_id
            self._files[name] = _Pending("json", serde.dump(snapshot))

    def _write(
        self, config: DebugBundleConfig, finished_at: datetime, duration_ms: float
    ) -> tuple[BundleManifest, Path]:
        redactor = config.redact.redactor(os.environ)
        started_at = self._started_at or finished_at
        files = self._encode_files(config, redactor, duration_ms)
        manifest = BundleManifest(
            bundle_id=self._bundle_id,
            kind=self._kind,
            created_at=finished_at,
            ids=BundleIds(request_id=self._ids["request_id"] or "", **_optional_ids(self._ids)),
            status="ok" if self._error is None else "error",
            error=self._error,
            timings=BundleTimings(
                started_at=started_at, finished_at=finished_at, duration_ms=duration_ms
            ),
            files=tuple(
                BundleFile(name=n, size=len(d), sha256=hashlib.sha256(d).hexdigest())
                for n, d in sorted(files.items())
            ),
            log_records=len(self._logs.records) if LOGS_FILE in files and self._logs else 0,
            logs_dropped=self._logs.dropped if self._logs is not None else 0,
            capture_errors=tuple(self._capture_errors),
        )
        # The manifest handed back is the one written: redacted like every other file.
        written = redactor.data(serde.dump(manifest))
        members = {MANIFEST_FILE: json_bytes(written), **dict(sorted(files.items()))}
        path = write_zip_atomically(
            config.directory, self._ids["request_id"] or "", started_at, members
        )
        return serde.load(BundleManifest, written), path

    def _encode_files(
        self, config: DebugBundleConfig, redactor: Redactor, duration_ms: float
    ) -> dict[str, bytes]:
        """Redact and encode every file; drop (and report) files over the size limit."""
        files: dict[str, bytes] = {}
        for name, pending in self._files.items():
            with self._guard(name):
                files[name] = _encode(pending, redactor)
        metrics = {
            "duration_ms": duration_ms,
            **_session_metrics(self._files.get(SESSION_AFTER_FILE)),
            **self._metrics,
        }
        files[METRICS_FILE] = json_bytes(redactor.data(metrics))
        if self._logs is not None:
            files[LOGS_FILE] = jsonl_bytes(redactor.data(self._logs.records))
        if self._error is not None:
            error = {**serde.dump(self._error), "traceback": self._traceback}
            files[ERROR_FILE] = json_bytes(redactor.data(error))
        for name, data in list(files.items()):
            if len(data) > config.max_file_bytes:
                del files[name]
                self._capture_errors.append(
                    f"{name}: {len(data)} bytes is over max_file_bytes={config.max_file_bytes};"
                    " left out",
                )
        return files


def _encode(pending: _Pending, redactor: Redactor) -> bytes:
    if pending.kind == "bytes":
        return redactor.bytes(pending.data)
    return json_bytes(redactor.data(pending.data))


def _optional_ids(ids: Mapping[str, str | None]) -> dict[str, str | None]:
    return {k: ids[k] for k in ("sample_id", "experiment", "session_id", "run_id")}


def _session_metrics(pending: _Pending | None) -> dict[str, Any]:
    """Token usage, prompt runs and tool calls recorded in the after-snapshot."""
    if pending is None or not isinstance(pending.data, Mapping):
        return {}
    slices = pending.data.get("slices")
    if not isinstance(slices, Mapping):
        return {}
    runs = [r for r in slices.get(_PROMPT_EXECUTED, ()) if isinstance(r, Mapping)]
    usage = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
    for run in runs:
        run_usage = run.get("usage")
        if isinstance(run_usage, Mapping):
            for key in usage:
                value = run_usage.get(key)
                usage[key] += value if isinstance(value, int) else 0
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return {
        "usage": usage,
        "prompt_runs": len(runs),
        "tool_calls": len(slices.get(_TOOL_INVOKED, ())),
    }


def bundle_recorder(
    config: DebugBundleConfig | None,
    *,
    request_id: str,
    kind: BundleKind = "agent",
    clock: Clock = SYSTEM_CLOCK,
    sample_id: str | None = None,
    experiment: str | None = None,
    session_id: str | None = None,
    run_id: str | None = None,
) -> BundleWriter:
    """Return a `BundleWriter` to wrap around one sample in a `with` block.

    Examples:
        >>> import tempfile
        >>> from weakincentives.clock import FakeClock
        >>> config = DebugBundleConfig(directory=Path(tempfile.mkdtemp()))
        >>> with bundle_recorder(config, request_id="r-1", clock=FakeClock()) as rec:
        ...     rec.set_request({"question": "2 + 2?"})
        ...     rec.set_response({"answer": "4"})
        >>> rec.path.relative_to(config.directory).as_posix()
        'r-1/20240101T000000.000000Z.zip'
    """
    return BundleWriter(
        config,
        request_id=request_id,
        kind=kind,
        clock=clock,
        sample_id=sample_id,
        experiment=experiment,
        session_id=session_id,
        run_id=run_id,
    )
