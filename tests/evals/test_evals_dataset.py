from __future__ import annotations

import inspect
import json
import re
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from weakincentives.errors import InvalidDatasetError
from weakincentives.evals import Dataset, Sample, dataset_sha256, iter_jsonl, load_jsonl


@dataclass(frozen=True)
class Question:
    question: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answer:
    text: str
    score: int | str
    aliases: list[str] = field(default_factory=list)
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Exam:
    title: str
    questions: list[Question]


def write(tmp_path: Path, *lines: str | dict[str, Any], name: str = "data.jsonl") -> Path:
    path = tmp_path / name
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


def samples(n: int) -> tuple[Sample[str, str], ...]:
    return tuple(Sample(id=f"s{i}", input=f"q{i}", expected=f"a{i}") for i in range(n))


# -- construction and sequence behaviour -------------------------------------------------


def test_dataset_is_an_immutable_sequence_of_samples() -> None:
    ds = Dataset(samples=samples(5))
    assert len(ds) == 5
    assert [s.id for s in ds] == ["s0", "s1", "s2", "s3", "s4"]
    assert ds[0].id == "s0"
    assert ds[-1].id == "s4"
    with pytest.raises(AttributeError):
        ds.samples = ()  # type: ignore[misc]  # frozen: the assignment must fail


def test_slicing_returns_a_dataset() -> None:
    ds = Dataset(samples=samples(10))
    head = ds[:3]
    assert isinstance(head, Dataset)
    assert head.ids == ("s0", "s1", "s2")
    assert ds[::4].ids == ("s0", "s4", "s8")
    assert len(ds[20:]) == 0
    # the guide's progressive-run pattern
    assert Dataset(samples=ds.samples[:2]).ids == ("s0", "s1")


def test_list_of_samples_is_stored_as_a_tuple() -> None:
    ds: Dataset[str, str] = Dataset(samples=list(samples(2)))  # type: ignore[arg-type]  # lists are accepted
    assert isinstance(ds.samples, tuple)


def test_duplicate_ids_in_memory_are_rejected_with_both_positions() -> None:
    dup = (*samples(3), Sample(id="s1", input="x", expected="y"))
    with pytest.raises(InvalidDatasetError, match=r"duplicate sample id 's1' at positions 1 and 3"):
        Dataset(samples=dup)


def test_non_sample_items_are_rejected() -> None:
    with pytest.raises(InvalidDatasetError, match="item 1 is a dict, not a Sample"):
        Dataset(samples=(samples(1)[0], {"id": "x"}))  # type: ignore[arg-type]  # on purpose


def test_filter_head_get_and_from_samples() -> None:
    ds = Dataset.from_samples(s for s in samples(6))
    assert ds.filter(lambda s: s.id in {"s1", "s4"}).ids == ("s1", "s4")
    assert ds.head(2).ids == ("s0", "s1")
    assert ds.head(-1).ids == ()
    found = ds.get("s3")
    assert found is not None
    assert found.input == "q3"
    assert ds.get("nope") is None


# -- loading ------------------------------------------------------------------------------


def test_load_reads_the_spec_format(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"id": "q1", "input": "What is the capital of France?", "expected": "Paris"},
        "",
        "   ",
        {"id": "q2", "input": "What is 10 + 5?", "expected": "15", "metadata": {"topic": "math"}},
    )
    ds = Dataset.load(path, str, str)
    assert ds.ids == ("q1", "q2")
    assert ds[1] == Sample(
        id="q2", input="What is 10 + 5?", expected="15", metadata={"topic": "math"}
    )
    assert ds[0].metadata == {}
    assert load_jsonl(path, str, str) == ds


def test_load_accepts_a_string_path_crlf_and_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "input": "x", "expected": "y"}\r\n')
    assert Dataset.load(str(path), str, str).ids == ("a",)


def test_load_coerces_nested_dataclasses_lists_dicts_and_unions(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "id": "e1",
            "input": {"title": "T", "questions": [{"question": "a?", "choices": ["x", "y"]}]},
            "expected": {"text": "x", "score": 3, "aliases": ["ex"], "extra": {"w": 1}},
        },
        {
            "id": "e2",
            "input": {"title": "U", "questions": []},
            "expected": {"text": "z", "score": "A"},
        },
    )
    ds = Dataset.load(path, Exam, Answer)
    assert ds[0].input == Exam(title="T", questions=[Question(question="a?", choices=("x", "y"))])
    assert ds[0].expected == Answer(text="x", score=3, aliases=["ex"], extra={"w": 1.0})
    assert ds[1].expected.score == "A"


def test_top_level_union_and_container_types(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"id": "1", "input": [1, 2, 3], "expected": 4},
        {"id": "2", "input": [5], "expected": "five"},
    )
    ds = Dataset.load(path, list[int], cast(Any, int | str))
    assert [s.expected for s in ds] == [4, "five"]
    assert ds[0].input == [1, 2, 3]


def test_integer_ids_become_strings(tmp_path: Path) -> None:
    path = write(tmp_path, {"id": 7, "input": "x", "expected": "y"})
    assert Dataset.load(path, str, str).ids == ("7",)


def test_expected_may_be_omitted_when_its_type_accepts_none(tmp_path: Path) -> None:
    path = write(tmp_path, {"id": "a", "input": "x"})
    ds = Dataset.load(path, str, cast(Any, str | None))
    assert ds[0].expected is None


BAD_LINES: list[tuple[str, str, type[Any], str]] = [
    (
        "not-json",
        '{"id": "a", "input": }',
        str,
        r":2: not valid JSON: Expecting value at column 22",
    ),
    ("array", "[1, 2]", str, r":2: expected a JSON object with id, input and expected, got array"),
    ("string", '"hello"', str, r":2: expected a JSON object .*got string"),
    ("missing-input", '{"id": "b", "expected": "y"}', str, r":2: missing field 'input'"),
    ("missing-expected", '{"id": "b", "input": "x"}', str, r":2: missing field 'expected'"),
    (
        "unknown-key",
        '{"id": "b", "input": "x", "answer": "y"}',
        str,
        r":2: missing field 'expected'; unknown field 'answer'; a sample holds id, input, expected",
    ),
    (
        "float-id",
        '{"id": 1.5, "input": "x", "expected": "y"}',
        str,
        r":2: field 'id' must be a non-empty string \(or an integer\), got number",
    ),
    (
        "bool-id",
        '{"id": true, "input": "x", "expected": "y"}',
        str,
        r":2: field 'id' .* got boolean",
    ),
    ("null-id", '{"id": null, "input": "x", "expected": "y"}', str, r":2: field 'id' .* got null"),
    (
        "empty-id",
        '{"id": "", "input": "x", "expected": "y"}',
        str,
        r":2: field 'id' .* got an empty string",
    ),
    (
        "wrong-input-type",
        '{"id": "b", "input": 5, "expected": "y"}',
        str,
        r":2: field 'input': Input should be a valid string \(got integer\)",
    ),
    (
        "metadata-not-object",
        '{"id": "b", "input": "x", "expected": "y", "metadata": [1]}',
        str,
        r":2: field 'metadata' must be an object, got array",
    ),
    (
        "duplicate-id",
        '{"id": "a", "input": "x", "expected": "y"}',
        str,
        r":2: field 'id': duplicate id 'a' \(first on line 1\)",
    ),
]


@pytest.mark.parametrize(
    ("line", "input_type", "message"),
    [pytest.param(line, tp, msg, id=case) for case, line, tp, msg in BAD_LINES],
)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, line: str, input_type: type[Any], message: str
) -> None:
    path = write(tmp_path, {"id": "a", "input": "ok", "expected": "ok"}, line)
    with pytest.raises(InvalidDatasetError, match=re.escape(str(path)) + message):
        Dataset.load(path, input_type, str)


def test_integer_and_string_ids_that_collide_are_duplicates(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"id": 1, "input": "x", "expected": "y"},
        {"id": "2", "input": "x", "expected": "y"},
        {"id": "1", "input": "x", "expected": "y"},
    )
    with pytest.raises(
        InvalidDatasetError, match=r":3: field 'id': duplicate id '1' \(first on line 1\)"
    ):
        Dataset.load(path, str, str)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"title": "T", "questions": [{"choices": []}]},
            r"field 'input.questions.0.question': Field required",
        ),
        (
            {"title": "T", "questions": [{"question": 3}]},
            r"field 'input.questions.0.question': Input should be a valid string \(got integer\)",
        ),
        ({"questions": []}, r"field 'input.title': Field required"),
    ],
)
def test_nested_field_errors_carry_the_field_path(
    tmp_path: Path, value: dict[str, Any], message: str
) -> None:
    path = write(tmp_path, {"id": "a", "input": value, "expected": {"text": "x", "score": 1}})
    with pytest.raises(InvalidDatasetError, match=re.escape(f"{path}:1: ") + message):
        Dataset.load(path, Exam, Answer)


def test_expected_field_errors_are_prefixed_with_expected(tmp_path: Path) -> None:
    path = write(
        tmp_path, {"id": "a", "input": {"title": "T", "questions": []}, "expected": {"text": "x"}}
    )
    with pytest.raises(InvalidDatasetError, match=r":1: field 'expected.score': Field required"):
        Dataset.load(path, Exam, Answer)


def test_non_utf8_bytes_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        b'{"id": "a", "input": "x", "expected": "y"}\n{"id": "b", "input": "caf\xe9"}\n'
    )
    with pytest.raises(InvalidDatasetError, match=r":2: not UTF-8 text \(byte 26\)"):
        Dataset.load(path, str, str)


# -- streaming ----------------------------------------------------------------------------


def test_iter_jsonl_is_lazy(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"id": "a", "input": "x", "expected": "y"},
        {"id": "b", "input": "x", "expected": "y"},
        "this line is broken",
    )
    assert inspect.isgenerator(iter_jsonl(path, str, str))
    stream = iter_jsonl(path, str, str)
    assert next(stream).id == "a"
    assert next(stream).id == "b"  # the bad third line has not been read yet
    with pytest.raises(InvalidDatasetError, match=":3: not valid JSON"):
        next(stream)


def test_stream_reads_100k_lines_quickly_in_constant_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = '{{"id": "s{0}", "input": "question number {0} {1}", "expected": "{0}"}}\n'
    path.write_text("".join(line.format(i, "x" * 50) for i in range(100_000)), encoding="utf-8")
    start = time.perf_counter()
    count = sum(1 for _ in Dataset.stream(path, str, str))
    assert count == 100_000
    assert time.perf_counter() - start < 20.0  # generous: this is a smoke check, not a benchmark

    tracemalloc.start()
    try:
        last = None
        for sample in iter_jsonl(path, str, str, check_duplicate_ids=False):
            last = sample
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert last is not None
    assert last.id == "s99999"
    # ~10 MB of file; holding it would need far more than this.
    assert peak < 1_000_000


# -- hashing and saving -------------------------------------------------------------------


def test_content_hash_is_the_same_in_memory_and_from_file(tmp_path: Path) -> None:
    ds = Dataset(samples=(Sample(id="a", input="x", expected="y", metadata={"k": 1}),))
    path = write(tmp_path, '{"expected": "y",   "metadata": {"k": 1}, "input": "x", "id": "a"}', "")
    assert Dataset.load(path, str, str).sha256 == ds.sha256
    assert dataset_sha256(path) == ds.sha256
    assert dataset_sha256(path, str, str) == ds.sha256
    assert re.fullmatch(r"[0-9a-f]{64}", ds.sha256)


def test_content_hash_changes_with_values_and_order() -> None:
    base = Dataset(samples=samples(3))
    changed = Dataset(samples=(*samples(2), Sample(id="s2", input="q2", expected="other")))
    reordered = Dataset(samples=tuple(reversed(samples(3))))
    with_metadata = Dataset(
        samples=(*samples(2), Sample(id="s2", input="q2", expected="a2", metadata={"m": 1}))
    )
    hashes = {base.sha256, changed.sha256, reordered.sha256, with_metadata.sha256}
    assert len(hashes) == 4
    assert Dataset(samples=samples(3)).sha256 == base.sha256


def test_typed_datasets_hash_their_json_form(tmp_path: Path) -> None:
    path = write(
        tmp_path, {"id": "a", "input": {"question": "q", "choices": ["c"]}, "expected": "y"}
    )
    typed = Dataset.load(path, Question, str)
    assert typed.sha256 == dataset_sha256(path, Question, str)
    assert typed.sha256 == dataset_sha256(path)  # same JSON form as written


def test_save_then_load_round_trips(tmp_path: Path) -> None:
    ds = Dataset(
        samples=(
            Sample(
                id="e1",
                input=Exam(title="T", questions=[Question("a?", ("x",))]),
                expected=Answer(text="x", score=1),
                metadata={"level": 2},
            ),
            Sample(
                id="e2", input=Exam(title="U", questions=[]), expected=Answer(text="y", score="B")
            ),
        )
    )
    path = tmp_path / "out.jsonl"
    ds.save(path)
    loaded = Dataset.load(path, Exam, Answer)
    assert loaded == ds
    assert loaded.sha256 == ds.sha256
