"""The viewer's index on the shared loader: odd values, odd lines, search and reading back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from weakincentives import serde
from weakincentives.clock import FakeClock
from weakincentives.debug import ResultFilter, ResultIndex
from weakincentives.errors import ViewerError
from weakincentives.evals import (
    EvalResult,
    Fingerprint,
    RunStore,
    Score,
    ToolCallRecord,
)
from weakincentives.runtime.session import ChatMessage, ToolCall

METADATA = {
    "text": "a b",
    "real": 0.1 + 0.2,
    "int": -3,
    "flag": True,
    "nothing": None,
    "nested": {"z": 1, "a": ["x", 2]},
    'odd "key"': 1.5,
}


def result(sample_id: str, *, passed: bool = True, **extra: object) -> EvalResult:
    fields: dict[str, object] = {
        "sample_id": sample_id,
        "experiment_name": "base",
        "score": Score(value=float(passed), passed=passed, reason=f"reason of {sample_id}"),
        "latency_ms": 10.0,
        **extra,
    }
    return EvalResult(**fields)  # type: ignore[arg-type]  # fields of EvalResult


def write(root: Path, run_id: str, results: list[EvalResult], tail: bytes = b"") -> Path:
    store = RunStore(root, clock=FakeClock(), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id=run_id) as run:
        for r in results:
            run.append(r)
    if tail:
        with (root / run_id / "results.jsonl").open("ab") as f:
            f.write(tail)
    return root / run_id


@pytest.fixture
def index() -> Iterator[ResultIndex]:
    yield ResultIndex()


def keys(index: ResultIndex, run_id: str, flt: ResultFilter) -> list[str]:
    return [row.sample_id for row in index.page(run_id, flt, limit=500).rows]


def test_metadata_values_are_filtered_as_the_text_the_facets_show(
    index: ResultIndex, tmp_path: Path
) -> None:
    run = write(tmp_path, "r", [result("s1", metadata=METADATA), result("s2")])
    index.add_run(run)
    index.finish()
    facets = index.facets("r").metadata
    assert facets == {
        "text": ("a b",), "real": ("0.30000000000000004",), "int": ("-3",),
        "flag": ("true",), "nothing": ("null",), "nested": ('{"a": ["x", 2], "z": 1}',),
        'odd "key"': ("1.5",),
    }  # fmt: skip
    for key, (value,) in facets.items():
        assert keys(index, "r", ResultFilter(metadata=((key, value),))) == ["s1"]


def test_odd_lines_are_skipped_with_a_reason_and_a_cut_last_line_silently(
    index: ResultIndex, tmp_path: Path
) -> None:
    good = serde.dumps(result("s3")) + b"\n"
    tail = (
        b"{not json\n"
        + b'{"sample_id": "s9", "experiment_name": "base"}\n'
        + b'{"sample_id": "s9", "experiment_name": "base", "score": {"value": "high", '
        + b'"passed": true}, "latency_ms": 1}\n'
        + b"\n"
        + good
        + b'{"sample_id": "s10", "exp'
    )
    run = write(tmp_path, "r", [result("s1"), result("s2")], tail)
    indexed = index.add_run(run)
    index.finish()
    assert (indexed.results, indexed.lines, indexed.skipped_count) == (3, 7, 3)
    assert [s.split(": ", 1)[1] for s in indexed.skipped] == [
        "not valid JSON",
        "score.value is missing or not a number",
        "score.value is missing or not a number",
    ]
    assert indexed.skipped[0].startswith(f"{run / 'results.jsonl'}:3:")
    assert keys(index, "r", ResultFilter()) == ["s1", "s2", "s3"]


def test_an_unterminated_last_line_that_parses_is_a_result(
    index: ResultIndex, tmp_path: Path
) -> None:
    run = write(tmp_path, "r", [result("s1")], serde.dumps(result("s2", passed=False)))
    index.add_run(run)
    index.finish()
    (row,) = index.page("r", ResultFilter(status="failed")).rows
    read = index.read("r", row.id)
    assert read is not None and (read.sample_id, read.passed) == ("s2", False)


SEARCHABLE = result(
    "s1",
    output="first line\nsecondword here",
    error="the model went away",
    error_kind="agent",
    messages=(
        ChatMessage(role="user", content="ask about kangaroo"),
        ChatMessage(
            role="assistant",
            tool_calls=(ToolCall(id="c1", name="lookup_tool", arguments='{"q": "wombat"}'),),
        ),
    ),
    tool_calls=(
        ToolCallRecord("lookup_tool", {"zebra": 1}, "found emu", False, 1.0, "quoll failure"),
    ),
)


@pytest.mark.parametrize(
    ("words", "found"),
    [
        ("secondword", True),  # after a newline in the output
        ("kangaroo", True),  # message content
        ("wombat", True),  # arguments of a call the model asked for
        ("lookup", True),  # tool name
        ("zebra", True),  # a tool call's params
        ("emu quoll", True),  # its message and error
        ("went away", True),  # the error
        ("role", False),  # JSON structure is not text
        ("content", False),
        ("null", False),
    ],
)
def test_search_covers_output_transcript_and_tool_calls(
    index: ResultIndex, tmp_path: Path, words: str, found: bool
) -> None:
    index.add_run(write(tmp_path, "r", [SEARCHABLE, result("s2")]))
    index.finish()
    assert keys(index, "r", ResultFilter(search=words)) == (["s1"] if found else [])


def test_ids_follow_the_lines_of_every_run_and_the_last_line_wins(
    index: ResultIndex, tmp_path: Path
) -> None:
    a = write(tmp_path, "a", [result("s1", passed=False), result("s2"), result("s1")])
    b = write(tmp_path, "b", [result("s1", metadata={"k": "old"}), result("s1")])
    index.add_run(a)
    index.add_run(b)
    index.finish()
    rows_a = index.page("a", ResultFilter()).rows
    rows_b = index.page("b", ResultFilter()).rows
    assert [(r.sample_id, r.status) for r in rows_a] == [("s2", "passed"), ("s1", "passed")]
    assert rows_a[0].id < rows_a[1].id < rows_b[0].id
    assert index.facets("b").metadata == {}  # the superseded line's metadata is gone
    read = index.read("b", rows_b[0].id)
    assert read is not None and (read.key, read.metadata) == (("s1", "base", 0), {})


def test_reading_a_line_that_changed_since_indexing_fails_clearly(
    index: ResultIndex, tmp_path: Path
) -> None:
    run = write(tmp_path, "r", [result("s1"), result("s2")])
    index.add_run(run)
    index.finish()
    first, second = index.page("r", ResultFilter()).rows
    path = run / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[1] + lines[0])  # same length, swapped
    with pytest.raises(ViewerError, match=r"results.jsonl:1 changed since"):
        index.read("r", first.id)
    path.write_bytes(json.dumps({"other": 1}).encode() + b"\n" * 400)
    with pytest.raises(ViewerError, match=r"results.jsonl:2 cannot be read again"):
        index.read("r", second.id)


def test_a_line_the_index_holds_but_pydantic_refuses_says_so(
    index: ResultIndex, tmp_path: Path
) -> None:
    line = json.loads(serde.dumps(result("s1")))
    line["messages"] = [{"role": "robot", "content": "beep"}]  # not a ChatMessage role
    run = tmp_path / "r"
    run.mkdir()
    (run / "results.jsonl").write_text(json.dumps(line) + "\n")
    index.add_run(run)
    index.finish()
    (row,) = index.page("r", ResultFilter()).rows
    assert row.messages == 1
    with pytest.raises(ViewerError, match=r"results.jsonl:1 is not a valid result: .*messages"):
        index.read("r", row.id)


def test_a_missing_results_file_is_a_viewer_error(index: ResultIndex, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ViewerError, match=r"cannot read .*results.jsonl"):
        index.add_run(tmp_path / "empty")
    assert index.runs() == ()


# -- the text index, built after the columns ----------------------------------------------


def test_search_waits_for_the_text_index_and_skips_superseded_lines(tmp_path: Path) -> None:
    run_dir = write(tmp_path, "r", [
        result("a", error="first attempt flaky", error_kind="agent"),
        result("a", output="the retry answered platypus"),
        result("b", output="nothing to see"),
    ])  # fmt: skip
    index = ResultIndex()
    index.add_run(run_dir)
    index.finish()  # the text is indexed on a background thread
    found = index.page("r", ResultFilter(search="platypus"))
    assert [row.sample_id for row in found.rows] == ["a"]
    assert index.page("r", ResultFilter(search="flaky")).total == 0
    assert index.page("r", ResultFilter(search="nothing")).total == 1


def test_a_text_index_that_cannot_be_built_refuses_searches_only(tmp_path: Path) -> None:
    run_dir = write(tmp_path, "r", [result("a"), result("b")])
    index = ResultIndex()
    index.add_run(run_dir)
    (run_dir / "results.jsonl").unlink()  # gone before the text could be read again
    index.finish(search_in_background=False)
    assert index.page("r", ResultFilter()).total == 2
    with pytest.raises(ViewerError, match="search is unavailable: cannot index the text"):
        index.page("r", ResultFilter(search="reason"))
    with pytest.raises(ViewerError, match="not finished"):
        ResultIndex().wait_for_search()
