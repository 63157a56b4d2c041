"""A large run is read in two halves, the second by a child process: the same index.

`_viewer_split.read_batches` hands the second half of a large `results.jsonl` to a
child (`python -I _viewer_lines.py ...`). The index built that way must equal the one
built by reading the file in one pass, odd lines (left to SQL, skipped, blank, a cut
last line, a key written twice) included on both sides; a child that fails, hangs or
writes nonsense leaves the parent to read the second half itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.debug.test_viewer_fast_index import ODD_LINES, dump, line
from weakincentives.debug import ResultIndex
from weakincentives.debug import _viewer_split as viewer_split


@pytest.fixture
def odd_run(tmp_path: Path) -> Path:
    """Odd lines and plain ones in both halves, and a cut last line."""
    run = tmp_path / "odd"
    run.mkdir()
    plain = [line(sample_id=f"p{i}", metadata={"i": i}) for i in range(40)]
    body = b"".join(ODD_LINES) + b"".join(plain) + b"\n" + b"".join(ODD_LINES[:5])
    (run / "results.jsonl").write_bytes(body + b"".join(plain[:3]) + b'{"sample_id": "cut')
    return run


def build(run: Path) -> tuple[ResultIndex, Any]:
    index = ResultIndex()
    indexed = index.add_run(run)
    index.finish(search_in_background=False)
    return index, indexed


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Split every file; record whether each child's batches were used."""
    monkeypatch.setattr(viewer_split, "SPLIT_BYTES", 1)
    monkeypatch.setattr(viewer_split, "_spare_core", lambda: True)  # whatever the load
    used: list[bool] = []
    original = viewer_split._Child.batches

    def batches(self: Any) -> Any:
        found = original(self)
        used.append(found is not None)
        return found

    monkeypatch.setattr(viewer_split._Child, "batches", batches)
    return used


def test_two_halves_index_what_one_pass_does(odd_run: Path, split: list[bool]) -> None:
    halves, indexed = build(odd_run)
    assert split == [True]  # the child read the second half
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(viewer_split, "SPLIT_BYTES", 1 << 60)
        whole, expected = build(odd_run)
    assert dump(halves) == dump(whole)
    assert indexed == expected
    assert halves.gathered("odd") is None and whole.gathered("odd") is None  # a repeated key


def test_gathered_values_survive_the_split(tmp_path: Path, split: list[bool]) -> None:
    run = tmp_path / "plain"
    run.mkdir()
    lines = [line(sample_id=f"s{i}", error="boom" if i % 7 == 0 else None) for i in range(60)]
    (run / "results.jsonl").write_bytes(b"".join(lines))
    halves = build(run)[0]
    assert split == [True]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(viewer_split, "SPLIT_BYTES", 1 << 60)
        whole = build(run)[0]
    assert halves.gathered("plain") == whole.gathered("plain") is not None


@pytest.mark.parametrize(
    "child",
    [
        "import sys; sys.exit(3)",  # fails
        "import sys; sys.stdout.write('not batches')",  # exits 0 with nonsense
        "import sys; sys.stdout.buffer.write(bytes(4))",  # cut short
        "import time; time.sleep(60)",  # hangs
    ],
    ids=["fails", "nonsense", "cut-short", "hangs"],
)
def test_a_child_that_fails_leaves_the_second_half_to_the_parent(
    odd_run: Path, split: list[bool], monkeypatch: pytest.MonkeyPatch, child: str
) -> None:
    monkeypatch.setattr(viewer_split, "CHILD_TIMEOUT", 0.5)
    monkeypatch.setattr(viewer_split, "_command", lambda *args: [sys.executable, "-c", child])
    halves, indexed = build(odd_run)
    assert split == [False]
    monkeypatch.setattr(viewer_split, "SPLIT_BYTES", 1 << 60)
    whole, expected = build(odd_run)
    assert dump(halves) == dump(whole)
    assert indexed == expected


def test_a_child_that_cannot_start_leaves_it_to_the_parent(
    odd_run: Path, split: list[bool], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(viewer_split, "_command", lambda *args: [str(tmp_path / "no-python")])
    halves, _ = build(odd_run)
    assert split == [False]
    monkeypatch.setattr(viewer_split, "SPLIT_BYTES", 1 << 60)
    assert dump(halves) == dump(build(odd_run)[0])


def test_small_files_are_read_in_one_pass(tmp_path: Path) -> None:
    run = tmp_path / "small"
    run.mkdir()
    (run / "results.jsonl").write_bytes(line(sample_id="a") + line(sample_id="b"))
    assert viewer_split._middle(run / "results.jsonl") is None


def test_without_a_spare_core_the_file_is_read_in_one_pass(
    odd_run: Path, split: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(viewer_split, "_spare_core", lambda: False)
    build(odd_run)
    assert split == []  # no child was started


@pytest.mark.parametrize(
    ("cpus", "load", "spare"), [(1, 0.0, False), (2, 0.6, True), (2, 1.5, False), (8, 5.0, True)]
)
def test_a_spare_core_is_one_beyond_the_load(
    monkeypatch: pytest.MonkeyPatch, cpus: int, load: float, spare: bool
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert viewer_split._spare_core() is spare
