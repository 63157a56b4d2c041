"""The one redaction policy: a table of planted secrets, each caught by `Redactor`.

`PLANTED` is shared with the tests of every place a run writes or shows (results,
manifests, bundles, logs, viewer, query, HTML report): `tests/helpers/secrets.py`.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.secrets import ENV_SECRETS, PLANTED, assert_no_secret
from weakincentives import _redaction_reading, serde
from weakincentives._redaction_text import alternation as _alternation
from weakincentives._redaction_values import LazyReader, reader
from weakincentives.evals import EvalResult, Fingerprint, Metric, RunStore, Score
from weakincentives.evals._records import ToolCallRecord
from weakincentives.redaction import REDACTED, RedactionPolicy, Redactor, default_redactor
from weakincentives.runtime import ChatMessage, TokenUsage
from weakincentives.runtime.session import ThinkingBlock, ToolCall, TurnUsage


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


# -- `Redactor.finds_in`: the check on a record's values, before it is serialized ----------


@dataclass(frozen=True)
class _Reply:
    text: str
    score: int
    extra: Any = None


class _Pair(NamedTuple):
    text: str
    n: int


@dataclass(frozen=True)
class _Login:
    user: str
    password: str


def _result(**changes: Any) -> EvalResult:
    plain = EvalResult(
        sample_id="task-1", experiment_name="baseline",
        score=Score(value=1.0, passed=True, reason="output equals expected 'a1'"),
        latency_ms=3, output="a1", input="q1", expected="a1",
        messages=(ChatMessage(role="assistant", content="a1"),),
    )  # fmt: skip
    return dataclasses.replace(plain, **changes)


_FULL = _result(
    score=Score(value=1.0, passed=True, reason="ok", metrics=(Metric("m", 1.0),)),
    messages=(
        ChatMessage(
            role="assistant", content="a", tool_calls=(ToolCall(id="1", name="t", arguments="{}"),),
            thinking=(ThinkingBlock(text="hm"),),
        ),
    ),
    tool_calls=(ToolCallRecord(name="t", params={"q": "x"}, message="ok", success=True),),
    turns=(TurnUsage(1, 2, None),), metadata={"k": "v"}, output={"a": ["b"]}, input={"q": "1"},
)  # fmt: skip
"""A result holding every kind of record a result holds."""

Make = Callable[[Mapping[str, str]], Redactor]


@pytest.fixture(params=["loop", "compiled"])
def make_redactor(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Make:
    """Each `finds_in` test twice: records read by the loop of a class's first records, and
    by the fast readers compiled after them (here after one record that meets them all)."""
    compiled = request.param == "compiled"
    monkeypatch.setattr(_redaction_reading, "COMPILE_AFTER", 1 if compiled else 10**9)

    def make(environ: Mapping[str, str]) -> Redactor:
        redactor = RedactionPolicy().redactor(environ=environ)
        if compiled:
            for _ in range(2):  # the first meets every record class, the second compiles
                assert redactor.finds_in(_FULL) is False
            for cls in (EvalResult, Score, ChatMessage, ToolCall, ToolCallRecord):
                assert not isinstance(redactor._classes[cls], LazyReader), cls
        return redactor

    return make


@pytest.mark.parametrize(("name", "text", "secret"), PLANTED, ids=[p[0] for p in PLANTED])
def test_finds_in_sees_every_planted_secret_wherever_a_result_holds_it(
    name: str,
    text: str,
    secret: str,
    make_redactor: Make,
) -> None:
    redactor = make_redactor(ENV_SECRETS)
    assert redactor.finds_in(_result()) is False
    places: list[dict[str, Any]] = [
        {"output": text},
        {"input": ["a", {"nested": (1, text)}]},
        {"metadata": {"note": text}},
        {"score": Score(value=0.0, passed=False, reason=text)},
        {"messages": (ChatMessage(role="user", content=text),)},
        {"output": _Reply(text=text, score=1)},
        {"output": _Reply(text="ok", score=text)},  # type: ignore[arg-type]  # not enforced
        {"error": text, "error_kind": "agent"},
        {"sample_id": text},
        {"output": _Pair(text, 1)},  # a named tuple: its JSON form is its items
    ]
    for change in places:
        assert redactor.finds_in(_result(**change)) is True, (name, change)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"api_key": "plain"}, id="secret-key-in-a-mapping"),
        pytest.param(_Login(user="ada", password="pw"), id="secret-field-of-a-dataclass"),
        pytest.param([{"metadata": {"Authorization": "x"}}], id="nested-secret-key"),
    ],
)
def test_finds_in_sends_a_secret_looking_key_to_the_full_check(
    value: object, make_redactor: Make
) -> None:
    redactor = make_redactor({})
    assert redactor.finds_in(value) is None
    assert redactor.finds(serde.dumps(value).decode())


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(datetime(2026, 1, 2, tzinfo=UTC), id="datetime"),
        pytest.param({1: "int key"}, id="non-string-key"),
        pytest.param({"a", "b"}, id="set"),
        pytest.param(b"bytes", id="bytes"),
        pytest.param(Decimal("1.5"), id="decimal"),
    ],
)
def test_finds_in_cannot_tell_for_values_it_does_not_know(
    value: object, make_redactor: Make
) -> None:
    assert make_redactor({}).finds_in(value) is None


def test_finds_in_leaves_a_cycle_to_the_full_check(make_redactor: Make) -> None:
    loop: list[Any] = ["x"]
    loop.append(loop)
    assert make_redactor({}).finds_in(loop) is None


def test_finds_in_is_false_for_an_ordinary_result_with_usage_and_metadata(
    make_redactor: Make,
) -> None:
    result = _result(
        metadata={"keyword": "math", "topic": "tokens"},
        usage=TokenUsage(input_tokens=10, output_tokens=3),
        output=_Reply(text="a1", score=4, extra=[1.5, None, True]),
    )
    assert make_redactor({}).finds_in(result) is False


def test_finds_in_vouches_for_a_result_with_turns(make_redactor: Make) -> None:
    # Per-turn usage (`TurnUsage`, a named tuple) is on every agent result: a result
    # holding it must not fall back to searching its whole JSON line.
    result = _result(turns=(TurnUsage(17, 4, None), TurnUsage(3, 2, 0.5)))
    assert make_redactor({}).finds_in(result) is False


def test_the_run_store_redacts_a_secret_in_a_custom_field_type(tmp_path: Path) -> None:
    # A value the fast check cannot vouch for (a datetime beside the secret) takes the full
    # path: the line is still written redacted.
    secret = "sk-" + "z" * 24
    result = _result(output={"when": datetime(2026, 1, 2, tzinfo=UTC), "note": secret})
    with RunStore(tmp_path).create(Fingerprint(dataset_sha256="0" * 64, target="t")) as run:
        run.append(result)
        run.append(_result(output=_Reply(text=secret, score=1)))
    text = (run.path / "results.jsonl").read_text()
    assert secret not in text
    assert text.count(REDACTED) == 2


@given(
    words=st.lists(st.text(alphabet="ab_-:k", min_size=1, max_size=4), min_size=1, max_size=8),
    text=st.text(alphabet="ab_-:kx", max_size=30),
)
def test_the_guard_word_search_finds_a_word_exactly_where_one_occurs(
    words: list[str], text: str
) -> None:
    # The guard-word regex (one search per result line) says what `any(w in text)` says.
    found = re.search(_alternation(words), text) is not None
    assert found == any(word in text for word in words)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # One net's find does not hide the next net's: every net reads the text as given.
        ("Bearer\npostgres://ada:pw-1234@db/app", "Bearer\n[REDACTED]://ada:[REDACTED]@db/app"),
        ("token: https://ada:pw-1234@db/x", "token: [REDACTED]"),
        # Overlapping finds are one secret; separate ones stay separate.
        ("api_key=sk-proj-abcdefghijklmnop1234", "api_key=[REDACTED]"),
        ("sk-abcdefghijklmnop1234 and sk-zyxwvutsrqponmlk9876", "[REDACTED] and [REDACTED]"),
        ("password=hunter22-LITERAL-more", "password=[REDACTED]"),
        ("x LITERAL-value y", "x [REDACTED] y"),
    ],
)
def test_every_net_searches_the_text_as_given(text: str, expected: str) -> None:
    redactor = RedactionPolicy(secrets=("LITERAL-value", "LITERAL")).redactor({})
    assert redactor.text(text) == expected


def test_a_keep_group_anywhere_in_a_users_pattern_is_kept() -> None:
    # The text of a match around its `keep` group is replaced; `keep` stays.
    policy = RedactionPolicy(patterns=(r"ab(?P<keep>cd)ef", r"(?P<keep>id=)\d+"))
    assert (
        policy.redactor({}).text("xabcdefy id=42 id=")
        == "x[REDACTED]cd[REDACTED]y id=[REDACTED] id="
    )


_PARTS: list[Any] = ["text", "", None, (), [], ("a", 1), {"k": "v"}, 0, 1.5, True, _Pair("p", 2)]


@pytest.mark.parametrize("names", [("a", "b", "c"), ("a",), (), ("class", "b")])
@pytest.mark.parametrize("seed", range(3))
def test_a_reader_sorts_the_fields_as_a_loop_over_their_values_does(
    names: tuple[str, ...], seed: int
) -> None:
    # What `Redactor._collect` did with a dataclass's field values before readers: strings
    # out, None and `()` dropped, the rest stacked, in field order (a keyword as a field
    # name takes the generic reader).
    rng = random.Random(seed)
    obj = SimpleNamespace(**{name: rng.choice(_PARTS) for name in names})
    expected_out: list[str] = []
    expected_stack: list[Any] = []
    for part in (getattr(obj, name) for name in names):
        if type(part) is str:
            expected_out.append(part)
        elif part is not None and part != ():
            expected_stack.append(part)
    out: list[str] = []
    stack: list[Any] = []
    assert reader(names)(obj, out.append, stack.append) == len(names)
    assert (out, stack) == (expected_out, expected_stack)


class _Shouted(ChatMessage):
    """A message of a subclass: not the declared class, so read as any other value."""


@dataclass(frozen=True)
class _Node:
    text: str
    children: tuple[_Node, ...] = ()
    parent: _Node | None = None


_Node.__module__ = "weakincentives._test_node"  # read as this package's records are


@pytest.mark.parametrize(("name", "text", "secret"), PLANTED[:4], ids=[p[0] for p in PLANTED[:4]])
def test_finds_in_sees_a_secret_in_nested_records_of_any_shape(
    name: str,
    text: str,
    secret: str,
    make_redactor: Make,
) -> None:
    # A result's score, messages and turns are read in place when they hold the declared
    # classes; anything else there is still read.
    redactor = make_redactor({})
    odd: list[dict[str, Any]] = [
        {"messages": (_Shouted(role="user", content=text),)},
        {"messages": (ChatMessage(role="user", content="ok"), text)},
        {"messages": [ChatMessage(role="user", content=text)]},
        {"messages": (ChatMessage(role="user", content={"deep": [text]}),)},  # type: ignore[arg-type]  # a value of the wrong type
        {"turns": (TurnUsage(1, 2, None), text)},
        {"turns": [text]},
        {"score": text},
    ]
    for change in odd:
        assert redactor.finds_in(_result(**change)) is True, (name, change)
    assert redactor.finds_in(_result(turns=(TurnUsage(1, 2, None),))) is False


def test_finds_in_reads_a_record_class_that_holds_itself(make_redactor: Make) -> None:
    redactor = make_redactor({})
    leaf = _Node("sk-proj-abcdefghijklmnop1234567890")
    tree = _Node("root", children=(_Node("a", children=(leaf,)), _Node("b")), parent=_Node("p"))
    assert redactor.finds_in(tree) is True
    assert redactor.finds_in(_Node("root", children=(_Node("a"),), parent=_Node("p"))) is False


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"output": {"api_key": "plain"}}, id="secret-key-in-the-output"),
        pytest.param({"metadata": {"Authorization": "x"}}, id="secret-key-in-the-metadata"),
        pytest.param({"input": {"q": {"password": "x"}}}, id="nested-secret-key"),
        pytest.param({"expected": {1: "int key"}}, id="non-string-key"),
        pytest.param({"environment": {"when": datetime(2026, 1, 2, tzinfo=UTC)}}, id="custom"),
    ],
)
def test_finds_in_cannot_vouch_for_a_result_holding_a_secret_key_or_an_odd_value(
    change: dict[str, Any],
    make_redactor: Make,
) -> None:
    assert make_redactor({}).finds_in(_result(**change)) is None
    assert make_redactor({}).finds_in(_result(output={"ok": "1"})) is False


def test_a_class_is_read_by_its_compiled_reader_only_after_its_first_records() -> None:
    # Compiling a fast reader costs about a millisecond: a process that writes a few
    # results (a cold first run) must not pay it; one that writes many does, once.
    redactor = RedactionPolicy().redactor(environ={})
    for _ in range(3):
        assert redactor.finds_in(_result()) is False
    lazy = redactor._classes[EvalResult]
    assert isinstance(lazy, LazyReader)
    assert lazy.fast is None
    for _ in range(_redaction_reading.COMPILE_AFTER):
        assert redactor.finds_in(_result()) is False
    assert not isinstance(redactor._classes[EvalResult], LazyReader)  # called directly now
    assert lazy.fast is redactor._classes[EvalResult]
    assert redactor.finds_in(_result(output="sk-proj-abcdefghijklmnop1234567890")) is True
