"""Repeated ids and id ranks in 8 bytes per id (`IdHashes`, `IdIndex`, `SampleFile`).

The memory bounds are measured with tracemalloc at two sizes, so what is kept per id is
the difference (the fixed part cancels): a dict of ids would keep about 110 bytes each.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy  # noqa: F401  # imported before tracing: its import is not the checker's memory
import pytest

from weakincentives.errors import InvalidDatasetError
from weakincentives.evals import SampleFile
from weakincentives.evals.dataset import IdHashes, IdIndex, _id_hashes

SMALL, LARGE = 2_000, 20_000
BYTES_PER_ID = 12.0
"""8 bytes of hash, plus the array's spare room when it grows."""


def per_id(measure: Callable[[int], int]) -> float:
    return (measure(LARGE) - measure(SMALL)) / (LARGE - SMALL)


def traced_peak(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def write_rows(path: Path, n: int, *, repeat: int | None = None) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            sample_id = f"s{repeat if i == n - 1 and repeat is not None else i}"
            out.write(json.dumps({"id": sample_id, "input": f"q{i}", "expected": f"a{i}"}) + "\n")
    return path


def test_a_sample_file_checks_ids_in_a_few_bytes_per_row(tmp_path: Path) -> None:
    def measure(n: int) -> int:
        source: SampleFile[str, str] = SampleFile(write_rows(tmp_path / f"{n}.jsonl", n))
        return traced_peak(lambda: sum(1 for _ in source))

    assert per_id(measure) < BYTES_PER_ID


def test_a_sample_file_names_the_repeated_id_and_its_line_when_the_pass_ends(
    tmp_path: Path,
) -> None:
    path = write_rows(tmp_path / "d.jsonl", 5000, repeat=17)  # line 5000 repeats line 18
    source: SampleFile[str, str] = SampleFile(path)
    seen: list[str] = []
    with pytest.raises(InvalidDatasetError) as raised:
        seen.extend(s.id for s in source)
    assert len(seen) == 5000  # found when the pass ends, then the file is read again
    assert f"{path}:5000" in str(raised.value)
    assert "duplicate id 's17' (first on line 18)" in str(raised.value)


def test_repeated_hashes_are_those_added_twice() -> None:
    seen = IdHashes()
    for i in [*range(5000), 7, 4999]:
        seen.add(f"id{i}")
    assert seen.repeated() == {hash("id7"), hash("id4999")}
    assert len(seen) == 5002


@pytest.mark.parametrize("n", [3, 5000])
def test_an_index_ranks_each_id_once_and_refuses_others(n: int) -> None:
    ids = [f"x{i}" for i in range(n)]
    index = IdIndex(lambda: ids)
    assert sorted(index.rank(i) or 0 for i in ids) == list(range(n))
    assert index.rank("y") is None and len(index) == n


def test_an_index_reports_a_repeated_id() -> None:
    repeats: list[str] = []
    index = IdIndex(lambda: ["a", "b", "a", "c"], on_repeat=repeats.append)
    assert repeats == ["a"]
    assert len(index) == 3 and {index.rank(i) for i in "abc"} == {0, 1, 2}


def test_an_index_salts_its_hash_when_two_ids_collide(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _id_hashes.id_hash
    # Salt 0 hashes by length: every id of one length collides; salt 1 is the real one.
    monkeypatch.setattr(_id_hashes, "id_hash", lambda salt: len if salt == 0 else real(salt))
    repeats: list[str] = []
    ids = ["aa", "bb", "cc", "d"]
    index = IdIndex(lambda: ids, on_repeat=repeats.append)
    assert repeats == []  # a collision is not a repeat
    assert sorted(index.rank(i) or 0 for i in ids) == [0, 1, 2, 3]
    assert index.rank("ee") is None


def test_an_index_keeps_a_few_bytes_per_id() -> None:
    def measure(n: int) -> int:
        ids = [f"sample-{i}" for i in range(n)]  # made before tracing: the caller's
        tracemalloc.start()
        try:
            index = IdIndex(lambda: ids)
            return tracemalloc.get_traced_memory()[0] if index else 0
        finally:
            tracemalloc.stop()

    assert per_id(measure) < BYTES_PER_ID
