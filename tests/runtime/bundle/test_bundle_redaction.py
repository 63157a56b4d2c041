from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path
from typing import Any

import pytest

from weakincentives.clock import FakeClock
from weakincentives.runtime.bundle import DebugBundleConfig, RedactionPolicy, bundle_recorder
from weakincentives.runtime.session import Session, ToolInvoked, ToolResult

ENV_SECRET = 'zq9-planted"secret\\value-7731'  # JSON-special characters on purpose
OPENAI_KEY = "sk-proj-abcdefghijklmnop1234567890"
BEARER = "eyJhbGciOiJIUzI1NiJ9.payload.signature"
QUERY_KEY = "qk-5551212-abcdef"
FIELD_SECRET = "correct-horse-battery"


def members_of(path: Path | None) -> dict[str, bytes]:
    assert path is not None
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def forms(secret: str) -> list[bytes]:
    """The raw secret and its JSON-escaped form."""
    return [secret.encode(), json.dumps(secret)[1:-1].encode()]


def test_secrets_never_reach_any_file_of_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_SECRET)
    log = logging.getLogger("tests.bundle.redaction")
    session = Session(clock=FakeClock())
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        rec.set_request(
            {
                "prompt": f"use {ENV_SECRET} and {OPENAI_KEY}",
                "headers": {"Authorization": f"Bearer {BEARER}"},
                "raw_headers": [["Authorization", f"Bearer {BEARER}"]],
                "url": f"https://api.example.com/v1?api_key={QUERY_KEY}&page=2",
                "password": FIELD_SECRET,
                "prompt_key": "greeting",
            }
        )
        session.dispatch(
            ToolInvoked(
                name="login",
                params={"secret": FIELD_SECRET, "user": "ada"},
                result=ToolResult(message=f"logged in with {ENV_SECRET}"),
                success=True,
                call_id="c1",
                duration_ms=1.0,
            )
        )
        rec.set_session_after(session)
        log.info("calling with key %s and token=%s", OPENAI_KEY, ENV_SECRET)
        try:
            raise PermissionError(f"rejected {ENV_SECRET}")
        except PermissionError as exc:
            log.exception("auth failed")
            rec.set_error("agent", exc)
        rec.add_file("env.txt", f"MY_SERVICE_TOKEN={ENV_SECRET}\nAuthorization: Bearer {BEARER}")
        rec.add_file("blob.bin", b"\xff\xfe" + OPENAI_KEY.encode() + b"\x00")

    members = members_of(rec.path)
    assert {"request.json", "session/after.json", "logs.jsonl", "error.json"} <= set(members)
    for name, data in members.items():
        for secret in (ENV_SECRET, OPENAI_KEY, BEARER, QUERY_KEY, FIELD_SECRET):
            for form in forms(secret):
                assert form not in data, f"{secret!r} leaked into {name}"
    request = json.loads(members["request.json"])
    assert request["headers"]["Authorization"] == "[REDACTED]"  # secret field: replaced whole
    assert request["raw_headers"] == [["Authorization", "Bearer [REDACTED]"]]
    assert request["url"] == "https://api.example.com/v1?api_key=[REDACTED]&page=2"
    assert request["password"] == "[REDACTED]"
    assert request["prompt_key"] == "greeting"
    assert request["prompt"] == "use [REDACTED] and [REDACTED]"
    assert b"logged in with [REDACTED]" in members["session/after.json"]
    assert b"user" in members["session/after.json"] and b"ada" in members["session/after.json"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key {OPENAI_KEY} used", "key [REDACTED] used"),
        (f"Authorization: Bearer {BEARER}", "Authorization: Bearer [REDACTED]"),
        (f"OPENAI_API_KEY={QUERY_KEY} next", "OPENAI_API_KEY=[REDACTED] next"),
        ('{"api_key": "abc123"}', '{"api_key": "[REDACTED]"}'),
        ("password: hunter22", "password: [REDACTED]"),
        ("ghp_" + "a1" * 15, "[REDACTED]"),
        ("AKIAABCDEFGHIJKLMNOP", "[REDACTED]"),
        ("used 1200 tokens: fine", "used 1200 tokens: fine"),
        ("the sky is blue", "the sky is blue"),
    ],
)
def test_patterns(text: str, expected: str) -> None:
    assert RedactionPolicy().redactor(environ={}).text(text) == expected


def test_short_or_innocent_environment_values_are_kept() -> None:
    redactor = RedactionPolicy().redactor(
        environ={"TOKENIZERS_PARALLELISM": "false", "HOME": "/home/ada-lovelace"}
    )
    assert redactor.text("false at /home/ada-lovelace") == "false at /home/ada-lovelace"


def test_json_data_keeps_its_types_and_redacts_keys_and_nested_values() -> None:
    redactor = RedactionPolicy(secrets=("s3cr3t",)).redactor(environ={})
    data: Any = {
        "credentials": {"user": "ada", "port": 5432, "tls": True},
        "api_key": None,
        "s3cr3t": "key named after the secret",
        "items": [("a", "s3cr3t")],
        "input_tokens": 12,
    }
    assert redactor.data(data) == {
        "credentials": {"user": "[REDACTED]", "port": 5432, "tls": True},
        "api_key": None,
        "[REDACTED]": "key named after the secret",
        "items": [["a", "[REDACTED]"]],
        "input_tokens": 12,
    }


def test_policy_can_be_widened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERNAL_LICENSE", "lic-0000-1111")
    policy = RedactionPolicy(env_names=r"LICENSE", secrets=("tenant-42",), replacement="***")
    config = DebugBundleConfig(directory=tmp_path, redact=policy)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        rec.set_request({"q": "tenant-42 with lic-0000-1111"})
    assert json.loads(members_of(rec.path)["request.json"]) == {"q": "*** with ***"}
