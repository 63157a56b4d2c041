"""Selecting samples: ids and globs, `--where` expressions, seeded shuffles, limits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from weakincentives.errors import ConfigurationError
from weakincentives.evals import (
    Dataset,
    Sample,
    SampleFile,
    SelectedSamples,
    Selection,
    exact_match,
    parse_where,
    run_eval,
)


@dataclass(frozen=True)
class Question:
    text: str
    level: int


SAMPLES: list[Sample[Any, Any]] = [
    Sample(id="q1", input="a", expected="A", metadata={"topic": "algebra", "level": 1}),
    Sample(id="q2", input="b", expected="B", metadata={"topic": "geometry", "level": 3}),
    Sample(id="q10", input="c", expected="C", metadata={"topic": "algebra", "tags": ["hard"]}),
    Sample(id="x1", input=Question("d", 2), expected=None, metadata={"flagged": True}),
]


def ids(selection: Selection) -> list[str]:
    return [s.id for s in selection.apply(SAMPLES)]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('metadata.topic == "algebra"', ["q1", "q10"]),
        ("metadata.topic == 'algebra'", ["q1", "q10"]),
        ('metadata.topic != "algebra"', ["q2", "x1"]),
        ("metadata.level >= 2", ["q2"]),
        ("metadata.level < 3 and metadata.topic == 'algebra'", ["q1"]),
        ('metadata.topic == "geometry" or metadata.flagged', ["q2", "x1"]),
        ("not metadata.flagged", ["q1", "q2", "q10"]),
        ('"hard" in metadata.tags', ["q10"]),
        ('id in ["q1", "x1"]', ["q1", "x1"]),
        ('id not in ["q1", "x1"]', ["q2", "q10"]),
        ("metadata.topic == null", ["x1"]),
        ("input.level == 2", ["x1"]),  # into a dataclass input
        ('expected == "B" or (id == "q1" and metadata.level == 1.0)', ["q1", "q2"]),
        ("metadata.level > 1e0", ["q2"]),
        ('"q1" in id', ["q1", "q10"]),  # a substring
    ],
)
def test_where_expressions_pick_samples(expression: str, expected: list[str]) -> None:
    assert ids(Selection(where=expression)) == expected
    keep = parse_where(expression)
    assert [s.id for s in SAMPLES if keep(s)] == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("metadata.topic = 'x'", r"unexpected '=' at column 16"),
        ("topic == 'x'", r"unknown name 'topic'; a path starts with id, input, expected"),
        ("metadata.level >=", r"expected a value at column 18"),
        ("(id == 'a'", r"expected '\)' at the end at column 11"),
        ("id == 'a' 'b'", r"unexpected \"'b'\" at column 11"),
        ("__import__('os')", r"unknown name '__import__'"),
        ("id == 'a\\q'", r"bad escape in a string"),
    ],
)
def test_malformed_where_expressions_name_the_column(expression: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=r"--where .*" + message):
        Selection(where=expression)


def test_ids_and_globs_select_and_an_unknown_exact_id_is_an_error() -> None:
    assert ids(Selection(sample_ids=("q1*",))) == ["q1", "q10"]
    assert ids(Selection(sample_ids=("x1", "q2"))) == ["q2", "x1"]
    with pytest.raises(
        ConfigurationError, match=r"no sample has id q9 \(ids look like q1, q2, q10"
    ):
        ids(Selection(sample_ids=("q9", "q1")))


def test_a_seeded_shuffle_is_reproducible_and_limit_applies_last() -> None:
    samples = [Sample(id=str(i), input=i, expected=i) for i in range(100)]
    first = Selection(shuffle=True, seed=3, limit=5)
    picked = [s.id for s in first.apply(samples)]
    assert picked == [s.id for s in first.apply(samples)]
    assert picked != [s.id for s in Selection(shuffle=True, seed=4, limit=5).apply(samples)]
    assert picked != ["0", "1", "2", "3", "4"]
    assert [s.id for s in Selection(limit=2).apply(samples)] == ["0", "1"]


def test_without_a_shuffle_a_limit_stops_reading() -> None:
    read: list[int] = []

    def stream() -> Any:
        for i in range(1_000_000):
            read.append(i)
            yield Sample(id=str(i), input=i, expected=i)

    assert len(list(Selection(limit=3).apply(stream()))) == 3
    assert len(read) == 3


def test_selection_round_trips_and_describes_itself() -> None:
    selection = Selection(limit=20, sample_ids=("q*",), where="metadata.level > 1", shuffle=True)
    assert Selection.from_dict(selection.to_dict()) == selection
    assert selection.describe() == "ids q*; where metadata.level > 1; shuffled (seed 0); limit 20"
    assert Selection().to_dict() == {}
    assert Selection().describe() == "all samples"
    assert Selection.from_dict({"limit": 0}) is None
    with pytest.raises(ConfigurationError, match="--limit must be at least 1"):
        Selection(limit=0)


def test_selected_samples_stream_count_and_hash_like_a_dataset(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(
        "".join(f'{{"id": "s{i}", "input": {i}, "expected": {i}}}\n' for i in range(50))
    )
    selection = Selection(where="input >= 10", shuffle=True, seed=1, limit=7)
    selected = SelectedSamples(SampleFile(path), selection)
    picked = Dataset.from_samples(selection.apply(Dataset.load(path, int, int)))
    assert selected.scan() == (7, picked.sha256)
    assert len(selected) == 7 and selected.sha256 == picked.sha256
    assert [s.id for s in selected] == list(picked.ids)
    assert picked[0] in selected and Sample(id="s1", input=1, expected=1) not in selected
    run = run_eval(selected, lambda x: x, exact_match, store=tmp_path / "runs")
    assert (run.total, run.pass_rate, run.config["dataset_sha256"]) == (7, 1.0, picked.sha256)
