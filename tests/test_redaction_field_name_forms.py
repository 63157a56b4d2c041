"""Secret field names written with compatibility characters are still secret names.

`secret` in fullwidth letters (U+FF53 U+FF45...) or `api_key` in mathematical bold
letters read as `secret` and `api_key` to anyone, and Unicode's compatibility
normalization (NFKC) says so too: the values under them, and after them in prose
(`secret: value`), are replaced like those of the plain names, in `Redactor.data`,
`Redactor.text`, the check a run store makes before writing a result, and the line it
writes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from weakincentives.evals import Sample, exact_match, run_eval
from weakincentives.redaction import default_redactor

VALUE = "hunter2-is-the-value"


def fullwidth(text: str) -> str:
    """ASCII letters and punctuation as their fullwidth forms (U+FF01...)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def bold(text: str) -> str:
    """ASCII small letters as mathematical bold small letters (U+1D41A...)."""
    return "".join(chr(0x1D41A + ord(c) - ord("a")) if "a" <= c <= "z" else c for c in text)


NAMES = [
    fullwidth("s") + "ecret", fullwidth("API_KEY"), fullwidth("password"),
    "access_" + fullwidth("token"), fullwidth("Cookie"), bold("api") + "_key",
]  # fmt: skip
CYRILLIC_DZE = "\u0455"  # looks like `s`; NFKC keeps it a Cyrillic letter


@pytest.mark.parametrize("name", NAMES)
def test_data_replaces_the_value_under_a_compatibility_form_of_a_secret_name(name: str) -> None:
    redactor = default_redactor({})

    cleaned = redactor.data({"outer": {name: VALUE}})

    assert cleaned == {"outer": {name: redactor.replacement}}


@pytest.mark.parametrize("name", NAMES)
def test_the_write_check_finds_the_value_under_such_a_name(name: str) -> None:
    assert default_redactor({}).finds_in({name: VALUE}) is not False


def test_names_that_only_look_alike_in_another_script_are_left_alone() -> None:
    redactor = default_redactor({})
    plain = {CYRILLIC_DZE + "ecret": "kept"}

    assert redactor.data(plain) == plain


def test_a_stored_result_never_holds_the_value_in_clear(tmp_path: Path) -> None:
    # The value is in the input, the output and the evaluator's reason (a repr).
    sample = Sample(id="s1", input={fullwidth("s") + "ecret": VALUE}, expected="x")

    run_eval([sample], lambda value: value, exact_match, store=tmp_path)

    (run,) = [path for path in tmp_path.iterdir() if path.is_dir()]
    line = (run / "results.jsonl").read_text(encoding="utf-8")
    assert VALUE not in line
    assert '"sample_id":"s1"' in line


@pytest.mark.parametrize(
    "text",
    [
        f"got {{'{fullwidth('s')}ecret': '{VALUE}'}} (dict)",
        f"{fullwidth('password=')}{VALUE}",
        f"{bold('api')}_{bold('key')}: {VALUE}",
    ],
)
def test_prose_with_such_a_name_is_redacted_in_place(text: str) -> None:
    redactor = default_redactor({})

    cleaned = redactor.text(text)

    assert VALUE not in cleaned
    assert cleaned.split(redactor.replacement)[0] == text.split("hunter2")[0]  # rest kept


def test_text_in_other_scripts_and_its_fullwidth_punctuation_is_left_as_written() -> None:
    text = "\u65e5\u672c\u8a9e\uff0c\u30c6\u30ad\u30b9\u30c8\uff1a" + fullwidth("The end")

    assert default_redactor({}).text(text) == text
