"""Datasets where they are: JSONL, JSON arrays, CSV, Parquet, Hugging Face; field maps.

Every malformed source ends in one `InvalidDatasetError` naming the file and line (or
row); the CLI turns it into one line and exit 2 (tests/cli/test_cli_everyday.py).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from weakincentives.errors import InvalidDatasetError
from weakincentives.evals import Dataset, DatasetProvenance, FieldMap, SampleFile, iter_samples
from weakincentives.evals.dataset._rows import detect_format

ROWS: list[dict[str, Any]] = [
    {"id": "a", "input": "one", "expected": "1", "metadata": {"topic": "x"}},
    {"id": "b", "input": "two", "expected": "2"},
]

GSM8K = [
    {
        "question": "Natalia sold clips to 48 friends in April, and half as many in May. "
        "How many clips did she sell altogether?",
        "answer": "In May she sold 48/2 = <<48/2=24>>24 clips.\n48+24 = <<48+24=72>>72\n#### 72",
    },
    {
        "question": "Weng earns $12 an hour. She did 50 minutes of babysitting. How much?",
        "answer": "12/60 = $<<12/60=0.2>>0.2 per minute.\n0.2 x 50 = $<<0.2*50=10>>10.\n#### 10",
    },
    {"question": "A robe takes 2 bolts of blue fiber. How many?", "answer": "... #### 1,234"},
]


@dataclass(frozen=True)
class Point:
    x: int
    y: int


def jsonl(path: Path, *rows: Any) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def load(path: Path | str, input_type: Any = Any, expected_type: Any = Any, **kw: Any) -> Any:
    return list(iter_samples(path, input_type, expected_type, **kw))


# -- formats -----------------------------------------------------------------------------


def write_csv(path: Path, rows: list[dict[str, Any]], *, newline: str = "\n") -> Path:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator=newline)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_every_format_loads_the_same_samples(tmp_path: Path) -> None:
    flat = [{k: v for k, v in r.items() if k != "metadata"} for r in ROWS]
    sources = {
        "jsonl": jsonl(tmp_path / "d.jsonl", *flat),
        "json": tmp_path / "d.json",
        "csv": write_csv(tmp_path / "d.csv", flat),
        "parquet": write_parquet(tmp_path / "d.parquet", flat),
    }
    sources["json"].write_text(json.dumps(flat, indent=2))
    for name, path in sources.items():
        samples = load(path, str, str)
        assert detect_format(str(path)) == name
        assert [(s.id, s.input, s.expected) for s in samples] == [
            ("a", "one", "1"),
            ("b", "two", "2"),
        ], name


def test_a_json_array_streams_elements_across_chunks(tmp_path: Path) -> None:
    # Elements far larger than the reader's 64 KiB chunk, and a number at a chunk's end.
    rows = [{"id": str(i), "input": "x" * 70_000, "expected": i * 1000} for i in range(5)]
    path = tmp_path / "big.json"
    path.write_text("\ufeff[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    samples = load(path, str, int)
    assert [s.expected for s in samples] == [0, 1000, 2000, 3000, 4000]
    assert all(len(s.input) == 70_000 for s in samples)


def test_csv_cells_are_converted_to_the_declared_types(tmp_path: Path) -> None:
    rows = [{"id": "a", "input": "q", "expected": "42", "metadata": '{"topic": "t"}'}]
    [sample] = load(write_csv(tmp_path / "d.csv", rows, newline="\r\n"), str, int)
    assert (sample.id, sample.expected, dict(sample.metadata)) == ("a", 42, {"topic": "t"})


def test_hugging_face_datasets_load_from_a_saved_directory_by_split(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    train = datasets.Dataset.from_list(GSM8K[:1])
    test = datasets.Dataset.from_list(GSM8K)
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(str(tmp_path / "gsm8k"))
    fields = FieldMap.parse(["input=question", "expected=answer|after:####|int"])
    samples = load(tmp_path / "gsm8k", str, int, format="hf", split="test", fields=fields)
    assert [(s.id, s.expected) for s in samples] == [("1", 72), ("2", 10), ("3", 1234)]
    with pytest.raises(InvalidDatasetError, match=r"has splits test, train; pick one with --split"):
        load(tmp_path / "gsm8k", format="hf", fields=fields)
    with pytest.raises(InvalidDatasetError, match=r"no split 'dev'; the dataset has test, train"):
        load(tmp_path / "gsm8k", format="hf", split="dev", fields=fields)


def test_hugging_face_datasets_load_by_name_from_a_folder_of_data_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "local-hub"
    folder.mkdir()
    jsonl(folder / "test.jsonl", *GSM8K)
    bad = [{"question": "q", "answer": "no marker"}]
    jsonl(folder / "train.jsonl", *bad)
    fields = FieldMap.parse(["input=question", "expected=answer|after:####"])
    samples = load(str(folder), format="hf", split="test", fields=fields)
    assert [s.expected for s in samples] == ["72", "10", "1,234"]
    with pytest.raises(InvalidDatasetError, match=r"\[train\]: row 1: field 'answer': transform"):
        load(str(folder), format="hf", split="train", fields=fields)


# -- GSM8K, field maps and transforms -----------------------------------------------------


def test_gsm8k_test_jsonl_loads_with_a_field_map_and_no_converter(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "test.jsonl", *GSM8K)
    fields = FieldMap.parse(["input=question", "expected=answer|after:####"])
    dataset = Dataset.load(path, str, str, fields=fields)
    assert dataset.ids == ("1", "2", "3")  # no id column: the line number
    assert [s.expected for s in dataset] == ["72", "10", "1,234"]
    assert dataset[0].input.startswith("Natalia sold clips")
    with pytest.raises(InvalidDatasetError, match=r"test.jsonl:1: missing field 'input'"):
        Dataset.load(path, str, str)  # without the map, the error says how to map it


def test_field_maps_reach_into_objects_and_fill_metadata(tmp_path: Path) -> None:
    row = {"q": {"text": "hi"}, "a": " 7 ", "subject": "algebra", "uid": 9}
    path = jsonl(tmp_path / "d.jsonl", row)
    fields = FieldMap.parse(
        ["id=uid", "input=q.text", "expected=a|strip|int", "metadata.topic=subject"]
    )
    [sample] = load(path, str, int, fields=fields)
    assert (sample.id, sample.input, sample.expected) == ("9", "hi", 7)
    assert dict(sample.metadata) == {"topic": "algebra"}
    assert FieldMap.parse(fields.specs()) == fields


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("input", r"must look like TARGET=FIELD"),
        ("answer=question", r"unknown target 'answer'"),
        ("expected=answer|after", r"unknown transform 'after'"),
        ("expected=answer|upper", r"unknown transform 'upper'; use one of after:SEP"),
    ],
)
def test_bad_field_specs_are_refused_up_front(spec: str, message: str) -> None:
    with pytest.raises(InvalidDatasetError, match=message):
        FieldMap.parse([spec])


def test_a_transform_that_fails_names_the_row(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "d.jsonl", GSM8K[0], {"question": "q", "answer": "no marker"})
    fields = FieldMap.parse(["input=question", "expected=answer|after:####"])
    with pytest.raises(
        InvalidDatasetError,
        match=r"d.jsonl:2: field 'answer': transform after:#### failed: '####' does not occur",
    ):
        load(path, fields=fields)


# -- strict loading ----------------------------------------------------------------------


def test_unknown_fields_are_errors_unless_allowed_then_kept_as_metadata(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "d.jsonl", {**ROWS[0], "source": "web"})
    with pytest.raises(InvalidDatasetError, match=r"d.jsonl:1: unknown field 'source'"):
        load(path)
    [sample] = load(path, allow_extra_fields=True)
    assert dict(sample.metadata) == {"topic": "x", "source": "web"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"x": True, "y": 1}, r"field 'input.x': Input should be a valid integer \(got boolean\)"),
        ({"x": "3", "y": 1}, r"field 'input.x': Input should be a valid integer \(got string\)"),
        ({"x": 1}, r"field 'input.y': Field required"),
        ({"x": 1, "y": 2, "z": 3}, r"field 'input.z': unknown field"),
        ([1, 2], r"field 'input'"),
    ],
)
def test_typed_values_are_validated_strictly(tmp_path: Path, value: Any, message: str) -> None:
    path = jsonl(tmp_path / "d.jsonl", {"id": "a", "input": value, "expected": None})
    with pytest.raises(InvalidDatasetError, match=r"d.jsonl:1: " + message):
        load(path, Point, Any)


def test_a_true_is_not_an_int_and_an_int_is_a_float(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "d.jsonl", {"id": "a", "input": "q", "expected": True})
    with pytest.raises(InvalidDatasetError, match=r"d.jsonl:1: field 'expected'"):
        load(path, str, int)
    path = jsonl(tmp_path / "e.jsonl", {"id": "a", "input": "q", "expected": 3})
    assert load(path, str, float)[0].expected == 3.0


# -- malformed sources: one error naming the place -----------------------------------------


def _cases(tmp: Path) -> list[tuple[str, Path, str]]:
    good = json.dumps(ROWS[0])
    cases: list[tuple[str, Path, bytes | None, str]] = [
        ("missing", tmp / "nope.jsonl", None, r"nope.jsonl: no such dataset file"),
        ("directory", tmp / "dir.jsonl", None, r"dir.jsonl: is a directory"),
        ("nested", tmp / "n.jsonl", b"[" * 100_000 + b"\n", r"n.jsonl:1: JSON nested too deeply"),
        ("bad-json", tmp / "b.jsonl", f'{good}\n{{"id": }}\n'.encode(), r"b.jsonl:2: not valid"),
        (
            "non-utf8",
            tmp / "u.jsonl",
            f"{good}\n".encode() + b'{"id": "\xff"}\n',
            r"u.jsonl:2: not UTF-8",
        ),
        (
            "huge",
            tmp / "h.jsonl",
            f"{good}\n".encode() + b"x" * 2000 + b"\n",
            r"h.jsonl:2: line longer than 1,000 bytes",
        ),
        (
            "duplicate",
            tmp / "d.jsonl",
            f"{good}\n{good}\n".encode(),
            r"d.jsonl:2: field 'id': duplicate id 'a' "
            r"\(first on line 1\)",
        ),
        (
            "json-not-array",
            tmp / "o.json",
            b'{"id": "a"}',
            r"o.json:1: a .json dataset is an array",
        ),
        (
            "json-bad-element",
            tmp / "e.json",
            b'[\n{"id": "a", "input": 1},\n{"id": ]',
            r"e.json:3: not valid JSON",
        ),
        ("json-nested", tmp / "j.json", b"[" + b"[" * 100_000, r"j.json:1: JSON nested too deeply"),
        ("json-not-utf8", tmp / "k.json", b'[{"input": "\xff"}]', r"k.json:1: not UTF-8"),
        (
            "csv-ragged",
            tmp / "r.csv",
            b"id,input,expected\r\na,b,c\r\nd,e\r\n",
            r"r.csv:3 \(row 2\): 2 cells, "
            r"but the header has 3",
        ),
        (
            "csv-header",
            tmp / "c.csv",
            b"id,input,input\n",
            r"c.csv:1: the header names column 'input' twice",
        ),
        ("csv-not-utf8", tmp / "v.csv", b"id,input,expected\na,\xff,c\n", r"v.csv:\d: not UTF-8"),
        ("parquet", tmp / "p.parquet", b"not parquet", r"p.parquet: not a readable Parquet file"),
        ("suffix", tmp / "data.txt", b"", r"data.txt: cannot tell the dataset format"),
    ]
    out = []
    for name, path, content, message in cases:
        if name == "directory":
            path.mkdir()
        elif content is not None:
            path.write_bytes(content)
        out.append((name, path, message))
    return out


def test_every_malformed_source_is_one_error_naming_the_place(tmp_path: Path) -> None:
    for name, path, message in _cases(tmp_path):
        with pytest.raises(InvalidDatasetError, match=re.escape(str(tmp_path)) + "/" + message):
            load(path, max_line_bytes=1000 if name == "huge" else 1 << 20)


def test_bom_and_crlf_are_read_as_plain_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(json.dumps(r).encode() for r in ROWS) + b"\r\n")
    assert [(s.id, s.expected) for s in load(path, str, str)] == [("a", "1"), ("b", "2")]


def test_loading_streams_rows_and_stops_at_the_first_bad_one(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "d.jsonl", *ROWS, "not json")
    samples = iter_samples(path, str, str)
    assert [next(samples).id, next(samples).id] == ["a", "b"]  # line 3 is not read yet
    with pytest.raises(InvalidDatasetError, match=r"d.jsonl:3: not valid JSON"):
        next(samples)


# -- provenance and streamed datasets ------------------------------------------------------


def test_provenance_records_location_format_map_and_the_bytes_hash(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "test.jsonl", *GSM8K)
    fields = FieldMap.parse(["input=question", "expected=answer|after:####"])
    info = DatasetProvenance.of(str(path), fields=fields)
    assert info.to_dict() == {
        "location": str(path),
        "format": "jsonl",
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "split": None,
        "fields": ["input=question", "expected=answer|after:####"],
        "allow_extra_fields": False,
    }
    folder = tmp_path / "hf"
    folder.mkdir()
    jsonl(folder / "test.jsonl", *GSM8K)
    first = DatasetProvenance.of(str(folder), split="test").sha256
    jsonl(folder / "test.jsonl", *GSM8K[:2])
    assert DatasetProvenance.of(str(folder), split="test").sha256 != first


def test_a_sample_file_streams_each_time_and_hashes_like_a_dataset(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "test.jsonl", *GSM8K)
    fields = FieldMap.parse(["input=question", "expected=answer|after:####"])
    source: SampleFile[str, str] = SampleFile(path, str, str, fields=fields)
    assert [s.id for s in source] == [s.id for s in source] == ["1", "2", "3"]
    assert source.sha256 == Dataset.load(path, str, str, fields=fields).sha256
    assert source.provenance().fields == fields.specs()


def test_a_sample_file_checks_ids_until_one_full_pass(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "d.jsonl", *ROWS)
    source: SampleFile[str, str] = SampleFile(path, str, str)
    assert [s.id for s in source][:1] == ["a"]  # a full pass: ids are unique
    jsonl(path, ROWS[0], ROWS[0])
    assert [s.id for s in source] == ["a", "a"]  # not checked again (the file was read)
    with pytest.raises(InvalidDatasetError, match=r"duplicate id 'a'"):
        list(SampleFile(path, str, str))
