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
from weakincentives.evals import Dataset, Sample
from weakincentives.evals.dataset._dataset import canonical_bytes
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
