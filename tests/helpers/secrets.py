"""Planted secrets: one table that every test of a place a run writes or shows uses.

`PLANTED` rows are `(name, text holding the secret, the secret)`. `ENV_SECRETS` is an
environment whose secret-looking variables the redactor must also catch (set it with
`monkeypatch.setenv` in tests that read `os.environ`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

__all__ = ["ENV_SECRETS", "PLANTED", "SECRETS", "assert_no_secret", "forms"]

ENV_SECRETS = {
    "MY_SERVICE_TOKEN": 'zq9-planted"secret\\value-7731',
    "DATABASE_URL": "postgres://app:pg-planted-pw-42@db.internal:5432/app",
}

PLANTED: list[tuple[str, str, str]] = [
    ("openai", "key sk-proj-abcdefghijklmnop1234567890 here", "sk-proj-abcdefghijklmnop1234567890"),
    (
        "anthropic",
        "sk-ant-api03-abcdefghijklmnopqrstuv in use",
        "sk-ant-api03-abcdefghijklmnopqrstuv",
    ),
    ("google", "AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSyA1234567890abcdefghijklmnopqrstu"),
    ("huggingface", "hf_abcdefghijklmnopqrstuvwxyz012345", "hf_abcdefghijklmnopqrstuvwxyz012345"),
    ("github", "token ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrstuvwxyz0123"),
    ("aws", "AKIAABCDEFGHIJKLMNOP is the id", "AKIAABCDEFGHIJKLMNOP"),
    (
        "bearer",
        "Authorization: Bearer eyJhbGciOi.payload.signature",
        "eyJhbGciOi.payload.signature",
    ),
    ("password-pair", "connect with password=hunter2-planted now", "hunter2-planted"),
    ("secret-pair", "client secret: s3cr3t-planted-value", "s3cr3t-planted-value"),
    ("api-key-json", '{"api_key": "ak-planted-123456"}', "ak-planted-123456"),
    ("url-credentials", "postgres://ada:url-planted-pw@db:5432/app", "url-planted-pw"),
    ("env-token", 'use zq9-planted"secret\\value-7731 please', 'zq9-planted"secret\\value-7731'),
    ("env-database-url", "pw pg-planted-pw-42 alone", "pg-planted-pw-42"),
]

SECRETS: list[str] = [row[2] for row in PLANTED]
"""Every planted secret, for checks over whole files or screens."""


def forms(secret: str) -> list[str]:
    """The raw secret and its JSON-escaped form (how it would sit in a JSON file)."""
    return [secret, json.dumps(secret)[1:-1]]


def assert_no_secret(text: str | bytes, secrets: Iterable[str] = SECRETS, where: str = "") -> None:
    """Fail naming the secret when any form of one is in `text`."""
    data = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    for secret in secrets:
        for form in forms(secret):
            assert form not in data, f"{secret!r} leaked{' into ' + where if where else ''}"
