"""Bundles redact with the one policy of `weakincentives.redaction` (re-exported here)."""

from weakincentives.redaction import (
    DEFAULT_SECRET_ENV_NAMES,
    DEFAULT_SECRET_FIELD_NAMES,
    DEFAULT_SECRET_PATTERNS,
    RedactionPolicy,
    Redactor,
)

__all__ = [
    "DEFAULT_SECRET_ENV_NAMES",
    "DEFAULT_SECRET_FIELD_NAMES",
    "DEFAULT_SECRET_PATTERNS",
    "RedactionPolicy",
    "Redactor",
]
