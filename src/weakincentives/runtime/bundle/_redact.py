"""Redaction: API keys, tokens and passwords never reach a bundle.

Three nets, applied to every string of every file (JSON values and keys, log messages,
extra text files):

1. literal secrets: the values of environment variables whose names look secret
   (`OPENAI_API_KEY`, `GITHUB_TOKEN`, `DB_PASSWORD`...), read when the bundle is written,
   plus `RedactionPolicy.secrets`;
2. patterns: `sk-...` keys, `Bearer <token>`, `api_key=...`, GitHub, AWS and Slack tokens;
3. field names: in JSON data, string values under keys such as `api_key`, `password` or
   `authorization` are replaced whole.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_SECRET_ENV_NAMES",
    "DEFAULT_SECRET_FIELD_NAMES",
    "DEFAULT_SECRET_PATTERNS",
    "RedactionPolicy",
    "Redactor",
]

DEFAULT_SECRET_ENV_NAMES = r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL"
"""Environment variables whose names contain one of these (any case) hold secrets."""

DEFAULT_SECRET_FIELD_NAMES = (
    r"api[_-]?key|secret|passw(?:or)?d|authorization|cookie|credentials?"
    r"|private[_-]?key|(?:access|auth|refresh|bearer|id)[_-]?token|^token$"
)
"""JSON keys (any case) whose string values are replaced whole."""

_KV_NAMES = r"api[_-]?key|access[_-]?key|secret|password|passwd|token"
DEFAULT_SECRET_PATTERNS: tuple[str, ...] = (
    r"sk-[A-Za-z0-9_-]{16,}",  # OpenAI and Anthropic style API keys
    r"(?P<keep>(?i:bearer)\s+)[A-Za-z0-9._~+/=-]{8,}",  # Authorization: Bearer <token>
    rf"(?P<keep>(?i:{_KV_NAMES})[\"']?\s*[=:]\s*[\"']?)[^\s\"'&,;]+",  # api_key=..., token: ...
    r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
    r"AKIA[0-9A-Z]{16}",  # AWS access key ids
    r"xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack tokens
)
"""Regular expressions of secrets. A match is replaced; a named group `keep` (the
`api_key=` in `api_key=abc`) is kept in front of the replacement."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RedactionPolicy:
    """What counts as a secret. Redaction cannot be turned off; it can be widened.

    Example:
        >>> r = RedactionPolicy(secrets=("hunter2-hunter2",)).redactor(environ={})
        >>> r.text("pw is hunter2-hunter2, key sk-abcdefghijklmnopqrstu")
        'pw is [REDACTED], key [REDACTED]'
    """

    env_names: str = DEFAULT_SECRET_ENV_NAMES
    """Regex searched (case-insensitively) in environment variable names; the values of
    matching variables are redacted wherever they appear."""
    field_names: str = DEFAULT_SECRET_FIELD_NAMES
    """Regex searched (case-insensitively) in JSON keys; string values under a matching
    key are replaced whole."""
    patterns: tuple[str, ...] = DEFAULT_SECRET_PATTERNS
    """Regexes of secrets found in any text (see `DEFAULT_SECRET_PATTERNS`)."""
    secrets: tuple[str, ...] = ()
    """Extra literal values to redact (any length)."""
    min_env_value_length: int = 8
    """Environment values shorter than this are not treated as secrets: `TOKENIZERS_
    PARALLELISM=false` must not turn every "false" into the replacement."""
    replacement: str = "[REDACTED]"
    """What a secret is replaced with."""

    def redactor(self, environ: Mapping[str, str]) -> Redactor:
        """Compile the policy against `environ` (pass `os.environ` at write time)."""
        names = re.compile(self.env_names, re.IGNORECASE)
        literals = {
            value
            for name, value in environ.items()
            if names.search(name) and len(value) >= self.min_env_value_length
        }
        literals.update(s for s in self.secrets if s)
        return Redactor(
            literals=tuple(sorted(literals, key=len, reverse=True)),
            patterns=tuple(re.compile(p) for p in self.patterns),
            field_names=re.compile(self.field_names, re.IGNORECASE),
            replacement=self.replacement,
        )


class Redactor:
    """A compiled `RedactionPolicy`: replaces secrets in text, bytes and JSON data."""

    def __init__(
        self,
        *,
        literals: tuple[str, ...],
        patterns: tuple[re.Pattern[str], ...],
        field_names: re.Pattern[str],
        replacement: str,
    ) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self._literals = re.compile("|".join(re.escape(s) for s in literals)) if literals else None
        self._patterns = patterns
        self._fields = field_names
        self._replacement = replacement

    def _sub(self, match: re.Match[str]) -> str:
        keep = match.groupdict().get("keep")
        return (keep or "") + self._replacement

    def text(self, text: str) -> str:
        """Return `text` with every secret replaced."""
        if self._literals is not None:
            text = self._literals.sub(self._replacement, text)
        for pattern in self._patterns:
            text = pattern.sub(self._sub, text)
        return text

    def bytes(self, data: bytes) -> bytes:
        """Redact bytes as UTF-8 text; undecodable bytes pass through unchanged."""
        text = data.decode("utf-8", errors="surrogateescape")
        return self.text(text).encode("utf-8", errors="surrogateescape")

    def data(self, value: Any, *, under_secret_key: bool = False) -> Any:
        """Return a copy of JSON-compatible `value` with every string (keys too) redacted.

        Strings under a secret-looking key are replaced whole; numbers, booleans and None
        are kept so a redacted snapshot still has its types.
        """
        if isinstance(value, str):
            return self._replacement if under_secret_key and value else self.text(value)
        if isinstance(value, Mapping):
            return {
                (self.text(k) if isinstance(k, str) else k): self.data(
                    v,
                    under_secret_key=under_secret_key
                    or (isinstance(k, str) and self._fields.search(k) is not None),
                )
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.data(v, under_secret_key=under_secret_key) for v in value]
        return value
