"""Configuration of debug bundle capture."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from weakincentives.errors import ConfigurationError
from weakincentives.runtime.bundle._redact import RedactionPolicy

__all__ = ["DebugBundleConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DebugBundleConfig:
    """Where and what to write when debug bundles are enabled.

    Examples:
        >>> DebugBundleConfig(directory=Path("eval_bundles")).include_logs
        True
    """

    directory: Path
    """Bundles go to `<directory>/<request_id>/<timestamp>.zip`."""
    include_logs: bool = True
    """Capture the log records emitted while the sample runs into `logs.jsonl`."""
    log_level: int = logging.DEBUG
    """Lowest level captured. While any bundle is recording, the root logger's level is
    lowered to this so the records reach the capture; give your own root handlers a level
    if they should not see more than before."""
    max_log_records: int = 10_000
    """Records past this many are counted in the manifest (`logs_dropped`), not kept."""
    max_file_bytes: int = 16 * 1024 * 1024
    """A file larger than this is left out (and named in the manifest's `capture_errors`),
    which keeps every bundle well under the reader's size limits."""
    redact: RedactionPolicy = field(default_factory=RedactionPolicy)
    """What counts as a secret; redaction always runs."""

    def __post_init__(self) -> None:
        if self.max_log_records < 0:
            raise ConfigurationError(
                f"max_log_records must be >= 0, got {self.max_log_records}",
            )
        if self.max_file_bytes <= 0:
            raise ConfigurationError(f"max_file_bytes must be > 0, got {self.max_file_bytes}")
