"""A dataset's hash never changes: run fingerprints (and so resume) depend on it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weakincentives import serde
from weakincentives.evals import Dataset, RecordInputs, Sample
from weakincentives.evals._values import recorded_value
from weakincentives.evals.dataset import canonical_bytes, canonical_forms
from weakincentives.evals.runner._source import SampleSource


def reference_canonical(sample: Sample[Any, Any]) -> bytes:
    """The canonical line as first written: `json.dumps` of the record, keys sorted."""

    def dumped(value: Any) -> Any:
        return value if type(value) in {str, int, bool, type(None)} else serde.dump(value)

    record = {
        "id": sample.id,
        "input": dumped(sample.input),
        "expected": dumped(sample.expected),
        "metadata": dumped(sample.metadata) if sample.metadata else {},
    }
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8") + b"\n"


@dataclass(frozen=True)
class Inner:
    label: str
    weight: float = 0.5


@dataclass(frozen=True)
class Question:
    text: str
    inner: Inner = field(default_factory=lambda: Inner("x"))
    tags: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


class Color(Enum):
    RED = "red"


SAMPLES: list[Sample[Any, Any]] = [
    Sample(id="s1", input="What is 2 + 2?", expected="4"),
    Sample(id="s2", input=17, expected=-3),
    Sample(id="s3", input=True, expected=None),
    Sample(id="s4", input='héllo \u2603 "quoted" \\ \n\t \x00', expected="ünïcode ✓"),
    Sample(id="s5", input={"b": 1, "a": [1, 2.5, None]}, expected={"z": {"y": 1, "x": 2}}),
    Sample(
        id="s6", input=Question("q", tags=("t1", "t2"), extra={"k": 1}), expected=Inner("a", 2.0)
    ),
    Sample(id="s7", input=[Inner("a"), Inner("b")], expected=(1, "two")),
    Sample(id="s8", input=1.5, expected=float("nan")),
    Sample(id="s9", input=2**100, expected=Color.RED),
    Sample(id="s10", input="q", expected="a", metadata={"topic": "math", "level": 3}),
    Sample(id="s11", input="q", expected="a", metadata={"b": None, "a": True, "c": "x"}),
    Sample(id="s12", input="q", expected="a", metadata={"nested": {"z": 1, "a": [Inner("m")]}}),
    Sample(id="s13", input="q", expected="a", metadata={"when": datetime(2026, 1, 2, tzinfo=UTC)}),
    Sample(id="s14", input="q", expected="a", metadata={"score": 0.25, "big": 2**70}),
    Sample(id="s15", input="", expected="", metadata={}),
    Sample(id="s16", input={"ключ": "значение"}, expected={"1": 1}),
]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.id for s in SAMPLES])
def test_each_sample_hashes_as_before(sample: Sample[Any, Any]) -> None:
    assert canonical_bytes(sample) == reference_canonical(sample)


def test_dataset_and_streamed_hashes_equal_the_reference_digest() -> None:
    expected = hashlib.sha256(b"".join(reference_canonical(s) for s in SAMPLES)).hexdigest()
    assert Dataset(samples=tuple(SAMPLES)).sha256 == expected
    source = SampleSource(iter(SAMPLES), hashing=True)
    assert sum(1 for _ in source) == len(SAMPLES)
    assert source.hashed_as_read == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@given(
    sample_id=st.text(min_size=1, max_size=8),
    value=json_values,
    expected=json_values,
    metadata=st.dictionaries(st.text(max_size=5), json_values, max_size=4),
)
def test_any_json_sample_hashes_as_before(
    sample_id: str, value: Any, expected: Any, metadata: dict[str, Any]
) -> None:
    sample = Sample(id=sample_id, input=value, expected=expected, metadata=metadata)
    assert canonical_bytes(sample) == reference_canonical(sample)


# -- the forms hashing makes, reused for results (`canonical_forms`, `record_inputs`) --


def _assert_forms_as_recorded(sample: Sample[Any, Any]) -> None:
    line, *forms = canonical_forms(sample)
    assert line == canonical_bytes(sample)
    originals = (sample.input, sample.expected)
    for (value, form, length), original in zip(forms, originals, strict=True):
        assert value is original
        assert _same(form, recorded_value(value, limit=10**9))  # what a result records
        if type(form) is not str:
            assert length == len(json.dumps(form, ensure_ascii=False, separators=(",", ":")))


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.id for s in SAMPLES])
def test_each_samples_forms_are_what_its_result_records(sample: Sample[Any, Any]) -> None:
    _assert_forms_as_recorded(sample)


@given(value=json_values, expected=json_values)
def test_any_json_samples_forms_are_what_its_result_records(value: Any, expected: Any) -> None:
    _assert_forms_as_recorded(Sample(id="s", input=value, expected=expected))


@pytest.mark.parametrize("limit", [0, 5, 40, 2000])
@pytest.mark.parametrize("enabled", [True, False])
def test_a_streamed_source_records_inputs_as_record_inputs_does(limit: int, enabled: bool) -> None:
    # Values of every kind, kept forms or not, cut at the limit or not: the same values.
    inputs = RecordInputs(enabled=enabled, limit=limit)
    source = SampleSource(iter(SAMPLES), hashing=True, forms=8)
    recorder = source.record_inputs(inputs)
    seen = []
    for sample in source:
        seen.append(sample)
        for value in (sample.input, sample.expected):
            assert _same(recorder.value(value), inputs.value(value)), (sample.id, value)
    for sample in seen:  # the oldest forms were dropped meanwhile: converted anew
        assert _same(recorder.value(sample.input), inputs.value(sample.input))
    assert source.hashed_as_read == Dataset(samples=tuple(SAMPLES)).sha256


def test_a_streamed_source_converts_a_structured_value_once() -> None:
    question = Question("q", tags=("t",))
    source = SampleSource(
        iter([Sample(id="s", input=question, expected="a")]), hashing=True, forms=8
    )
    recorder = source.record_inputs(RecordInputs())
    assert [s.id for s in source] == ["s"]
    assert recorder.value(question) is recorder.value(question)  # the form hashing made
    assert recorder.value(question) == RecordInputs().value(question)


def test_a_source_keeps_forms_only_when_it_hashes_as_it_reads() -> None:
    inputs = RecordInputs()
    assert SampleSource(iter(SAMPLES), hashing=False, forms=8).record_inputs(inputs) is inputs
    assert SampleSource(SAMPLES, hashing=True, forms=8).record_inputs(inputs) is inputs
    assert SampleSource(iter(SAMPLES), hashing=True).record_inputs(inputs) is inputs


def _same(a: Any, b: Any) -> bool:
    """Equal as recorded: the same JSON (NaN included, which is not equal to itself)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
