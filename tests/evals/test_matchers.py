"""`regex_match`, `regex_search`, `json_equal`, `numeric_close`."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import pytest

from weakincentives.errors import ConfigurationError, InvalidDatasetError
from weakincentives.evals.scoring._matchers import (
    json_equal,
    numeric_close,
    regex_match,
    regex_search,
)
from weakincentives.evals.scoring._protocols import evaluator_name

# -- regular expressions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "passed", "reason"),
    [
        ("2024-01-31", True, r"output matches /\d{4}-\d{2}-\d{2}/"),
        (
            "on 2024-01-31",
            False,
            r"output 'on 2024-01-31' does not fully match /\d{4}-\d{2}-\d{2}/",
        ),
    ],
)
def test_regex_match_needs_the_whole_output(output: str, passed: bool, reason: str) -> None:
    score = regex_match(r"\d{4}-\d{2}-\d{2}")(output, None)
    assert (score.passed, score.reason) == (passed, reason)


@pytest.mark.parametrize(
    ("output", "passed", "reason"),
    [
        ("on 2024-01-31, yes", True, r"found '2024-01-31' at 3 for /\d{4}-\d{2}-\d{2}/"),
        ("no date", False, r"no match for /\d{4}-\d{2}-\d{2}/ in output 'no date'"),
    ],
)
def test_regex_search_finds_the_pattern_anywhere(output: str, passed: bool, reason: str) -> None:
    score = regex_search(r"\d{4}-\d{2}-\d{2}")(output, None)
    assert (score.passed, score.reason) == (passed, reason)


def test_regex_flags_apply() -> None:
    assert not regex_search("paris")("PARIS", None).passed
    assert regex_search("paris", re.IGNORECASE)("PARIS", None).passed
    assert regex_match(re.compile("paris"), re.IGNORECASE)("Paris", None).passed


def test_without_a_pattern_the_expected_value_is_the_pattern() -> None:
    evaluator = regex_match()
    assert evaluator("abc123", r"[a-z]+\d+").passed
    assert not evaluator("abc", r"\d+").passed
    assert evaluator_name(evaluator) == "regex_match(expected)"


def test_regex_names_show_the_pattern() -> None:
    assert evaluator_name(regex_search(r"\d+")) == r"regex_search(/\d+/)"


def test_a_pattern_that_does_not_compile_fails_at_creation() -> None:
    with pytest.raises(ConfigurationError, match=r"pattern '\(' does not compile"):
        regex_match("(")


@pytest.mark.parametrize("expected", ["(", 42])
def test_a_bad_per_sample_pattern_is_a_dataset_error(expected: Any) -> None:
    with pytest.raises(InvalidDatasetError, match="expected"):
        regex_search()("text", expected)


def test_regex_needs_text_output() -> None:
    with pytest.raises(ConfigurationError, match="regex_match needs a str output, got int"):
        regex_match(r"\d+")(42, None)


# -- json_equal ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    city: str
    population: int


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ('{"b": 2, "a": 1}', '{"a": 1, "b": 2}'),
        ('{"b": 2, "a": 1}', {"a": 1, "b": 2}),
        ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
        (Answer("Paris", 2), {"population": 2, "city": "Paris"}),
        ("[1, 2.0]", [1.0, 2]),
        (b'{"a": null}', {"a": None}),
    ],
)
def test_json_equal_compares_structures(output: object, expected: object) -> None:
    score = json_equal(output, expected)
    assert score.passed, score.reason
    assert score.reason == "output JSON equals expected"


@pytest.mark.parametrize(
    ("output", "expected", "reason"),
    [
        ('{"a": {"b": 3}}', {"a": {"b": 2}}, "at $.a.b: expected 2, got 3"),
        ('{"a": 1}', {"a": 1, "b": 2}, "at $: missing key 'b' (expected 2)"),
        ('{"a": 1, "c": 3}', {"a": 1}, "at $: unexpected keys ['c']; expected only ['a']"),
        ("[2, 1]", [1, 2], "at $[0]: expected 1, got 2"),
        ("[1]", [1, 2], "at $: expected 2 items, got 1: [1]"),
        ('{"ok": 1}', {"ok": True}, "at $.ok: expected True, got 1"),
        ('{"x": [{"y": "a"}]}', {"x": [{"y": "b"}]}, "at $.x[0].y: expected 'b', got 'a'"),
    ],
)
def test_json_equal_reports_the_first_difference(
    output: object, expected: object, reason: str
) -> None:
    score = json_equal(output, expected)
    assert (score.passed, score.reason) == (False, reason)


def test_json_equal_can_ignore_extra_keys_at_every_depth() -> None:
    lenient = functools.partial(json_equal, ignore_extra_keys=True)
    score = lenient('{"a": {"b": 2, "debug": true}, "trace": []}', {"a": {"b": 2}})
    assert (score.passed, score.reason) == (
        True,
        "output JSON equals expected (extra keys ignored)",
    )
    assert not lenient('{"a": {"debug": true}}', {"a": {"b": 2}}).passed
    assert evaluator_name(lenient) == "json_equal(ignore_extra_keys=True)"


def test_output_that_is_not_json_fails_with_the_parse_error() -> None:
    score = json_equal("The answer is {a: 1}", {"a": 1})
    assert score.passed is False
    assert score.reason.startswith("output is not valid JSON (Expecting value: line 1 column 1")
    assert score.reason.endswith("'The answer is {a: 1}'")


def test_expected_that_is_not_json_is_a_dataset_error() -> None:
    with pytest.raises(InvalidDatasetError, match="json_equal: expected is not valid JSON"):
        json_equal("{}", "{oops")


# -- numeric_close ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected", "passed"),
    [
        ("42", 42, True),
        ("The answer is 1,234.", "1234", True),
        ("First 3 apples, then 5 pears: 8", 8, True),
        ("-0.5", "-.5", True),
        ("1e3", 1000, True),
        (42.0, "42", True),
        ("41", 42, False),
        ("Total: $1,234,567.50", 1234567.5, True),
    ],
)
def test_numeric_close_reads_numbers_from_text(
    output: object, expected: object, passed: bool
) -> None:
    assert numeric_close()(output, expected).passed is passed


def test_numeric_close_tolerances() -> None:
    assert numeric_close(abs_tol=0.01)("3.141", 3.14).passed
    assert not numeric_close(abs_tol=0.0001)("3.141", 3.14).passed
    assert numeric_close(rel_tol=0.01)("1005", 1000).passed
    assert not numeric_close(rel_tol=0.001)("1005", 1000).passed


def test_numeric_close_reasons_state_found_and_expected() -> None:
    close = numeric_close(abs_tol=0.01)
    assert close("about 3.2", 3.14).reason == (
        "output 3.2 differs from expected 3.14 by 0.06 (rel_tol=1e-09, abs_tol=0.01)"
    )
    assert close("3.141", 3.14).reason == (
        "output 3.141 is within tolerance of expected 3.14 (rel_tol=1e-09, abs_tol=0.01)"
    )
    missing = close("no idea", 3.14)
    assert (missing.passed, missing.reason) == (
        False,
        "no number found in output 'no idea'; expected 3.14",
    )


@pytest.mark.parametrize("output", [True, None, ["1"]])
def test_numeric_close_fails_outputs_that_are_not_numbers(output: object) -> None:
    assert numeric_close()(output, 1).reason.startswith("no number found in output")


@pytest.mark.parametrize("expected", ["many", True, None])
def test_numeric_close_needs_a_numeric_expected(expected: object) -> None:
    with pytest.raises(InvalidDatasetError, match=r"numeric_close: expected .* is not a number"):
        numeric_close()("1", expected)


@pytest.mark.parametrize(
    "kwargs", [{"rel_tol": -0.1}, {"abs_tol": float("inf")}, {"abs_tol": "0.1"}]
)
def test_numeric_close_rejects_bad_tolerances(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="must be a finite number >= 0"):
        numeric_close(**kwargs)


def test_numeric_close_names_its_options() -> None:
    assert evaluator_name(numeric_close()) == "numeric_close()"
    assert evaluator_name(numeric_close(abs_tol=0.5)) == "numeric_close(abs_tol=0.5)"
