"""What a run writes for a result is exactly its JSON form as `Redactor.data` leaves it.

The run store checks each result for secrets cheaply and redacts only when the check
says so (`store/_lines.py`). Whatever path a result takes, the line on disk must parse to
`redactor.data(<the result's JSON form>)`: every secret redacted where `data` redacts it
(any field, nested, in the transcript, an error message, a tool call, a custom type),
nothing changed where it changes nothing. Results here are built from the planted
secrets of `tests/helpers/secrets.py` at seeded random places, escapes and non-ASCII
text included, and compared with that reference line by line.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.secrets import ENV_SECRETS, PLANTED, SECRETS, forms
from weakincentives import serde
from weakincentives._redaction_text import alternation as _alternation
from weakincentives.evals import EvalResult, Fingerprint, RunStore, Score
from weakincentives.evals._records import ToolCallRecord
from weakincentives.redaction import default_redactor
from weakincentives.runtime.session import ChatMessage, TokenUsage

FILLERS = [
    "a1", "q17", "output equals expected 'a1'", "naïve café ✓", 'quote " and \\ backslash',
    "line\nbreak\ttab", "tokens", "input_tokens", "the key is here", "Bearer:", "://",
    "", "x" * 300, "You are a careful grader. " * 200,
]  # fmt: skip


def _text(rng: random.Random, secret: str | None) -> str:
    words = [rng.choice(FILLERS) for _ in range(rng.randint(0, 3))]
    if secret is not None:
        words.insert(rng.randint(0, len(words)), secret)
    return rng.choice([" ", "\n", ""]).join(words)


def _result(rng: random.Random, place: str, secret: str | None) -> EvalResult:
    def text(here: str) -> str:
        return _text(rng, secret if here == place else None)

    output: Any = text("output")
    if place == "nested":
        output = {"answer": [1, {"deep": (_text(rng, secret), 2.5)}], "ok": True}
    elif place == "custom":  # a value the quick check cannot vouch for
        output = {"when": datetime(2026, 1, 2, tzinfo=UTC), "note": _text(rng, secret)}
    elif place == "key":
        output = {_text(rng, secret) or "k": "value"}
    return EvalResult(
        sample_id=text("sample_id") or "s", experiment_name="baseline",
        score=Score(value=0.0, passed=False, reason=text("reason")),
        latency_ms=rng.randint(0, 99), error=text("error") or None,
        error_kind="agent" if place == "error" else None,
        request_id="3bfb0d89-13d0-485b-ad07-8feea5538357",
        usage=TokenUsage(input_tokens=rng.randint(0, 9), output_tokens=1),
        metadata={"topic": text("metadata"), "n": rng.randint(0, 5)},
        output=output, input=text("input"), expected=text("expected"),
        messages=(
            ChatMessage(role="user", content=text("transcript")),
            ChatMessage(role="assistant", content=text("answer")),
        ),
        tool_calls=(
            ToolCallRecord(name="lookup", params={"q": text("tool")}, message="ok", success=True),
        ),
    )  # fmt: skip


PLACES = [
    "output", "nested", "custom", "key", "sample_id", "reason", "error", "metadata",
    "input", "expected", "transcript", "answer", "tool",
]  # fmt: skip


def _written(tmp_path: Path, results: list[EvalResult]) -> list[dict[str, Any]]:
    store = RunStore(tmp_path / "runs")
    with store.create(Fingerprint(dataset_sha256="0" * 64, target="t"), run_id="r") as run:
        for result in results[: len(results) // 2]:
            run.append(result)
        run.extend(results[len(results) // 2 :])
    lines = (tmp_path / "runs" / "r" / "results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in lines.splitlines()]


def _reference(result: EvalResult) -> Any:
    redactor = default_redactor()
    stamped = dataclasses.replace(result, run_id="r")
    return redactor.data(json.loads(serde.dumps(stamped)))


@pytest.mark.parametrize("seed", range(4))
def test_every_line_is_the_result_as_redaction_leaves_it(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV_SECRETS.items():
        monkeypatch.setenv(name, value)
    rng = random.Random(seed)
    planted = [None, *(text for _, text, _ in PLANTED)]  # each secret in its context
    results = [_result(rng, place, text) for place in PLACES for text in planted]
    written = _written(tmp_path, results)
    assert written == [_reference(r) for r in results]
    dumped = json.dumps(written, ensure_ascii=False)
    for secret in SECRETS:
        for form in forms(secret):
            assert form not in dumped


def test_a_secret_split_across_two_fields_is_kept_as_redaction_keeps_it(
    tmp_path: Path,
) -> None:
    # Redaction works per string: each half alone is no secret, as before.
    secret = "sk-proj-abcdefghijklmnop1234567890"
    half = len(secret) // 2
    result = _result(random.Random(0), "none", None)
    result = dataclasses.replace(result, output=secret[:half], expected=secret[half:])
    assert _written(tmp_path, [result, result]) == [_reference(result)] * 2


def test_a_plain_result_line_is_written_as_serialized(tmp_path: Path) -> None:
    result = _result(random.Random(1), "none", None)
    stamped = dataclasses.replace(result, run_id="r")
    _written(tmp_path, [result, result])
    line = (tmp_path / "runs" / "r" / "results.jsonl").read_bytes().splitlines()[0]
    assert line == serde.dumps(stamped)  # no secret: the serializer's own bytes


def test_a_long_string_found_clean_is_searched_once_per_redactor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    redactor = default_redactor(environ={})
    prompt = "You are a careful grader; answer with the code only. " * 100  # 5,300 chars
    searched: list[int] = []
    real = redactor._finds_secret

    def spy(text: str, lower: str) -> bool:
        searched.append(len(text))
        return real(text, lower)

    monkeypatch.setattr(redactor, "_finds_secret", spy)

    def record(output: str, system: str = prompt) -> EvalResult:
        result = _result(random.Random(3), "none", None)
        messages = (ChatMessage(role="system", content=system), *result.messages)
        return dataclasses.replace(result, output=output, messages=messages)

    assert redactor.finds_in(record("a1")) is False
    assert redactor.finds_in(record("a2")) is False
    assert redactor.finds_in(record("a3")) is False
    assert sum(n >= len(prompt) for n in searched) == 2  # the first record, then alone
    key = "sk-proj-abcdefghijklmnop1234567890"
    assert redactor.finds_in(record(key)) is True  # the rest is still searched
    assert redactor.finds_in(record("a4", prompt + key)) is True  # a new long string
    assert redactor.finds_in(record("a5", key + " " * 600)) is True


@pytest.mark.parametrize("seed", range(3))
def test_the_guard_words_trie_matches_where_the_plain_alternation_does(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "abk-_:/sx."
    words = {"".join(rng.choices(alphabet, k=rng.randint(1, 4))) for _ in range(12)}
    trie = re.compile(_alternation(words))
    plain = re.compile("|".join(map(re.escape, words)))
    for _ in range(3000):
        text = "".join(rng.choices(alphabet + "yz", k=rng.randint(0, 12)))
        assert (trie.search(text) is None) == (plain.search(text) is None), (words, text)


def test_a_bearer_word_right_before_a_url_with_a_password() -> None:
    redactor = default_redactor(environ={})
    assert "pw-1234" not in redactor.text("Bearer\npostgres://ada:pw-1234@db/app")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Bearer\nabcdefgh12345678", "abcdefgh12345678"),
        ("Authorization: Basic\tQWxhZGRpbjpvcGVu", "QWxhZGRpbjpvcGVu"),
        ("password =\nhunter2-planted", "hunter2-planted"),
    ],
)
def test_a_secret_after_an_escaped_blank_is_redacted_beside_a_custom_value(
    text: str, secret: str, tmp_path: Path
) -> None:
    # A custom value (a datetime) sends the line to the check of its JSON form, where a
    # newline or a tab is an escape (`\n`), not the blank the pattern needs.
    result = _result(random.Random(0), "none", None)
    output = {"when": datetime(2026, 1, 2, tzinfo=UTC), "note": text}
    result = dataclasses.replace(result, output=output)
    assert _written(tmp_path, [result, result]) == [_reference(result)] * 2
    line = (tmp_path / "runs" / "r" / "results.jsonl").read_text(encoding="utf-8")
    assert secret not in line
