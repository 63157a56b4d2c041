"""A run's page answered from memory while SQLite loads it equals the page SQL makes.

`wink debug RUN` keeps a single run's decoded rows in memory and answers its run page
from them (`_viewer_early.py`) while SQLite loads the run in the background. SQL over the
loaded index is the oracle: every query answered early gives SQLite's rows, the grid's
pages and a sample's page are the same, and whatever needs SQL waits for it: nothing
shown early is ever a number SQL would not give.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.debug.test_viewer_gathered import varied_results, write_run
from tests.debug.test_viewer_index import METADATA, result, write
from weakincentives import serde
from weakincentives.debug import ResultFilter, ResultIndex, ViewerData
from weakincentives.debug import _viewer_early as viewer_early
from weakincentives.debug import _viewer_load as viewer_load
from weakincentives.debug._viewer_early import EarlyRun
from weakincentives.debug._viewer_schema import (
    ATTEMPTS_SQL,
    EPOCHS_SQL,
    META_FACETS,
    METRIC_ROWS_SQL,
    METRIC_SQL,
    SLICE_ROWS_SQL,
    SLICE_SQL,
)
from weakincentives.errors import ViewerError
from weakincentives.evals import EvalResult, Metric, Score


def early_of(index: ResultIndex) -> EarlyRun:
    early = index._early
    assert early is not None, "the run is not answered from memory"
    return early


def loaded(index: ResultIndex) -> None:
    """Put the run into SQLite now: from here on SQL answers."""
    index.finish(defer=True)
    index.wait_for_search()
    assert index._early is None


def queries(index: ResultIndex, run_id: str) -> list[tuple[str, tuple[Any, ...]]]:
    """Every query `EarlyRun.answer` takes, with the parameters the run page uses."""
    first, last = index._ids[run_id]
    asked: list[tuple[str, tuple[Any, ...]]] = [
        (META_FACETS, (first, last)), (METRIC_SQL, (run_id,)), (EPOCHS_SQL, (run_id,)),
        (ATTEMPTS_SQL, (run_id,)),
    ]  # fmt: skip
    for key, values in index.facets(run_id).metadata.items():
        asked.append((SLICE_SQL, (run_id, key)))
        for value in values:
            for experiment in index.gathered(run_id).columns:  # type: ignore[union-attr]
                asked.append((SLICE_ROWS_SQL, (run_id, key, value, experiment)))
    for name, experiment, *_ in early_of(index).answer(METRIC_SQL, (run_id,)) or []:
        asked.append((METRIC_ROWS_SQL, (run_id, name, experiment)))
    return asked


def odd_results() -> list[EvalResult]:
    """Metadata of every JSON type, a key twice, samples in several experiments."""
    results = []
    for i in range(12):
        for experiment in ("b", "a"):
            metadata: dict[str, Any] = {"i": i % 3, "half": i < 6}
            if i % 4 == 0:
                metadata = {**METADATA, "i": i % 3}
            results.append(
                result(
                    f"s{i}", passed=i % 3 != 0, experiment_name=experiment,
                    metadata=metadata if i != 5 else {},
                    score=Score(value=(i % 5) / 4, passed=i % 2 == 0, metrics=(
                        Metric("exact", float(i % 2)), Metric("partial", (i % 4) / 4),
                        Metric("tools.called", 1.0),
                    )),
                )
            )  # fmt: skip
    return results


RAW_LINES = [
    # A metadata object with a key twice: both entries are `meta` rows.
    b'{"sample_id": "dup", "experiment_name": "a", "score": {"value": 1, "passed": true,'
    b' "metrics": [{"name": "exact", "value": 1}, {"name": "exact", "value": 0}]},'
    b' "latency_ms": 4, "metadata": {"i": 1, "i": 1, "r": 1.50, "e": 1E+05}}\n',
    b'{"sample_id": "dup2", "experiment_name": "b", "score": {"value": 0.2},'
    b' "latency_ms": 5, "metadata": {"i": 2, "i": 3}}\n',
    b"\n",  # a blank line takes an id: rows are not numbered one after the other
    b'{"sample_id": "bare", "experiment_name": "a", "score": {"value": 0}, "latency_ms": 1}\n',
]


@pytest.fixture(params=["varied-1", "varied-3", "odd"])
def run(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "odd":
        path = write_run(tmp_path, odd_results())
        with (path / "results.jsonl").open("ab") as f:
            f.write(b"".join(RAW_LINES))
        return path
    epochs = int(request.param.rpartition("-")[2])
    return write_run(tmp_path, varied_results(epochs, epochs=epochs))


def test_every_query_answered_early_gives_sqls_rows(run: Path) -> None:
    index = ResultIndex()
    index.add_run(run, run_id="gen", defer=True)
    early = early_of(index)
    asked = queries(index, "gen")
    answers = [early.answer(sql, params) for sql, params in asked]
    loaded(index)
    for (sql, params), answer in zip(asked, answers, strict=True):
        expected = index.query(sql, params)
        assert answer is not None, sql
        if sql == METRIC_SQL:  # ties in min(id) come in any order; the sum is read when exact
            for mine, sql_row in zip(sorted(answer), sorted(expected), strict=True):
                assert mine[:3] + mine[4:] == sql_row[:3] + sql_row[4:]
                assert mine[3] == pytest.approx(sql_row[3])
            assert [e for _, e, *_ in answer] == [e for _, e, *_ in expected]
        else:
            assert answer == expected, (sql, params)
            assert [type(v) for row in answer for v in row] == [
                type(v) for row in expected for v in row
            ]


def test_only_the_page_queries_of_this_run_are_answered(tmp_path: Path) -> None:
    index = ResultIndex()
    index.add_run(write(tmp_path, "r", [result("s1")]), defer=True)
    early = early_of(index)
    assert early.answer(EPOCHS_SQL, ("r",)) == [(1,)]
    assert early.answer(EPOCHS_SQL, ("other",)) is None
    assert early.answer(META_FACETS, (5, 9)) is None
    assert early.answer("SELECT count(*) FROM results", ()) is None


def grid(index: ResultIndex, run_id: str) -> list[Any]:
    """The unfiltered grid's pages a user can ask for, and rows, samples and siblings."""
    out: list[Any] = []
    for descending in (False, True):
        for offset, limit in ((0, 50), (0, 7), (5, 7), (70, 50), (119, 5), (400, 50)):
            out.append(
                index.page(
                    run_id, ResultFilter(), descending=descending, offset=offset, limit=limit
                )
            )
    first, last = index._ids[run_id]
    for result_id in range(first - 1, last + 2):
        row = index.get(run_id, result_id)
        out.append(row)
        if row is not None:
            out.append(index.siblings(run_id, row.sample_id))
            try:
                out.append(serde.dump(index.read(run_id, result_id)))
            except ViewerError as exc:  # a line the index holds that is no valid result
                out.append(str(exc))
    return out


def test_the_grid_and_samples_answered_early_equal_sqls(run: Path) -> None:
    index = ResultIndex()
    index.add_run(run, run_id="gen", defer=True)
    early = grid(index, "gen")
    assert index.in_memory("gen")
    loaded(index)
    assert not index.in_memory("gen")
    assert early == grid(index, "gen")


def pages(data: ViewerData) -> str:
    """The run page (head, statistics, facets, charts, first rows) as JSON text."""
    return json.dumps(
        {
            "run": data.run("gen"),
            "charts": data.charts("gen"),
            "slices": [
                data.charts("gen", key)
                for key in ("i", "level", "n", "")
                if key in data.run("gen")["slice_keys"] or key == ""
            ],
            "results": data.results("gen", [("limit", "50")]),
            "runs": data.runs(),
        }
    )


def test_the_run_page_answered_early_equals_the_page_sql_makes(
    run: Path, held: threading.Event
) -> None:
    early = ViewerData.open(run, cache=False)
    made = pages(early)
    assert early.index.in_memory("gen")  # made while SQLite is held
    held.set()
    oracle = ViewerData.open(run, cache=False)
    loaded(oracle.index)
    oracle.index._gathered.clear()  # statistics by SQL too
    assert made == pages(oracle)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Loading into SQLite waits until the event is set."""
    release = threading.Event()
    original = viewer_load.Load.insert

    def insert(self: viewer_load.Load, batch: Any) -> None:
        assert release.wait(30), "never released"
        original(self, batch)

    monkeypatch.setattr(viewer_load.Load, "insert", insert)
    yield release
    release.set()


def test_a_page_that_needs_sql_waits_for_it_and_shows_the_loaded_rows(
    tmp_path: Path, held: threading.Event
) -> None:
    run = write_run(tmp_path, varied_results(5, epochs=1))
    data = ViewerData.open(run, cache=False)
    data.run("gen")
    data.charts("gen")
    data.results("gen", [])  # the first page is served: SQLite starts loading
    assert data.index.in_memory("gen")
    answers: list[Any] = []
    asking = threading.Thread(
        target=lambda: answers.append(data.results("gen", [("status", "error")]))
    )
    asking.start()
    asking.join(0.3)
    assert asking.is_alive() and not answers  # a filter waits for SQLite
    assert data.result("gen", 1)["row"]["sample_id"] == "s0"  # a sample page does not
    held.set()
    asking.join(30)
    errors = [r for r in varied_results(5, epochs=1) if r.is_error]
    assert answers[0]["total"] == len(errors)
    assert not data.index.in_memory("gen")


def test_a_run_that_cannot_be_loaded_says_so_where_sql_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: viewer_load.Load, batch: Any) -> None:
        raise MemoryError("no room")

    monkeypatch.setattr(viewer_load.Load, "insert", broken)
    data = ViewerData.open(write(tmp_path, "r", [result("s1")]), cache=False)
    assert data.results("r", [])["total"] == 1  # from memory
    with pytest.raises(
        ViewerError, match=r"cannot index .*results.jsonl: MemoryError\('no room'\)"
    ):
        data.results("r", [("status", "error")])


@pytest.mark.parametrize(
    "tail",
    [
        b"{not json\n",  # a line SQL judges
        serde.dumps(result("s1", passed=False)) + b"\n",  # a key written twice
    ],
    ids=["judged-by-sql", "superseded"],
)
def test_a_run_whose_rows_are_not_the_index_rows_is_not_answered_early(
    tmp_path: Path, tail: bytes
) -> None:
    run = write(tmp_path, "r", [result("s1"), result("s2")], tail)
    data = ViewerData.open(run, cache=False)
    assert not data.index.in_memory("r")
    assert data.results("r", [])["total"] == 2


def test_a_run_too_large_to_keep_is_loaded_as_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(viewer_early, "MAX_EARLY_ROWS", 2)
    monkeypatch.setattr("weakincentives.debug._viewer_index.MAX_EARLY_ROWS", 2)
    run = write(tmp_path, "r", [result(f"s{i}") for i in range(3)])
    data = ViewerData.open(run, cache=False)
    assert not data.index.in_memory("r")
    assert data.results("r", [])["total"] == 3


def test_several_runs_are_loaded_before_they_are_shown(tmp_path: Path) -> None:
    write(tmp_path, "r1", [result("s1")])
    write(tmp_path, "r2", [result("s1"), result("s2")])
    data = ViewerData.open(tmp_path, cache=False)
    assert not data.index.in_memory("r1") and not data.index.in_memory("r2")
    assert [run["results"] for run in data.runs()] == [1, 2]


def test_a_second_run_added_loads_the_first_into_sqlite(tmp_path: Path) -> None:
    index = ResultIndex()
    index.add_run(write(tmp_path, "r1", [result("s1")]), defer=True)
    assert index.in_memory("r1")
    index.add_run(write(tmp_path, "r2", [result("s1")]), defer=True)
    assert not index.in_memory("r1") and not index.in_memory("r2")
    index.finish(search_in_background=False)
    assert index.page("r1", ResultFilter()).total == index.page("r2", ResultFilter()).total == 1


def test_a_run_read_in_two_halves_is_answered_early_as_sql_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from weakincentives.debug import _viewer_split as viewer_split

    run = write_run(tmp_path, varied_results(2, epochs=1))
    monkeypatch.setattr(viewer_split, "SPLIT_BYTES", 1)  # a child reads the second half
    monkeypatch.setattr(viewer_split, "_spare_core", lambda: True)
    index = ResultIndex()
    index.add_run(run, run_id="gen", defer=True)
    asked = queries(index, "gen")
    answers = [early_of(index).answer(sql, params) for sql, params in asked]
    early = grid(index, "gen")
    loaded(index)
    assert early == grid(index, "gen")
    for (sql, params), answer in zip(asked, answers, strict=True):
        if sql != METRIC_SQL:  # compared above, with its float sum
            assert answer == index.query(sql, params), (sql, params)
