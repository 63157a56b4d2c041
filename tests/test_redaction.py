"""The one redaction policy: a table of planted secrets, each caught by `Redactor`.

`PLANTED` is shared with the tests of every place a run writes or shows (results,
manifests, bundles, logs, viewer, query, HTML report): `tests/helpers/secrets.py`.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers.secrets import ENV_SECRETS, PLANTED, assert_no_secret
from weakincentives.redaction import REDACTED, RedactionPolicy, default_redactor


@pytest.mark.parametrize(("name", "text", "secret"), PLANTED, ids=[p[0] for p in PLANTED])
def test_every_planted_secret_is_caught_in_text_and_json(name: str, text: str, secret: str) -> None:
    redactor = default_redactor(environ=ENV_SECRETS)

    redacted = redactor.text(text)
    assert secret not in redacted, name
    assert REDACTED in redacted
    line = json.dumps({"input": text})
    assert redactor.finds(line)
    assert secret not in json.dumps(redactor.data({"input": text}))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgres://ada:hunter22@db:5432/app", "postgres://ada:[REDACTED]@db:5432/app"),
        ("redis://:s3cret-pw@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
        ("see https://example.com/a:b@c", "see https://example.com/a:b@c"),  # path, not userinfo
        ("mail ada@example.com at 10:30", "mail ada@example.com at 10:30"),
        ("password=hunter22&user=ada", "password=[REDACTED]&user=ada"),
        ("secret: 'abc-def'", "secret: '[REDACTED]'"),
        ("Authorization: Basic YWRhOmh1bnRlcjI=", "Authorization: Basic [REDACTED]"),
        ("used 1200 tokens: fine", "used 1200 tokens: fine"),
        ("the task-1 answer is 4", "the task-1 answer is 4"),
    ],
)
def test_patterns_keep_what_is_not_secret(text: str, expected: str) -> None:
    assert default_redactor(environ={}).text(text) == expected


def test_env_values_only_the_password_of_a_url_and_no_address_without_one() -> None:
    redactor = RedactionPolicy().redactor(
        environ={
            "DATABASE_URL": "postgres://app:pg-pass-123@db.internal/app",
            "OPENAI_BASE_URL": "http://localhost:8000/v1",
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    out = redactor.text("db.internal with pg-pass-123 via http://localhost:8000/v1, false")
    assert out == "db.internal with [REDACTED] via http://localhost:8000/v1, false"


def test_finds_is_false_on_an_ordinary_result_line() -> None:
    redactor = default_redactor(environ={})
    line = json.dumps(
        {
            "sample_id": "task-1",
            "input": "What is 2 + 2?",
            "usage": {"input_tokens": 10, "output_tokens": 3, "cached_tokens": 0},
            "metadata": {"keyword": "math", "topic": "tokens"},
        }
    )
    assert not redactor.finds(line)
    assert redactor.finds(json.dumps({"metadata": {"client_cookie": 1}}))
    assert redactor.finds(json.dumps({"auth_token": "x"}))


def test_default_redactor_is_made_again_when_the_environment_changes() -> None:
    first = default_redactor(environ={"A_TOKEN": "first-secret-1"})
    assert default_redactor(environ={"A_TOKEN": "first-secret-1"}) is first
    second = default_redactor(environ={"A_TOKEN": "second-secret-2"})
    assert second.text("first-secret-1 second-secret-2") == "first-secret-1 [REDACTED]"
    assert_no_secret(second.text("second-secret-2"), ["second-secret-2"])


def test_log_records_are_redacted_by_the_filter(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from weakincentives.redaction import RedactingFilter

    log = logging.getLogger("tests.redaction")
    caplog.handler.addFilter(RedactingFilter(default_redactor(environ=ENV_SECRETS)))
    with caplog.at_level(logging.INFO, logger="tests.redaction"):
        for _, text, _ in PLANTED:
            log.info("sending %s", text)
        try:
            raise PermissionError(PLANTED[0][1])
        except PermissionError:
            log.exception("failed")
    shown = "\n".join(caplog.handler.format(r) for r in caplog.records)
    assert_no_secret(shown, where="the log")
    assert shown.count("[REDACTED]") >= len(PLANTED)
