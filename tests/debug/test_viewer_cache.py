"""The viewer computes a run's counts and statistics once, however many pages ask for them."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.debug.viewer_data import write_runs
from weakincentives.debug import ViewerData
from weakincentives.debug._viewer_memo import Memo


def test_a_run_page_scans_the_index_for_its_counts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = write_runs(tmp_path)
    data = ViewerData.open(runs.root)
    calls: list[str] = []
    for name in ("facets", "experiment_passes"):
        original = getattr(data.index, name)

        def counted(run_id: str, _original: Any = original, _name: str = name) -> Any:
            calls.append(_name)
            return _original(run_id)

        monkeypatch.setattr(data.index, name, counted)
    first = data.run("run-a")
    assert sorted(calls) == ["experiment_passes", "facets"]
    scans = len(calls)
    for _ in range(3):  # three more pages of the grid
        assert data.run("run-a") == first
    assert len(calls) == scans
    assert first["experiment_names"] == ["baseline", "concise"]
    assert [r["experiment"] for r in first["pass_rates"]] == ["baseline", "concise"]


def test_a_value_asked_for_while_it_is_made_is_made_once() -> None:
    cache = Memo()
    making = threading.Event()
    release = threading.Event()
    made: list[int] = []

    def make() -> int:
        made.append(1)
        making.set()
        release.wait(timeout=10)
        return 42

    got: list[int] = []
    first = threading.Thread(target=lambda: got.append(cache.get("k", make)))
    first.start()
    assert making.wait(timeout=10)
    second = threading.Thread(target=lambda: got.append(cache.get("k", make)))
    second.start()
    time.sleep(0.2)  # the second caller is now waiting for the first one's value
    release.set()
    first.join(timeout=10)
    second.join(timeout=10)
    assert got == [42, 42]
    assert made == [1]


def test_a_failed_make_is_not_cached() -> None:
    cache = Memo()

    def boom() -> int:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        cache.get("k", boom)
    assert cache.get("k", lambda: 7) == 7
