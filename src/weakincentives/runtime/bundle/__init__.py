"""Debug bundles: one zip per sample with everything needed to see what happened.

`AgentLoop` and `EvalLoop` wrap each request in `bundle_recorder(config, ...)` when
bundles are enabled. The bundle holds the request and response, session snapshots
before and after, the log records of the sample, metrics, `eval.json` for evaluations
and a manifest with ids, status, timings and a checksum per file. Secrets are redacted
from every file. Read bundles with `weakincentives.debug.DebugBundle`.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> config = DebugBundleConfig(directory=Path(tempfile.mkdtemp()))
    >>> with bundle_recorder(config, request_id="req-1", kind="eval") as rec:
    ...     rec.set_request({"sample": "math-1"})
    >>> rec.path is not None
    True
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from weakincentives.runtime.bundle._config import DebugBundleConfig
    from weakincentives.runtime.bundle._manifest import (
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
        BundleErrorInfo,
        BundleFile,
        BundleIds,
        BundleKind,
        BundleManifest,
        BundleTimings,
    )
    from weakincentives.runtime.bundle._redact import (
        DEFAULT_SECRET_ENV_NAMES,
        DEFAULT_SECRET_FIELD_NAMES,
        DEFAULT_SECRET_PATTERNS,
        RedactionPolicy,
        Redactor,
    )
    from weakincentives.runtime.bundle._writer import (
        BundleWriter,
        SupportsSnapshot,
        bundle_recorder,
    )


__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_FORMAT_VERSION",
    "DEFAULT_SECRET_ENV_NAMES",
    "DEFAULT_SECRET_FIELD_NAMES",
    "DEFAULT_SECRET_PATTERNS",
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
    "BundleWriter",
    "DebugBundleConfig",
    "RedactionPolicy",
    "Redactor",
    "SupportsSnapshot",
    "bundle_recorder",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.runtime.bundle._config": ("DebugBundleConfig",),
        "weakincentives.runtime.bundle._manifest": (
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
        ),
        "weakincentives.runtime.bundle._redact": (
            "DEFAULT_SECRET_ENV_NAMES",
            "DEFAULT_SECRET_FIELD_NAMES",
            "DEFAULT_SECRET_PATTERNS",
            "RedactionPolicy",
            "Redactor",
        ),
        "weakincentives.runtime.bundle._writer": (
            "BundleWriter",
            "SupportsSnapshot",
            "bundle_recorder",
        ),
    },
)
