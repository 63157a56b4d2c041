"""The everyday flags: datasets where they are, selection, --model, compare, list, --version.

Dataset errors end in one line naming the file and line (or row) and exit 2, never a
traceback; the subprocess test runs the real `wink` entry point.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.helpers.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, completion
from weakincentives.cli import app

TASKS = """
from weakincentives.evals import Metric, Score


def echo(text):
    return text


def upper(text):
    return text.upper()


def two_checks(output, expected):
    exact = output == expected
    short = len(output) <= 3
    return Score(
        value=1.0 if exact and short else 0.0, passed=exact and short,
        metrics=(Metric("exact", float(exact)), Metric("short", float(short))),
    )
"""

AGENT = """
import os

from weakincentives.adapters.openai import OpenAIAdapter
from weakincentives.evals import llm_judge
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop

TEMPLATE = PromptTemplate[str](
    ns="everyday", key="echo", sections=(MarkdownSection("Q", "q", "$text", role="user"),)
)


class Echo(AgentLoop[str, str]):
    def create_prompt(self, request):
        return Prompt(TEMPLATE).bind(text=request)


def agent():
    return Echo(adapter=OpenAIAdapter("agent-default", base_url=os.environ["OPENAI_BASE_URL"]))


judge = llm_judge(
    OpenAIAdapter("judge-default", base_url=os.environ["OPENAI_BASE_URL"]), "Says hi"
)
"""

GSM8K = [
    {"question": "Natalia sold 48 clips in April and half as many in May. Total?",
     "answer": "48/2 = <<48/2=24>>24\\n48+24 = <<48+24=72>>72\\n#### 72"},
    {"question": "Weng earns $12 an hour for 50 minutes. How much?", "answer": "#### 10"},
    {"question": "What is 1 + 1?", "answer": "It is 2.\\n#### 2"},
]  # fmt: skip


def invoke(*args: str | Path, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory with `tasks.py`, a GSM8K-shaped test.jsonl and a plain data.jsonl."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    (tmp_path / "tasks.py").write_text(TASKS)
    # GSM8K's own file: `question` and `answer` with the number after ####, no id.
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in GSM8K))
    rows = [
        {"id": f"q{i}", "input": text, "expected": text.upper(), "metadata": meta}
        for i, (text, meta) in enumerate(
            [("ab", {"topic": "algebra", "level": 1}), ("cd", {"topic": "algebra", "level": 3}),
             ("ef", {"topic": "geometry", "level": 2}), ("gh", {"topic": "geometry"}),
             ("ijkl", {"topic": "algebra", "level": 2})]
        )
    ]  # fmt: skip
    write_jsonl(tmp_path / "data.jsonl", rows)
    path, modules = list(sys.path), set(sys.modules)
    yield tmp_path
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None)
        if file is None or Path(file).resolve().is_relative_to(tmp_path.resolve()):
            del sys.modules[name]


def run(*args: str | Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = invoke("eval", "run", *args, "--json", env=env)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def result_ids(run_dir: str) -> list[str]:
    lines = (Path(run_dir) / "results.jsonl").read_text().splitlines()
    return sorted(json.loads(line)["sample_id"] for line in lines if line.strip())


# -- datasets where they are ------------------------------------------------------------------


def test_gsm8k_test_jsonl_runs_with_field_mapping_and_no_converter(work: Path) -> None:
    data = run(
        "tasks.py:echo", "--dataset", "test.jsonl", "--evaluator", "exact_match",
        "--field", "input=question", "--field", "expected=answer|after:####",
    )  # fmt: skip
    assert data["total"] == 3
    assert data["run"]["dataset"]["format"] == "jsonl"
    assert data["run"]["dataset"]["fields"] == ["input=question", "expected=answer|after:####"]
    assert result_ids(data["run_dir"]) == ["1", "2", "3"]  # line numbers as ids


def test_csv_parquet_json_and_a_local_hugging_face_dataset_run(work: Path) -> None:
    datasets = pytest.importorskip("datasets")
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": "a", "input": "x", "expected": "X"}, {"id": "b", "input": "y", "expected": "Y"}]
    (work / "d.csv").write_text("id,input,expected\r\na,x,X\r\nb,y,Y\r\n")
    (work / "d.json").write_text(json.dumps(rows))
    pq.write_table(pa.Table.from_pylist(rows), work / "d.parquet")
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk("hf-local")
    for source in ("d.csv", "d.json", "d.parquet", "hf-local"):
        data = run("tasks.py:upper", "--dataset", source, "--evaluator", "exact_match")
        assert (data["total"], data["overall"]["pass_rate"]) == (2, 1.0), source
    assert data["run"]["dataset"]["format"] == "hf"


def _bad_sources(work: Path) -> list[tuple[list[str], str]]:
    good = '{"id": "a", "input": "x", "expected": "X"}\n'
    files = {
        "nested.jsonl": b"[" * 100_000 + b"\n",
        "badjson.jsonl": (good + '{"id": "b", "input": }\n').encode(),
        "bom-crlf-dup.jsonl": b"\xef\xbb\xbf" + good.encode().replace(b"\n", b"\r\n") * 2,
        "latin1.jsonl": good.encode() + b'{"id": "\xe9"}\n',
        "types.jsonl": b'{"id": "a", "input": "x", "expected": true}\n',
        "extra.jsonl": b'{"id": "a", "input": "x", "expected": "X", "answer": "y"}\n',
        "ragged.csv": b"id,input,expected\na,x\n",
        "huge.jsonl": good.encode() + b'{"id": "b", "input": "' + b"x" * (17 << 20) + b'"}\n',
    }
    for name, content in files.items():
        (work / name).write_bytes(content)
    (work / "folder").mkdir()
    return [
        (["--dataset", "missing.jsonl"], "missing.jsonl: no such dataset file"),
        (["--dataset", "folder"], "folder: is a directory"),
        (["--dataset", "nested.jsonl"], "nested.jsonl:1: JSON nested too deeply"),
        (["--dataset", "badjson.jsonl"], "badjson.jsonl:2: not valid JSON"),
        (["--dataset", "bom-crlf-dup.jsonl"], "bom-crlf-dup.jsonl:2: field 'id': duplicate id"),
        (["--dataset", "latin1.jsonl"], "latin1.jsonl:2: not UTF-8 text"),
        (["--dataset", "types.jsonl", "--expected-type", "builtins:int"],
         "types.jsonl:1: field 'expected': Input should be a valid integer (got boolean)"),
        (["--dataset", "extra.jsonl"], "extra.jsonl:1: unknown field 'answer'"),
        (["--dataset", "ragged.csv"], "ragged.csv:2 (row 1): 2 cells, but the header has 3"),
        (["--dataset", "huge.jsonl"], "huge.jsonl:2: line longer than 16,777,216 bytes"),
        (["--dataset", "test.jsonl", "--field", "input=question", "--field", "expected=answer|x"],
         "unknown transform 'x'"),
        (["--dataset", "data.jsonl", "--format", "xml"], "--format 'xml' is not one of"),
        (["--dataset", "data.jsonl", "--sample-id", "q9"], "no sample has id q9"),
        (["--dataset", "data.jsonl", "--where", "metadata.topic = 1"], "unexpected '='"),
    ]  # fmt: skip


def test_every_bad_dataset_is_one_line_with_its_place_and_exit_2(work: Path) -> None:
    for args, message in _bad_sources(work):
        result = invoke("eval", "run", "tasks.py:upper", *args, "--evaluator", "exact_match")
        assert (result.exit_code, type(result.exception)) == (2, SystemExit), (args, result.output)
        assert result.stderr.startswith("error: ") and message in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
        assert not (work / "runs").exists() or not any((work / "runs").iterdir())


def test_extra_fields_are_allowed_as_metadata_on_request(work: Path) -> None:
    _bad_sources(work)
    data = run(
        "tasks.py:upper", "--dataset", "extra.jsonl", "--evaluator", "exact_match",
        "--allow-extra-fields",
    )  # fmt: skip
    assert data["total"] == 1
    line = (Path(data["run_dir"]) / "results.jsonl").read_text().splitlines()[0]
    assert json.loads(line)["metadata"] == {"answer": "y"}


def test_the_real_entry_point_prints_no_traceback(work: Path) -> None:
    (work / "nested.jsonl").write_bytes(b"{" * 100_000)
    wink = Path(sys.executable).parent / "wink"
    env = {**os.environ, "COLUMNS": "20"}
    for dataset in ("nested.jsonl", "missing.jsonl"):
        done = subprocess.run(
            [str(wink), "eval", "run", "tasks.py:upper", "--dataset", dataset,
             "--evaluator", "exact_match"],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert dataset in done.stderr


# -- selection --------------------------------------------------------------------------------


def test_limit_sample_ids_where_and_shuffle_select_samples(work: Path) -> None:
    base = ["tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match"]
    assert result_ids(run(*base, "--limit", "2")["run_dir"]) == ["q0", "q1"]
    assert result_ids(run(*base, "--sample-id", "q4,q1", "--sample-id", "q0")["run_dir"]) == [
        "q0", "q1", "q4",
    ]  # fmt: skip
    assert result_ids(run(*base, "--sample-id", "q[23]*")["run_dir"]) == ["q2", "q3"]
    where = 'metadata.topic == "algebra" and metadata.level >= 2'
    data = run(*base, "--where", where)
    assert result_ids(data["run_dir"]) == ["q1", "q4"]
    assert data["run"]["selection"] == f"where {where}"
    first = run(*base, "--shuffle", "--seed", "5", "--limit", "3")
    again = run(*base, "--shuffle", "--seed", "5", "--limit", "3")
    assert result_ids(first["run_dir"]) == result_ids(again["run_dir"])
    assert first["run"]["selection"] == "shuffled (seed 5); limit 3"


def test_the_selection_is_in_the_fingerprint_and_the_report_header(work: Path) -> None:
    base = ["tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match"]
    run(*base, "--limit", "2", "--run-id", "sel", "--tag", "smoke", "--note", "first try")
    manifest = json.loads((work / "runs" / "sel" / "run.json").read_text())
    assert manifest["fingerprint"]["extra"] == {"selection": {"limit": 2}}
    changed = invoke("eval", "run", *base, "--limit", "3", "--resume", "sel")
    assert changed.exit_code == 2 and "cannot resume run sel" in changed.stderr
    text = invoke("eval", "report", "sel", "--html", work / "sel.html").stdout
    assert "Selection: limit 2" in text and "Tags: smoke" in text and "Note: first try" in text
    assert "Dataset: data.jsonl (jsonl, sha256 " in text
    html = (work / "sel.html").read_text()
    assert "Selection: limit 2" in html and "Tags: smoke" in html
    hint = invoke("eval", "run", *base, "--limit", "2", "--run-id", "sel2").stdout
    assert "--limit 2 --resume sel2" in hint


# -- the model on the command line --------------------------------------------------------------


def _answer(request: RecordedRequest) -> Reply:
    body = request.json()
    if body["model"].startswith("judge"):
        return completion(json.dumps({"justification": "It says hi.", "rating": "good"}))
    return completion("hi")


def test_model_and_judge_model_override_the_code_against_a_server(work: Path) -> None:
    (work / "agent.py").write_text(AGENT)
    rows = [{"id": f"s{i}", "input": f"say hi {i}", "expected": "hi"} for i in range(30)]
    write_jsonl(work / "hi.jsonl", rows)
    with FakeOpenAIServer(default=_answer) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
        data = run(
            "agent.py:agent", "--dataset", "hi.jsonl", "--evaluator", "exact_match",
            "--evaluator", "agent.py:judge", "--limit", "20", "--model", "gpt-x",
            "--model-arg", "temperature=0", "--model-arg", "top_p=0.5",
            "--judge-model", "judge-large", "--no-cache", env=env,
        )  # fmt: skip
        bodies = server.bodies
    agent_calls = [b for b in bodies if not b["model"].startswith("judge")]
    judge_calls = [b for b in bodies if b["model"].startswith("judge")]
    assert (len(agent_calls), len(judge_calls)) == (20, 20)
    assert {(b["model"], b["temperature"], b["top_p"]) for b in agent_calls} == {
        ("gpt-x", 0.0, 0.5)
    }
    assert {b["model"] for b in judge_calls} == {"judge-large"}
    assert (data["total"], data["overall"]["pass_rate"], data["run"]["model"]) == (20, 1.0, "gpt-x")
    manifest = json.loads((Path(data["run_dir"]) / "run.json").read_text())
    assert manifest["fingerprint"]["extra"]["model_override"] == {
        "model": "gpt-x", "parameters": {"temperature": 0, "top_p": 0.5},
    }  # fmt: skip


def test_model_flags_refuse_what_they_cannot_change(work: Path) -> None:
    base = ["tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match"]
    result = invoke("eval", "run", *base, "--model", "x")
    assert result.exit_code == 2 and "TARGET is a task function" in result.stderr
    result = invoke("eval", "run", *base, "--judge-model", "x")
    assert (
        result.exit_code == 2
        and "none of the evaluators is (or holds) an llm_judge" in result.stderr
    )


# -- compare, list, version ------------------------------------------------------------------


def test_compare_two_runs_pairs_experiments_first_try(work: Path) -> None:
    base = ["--dataset", "data.jsonl", "--evaluator", "exact_match"]
    run("tasks.py:echo", *base, "--run-id", "one")
    run("tasks.py:upper", *base, "--run-id", "two")
    result = invoke("eval", "compare", "one", "two", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["baseline"], list(data["comparisons"])) == ("one/baseline", ["two/baseline"])
    exps = ["--experiment", "a", "--experiment", "b"]
    run("tasks.py:echo", *base, *exps, "--run-id", "ab1")
    run("tasks.py:upper", *base, *exps, "--run-id", "ab2")
    pairs = json.loads(invoke("eval", "compare", "ab1", "ab2", "--json").stdout)["pairs"]
    assert [(p["baseline"], list(p["comparisons"])) for p in pairs] == [
        ("ab1/a", ["ab2/a"]), ("ab1/b", ["ab2/b"]),
    ]  # fmt: skip
    ambiguous = invoke("eval", "compare", "ab1", "two")
    assert ambiguous.exit_code == 2
    assert "--baseline NAME (one of a, b) and --treatment NAME (one of baseline)" in (
        ambiguous.stderr
    )
    chosen = invoke("eval", "compare", "ab1", "two", "--baseline", "b", "--json")
    assert json.loads(chosen.stdout)["baseline"] == "ab1/b"


def _fail_if_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    def copied(*args: Any) -> Any:
        raise AssertionError("a result was copied to be renamed")

    monkeypatch.setattr("weakincentives.cli._pairing._renamed", copied)


def test_compare_labels_two_runs_as_they_are_read(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each run's experiments are read as RUN_ID/NAME: no result is copied to rename it.
    base = ["--dataset", "data.jsonl", "--evaluator", "exact_match"]
    run("tasks.py:echo", *base, "--run-id", "one")
    run("tasks.py:upper", *base, "--run-id", "two")
    _fail_if_copied(monkeypatch)
    data = json.loads(invoke("eval", "compare", "one", "two", "--json").stdout)
    assert (data["baseline"], list(data["comparisons"])) == ("one/baseline", ["two/baseline"])
    assert data["comparisons"]["two/baseline"]["n_pairs"] == 5
    assert set(data["experiments"]) == {"one/baseline", "two/baseline"}


def test_compare_labels_a_run_and_its_copy_a_and_b(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Same run id on both sides: A/NAME and B/NAME, also read as such (no copies).
    base = ["--dataset", "data.jsonl", "--evaluator", "exact_match"]
    run("tasks.py:upper", *base, "--run-id", "same")
    shutil.copytree(work / "runs" / "same", work / "copy" / "same")
    _fail_if_copied(monkeypatch)
    result = invoke("eval", "compare", "same", "copy/same", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["baseline"], list(data["comparisons"])) == ("A/baseline", ["B/baseline"])
    assert data["comparisons"]["B/baseline"]["pass_rate_delta"] == 0.0


def test_compare_keeps_the_run_id_for_other_experiments_of_the_same_run(work: Path) -> None:
    # Same run id, different experiments: the labels stay RUN_ID/NAME (the results are
    # then renamed after reading, the rare case).
    exps = ["--experiment", "a", "--experiment", "b"]
    run("tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match", *exps,
        "--run-id", "ab")  # fmt: skip
    shutil.copytree(work / "runs" / "ab", work / "copy" / "ab")
    args = ["eval", "compare", "ab", "copy/ab", "--baseline", "a", "--treatment", "b"]
    data = json.loads(invoke(*args, "--json").stdout)
    assert (data["baseline"], list(data["comparisons"])) == ("ab/a", ["ab/b"])
    missing = invoke(*args[:4], "--baseline", "nope", "--treatment", "a")
    assert missing.exit_code == 2
    assert missing.stderr == (
        "error: no results for experiment 'nope'; experiments in the report: 'a', 'b'\n"
    )


def test_eval_list_shows_status_model_pass_rates_and_tags(work: Path) -> None:
    base = ["--dataset", "data.jsonl", "--evaluator", "exact_match"]
    run("tasks.py:upper", *base, "--run-id", "r1", "--tag", "nightly", "--note", "n1")
    run("tasks.py:echo", *base, "--run-id", "r2", "--experiment", "x", "--experiment", "y")
    rows = json.loads(invoke("eval", "list", "--json").stdout)
    by_id = {row["run_id"]: row for row in rows}
    assert by_id["r1"]["status"] == "complete"
    assert by_id["r1"]["pass_rate"] == {"baseline": 1.0}
    assert (by_id["r1"]["tags"], by_id["r1"]["note"]) == (["nightly"], "n1")
    assert by_id["r2"]["pass_rate"] == {"x": 0.0, "y": 0.0}
    tagged = json.loads(invoke("eval", "list", "--tag", "nightly", "--json").stdout)
    assert [row["run_id"] for row in tagged] == ["r1"]
    text = invoke("eval", "list").stdout
    assert "r1" in text and "complete" in text and "baseline 100.0% (n=5)" in text
    assert "nightly" in text
    assert "No runs in" in invoke("eval", "list", "--runs-dir", "elsewhere").stdout


def test_slice_with_an_unknown_key_lists_the_keys(work: Path) -> None:
    run("tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match", "--run-id", "s")
    result = invoke("eval", "report", "s", "--slice", "topics")
    assert result.exit_code == 2
    assert "--slice topics: no result has that metadata key; the run's keys: level, topic" in (
        result.stderr
    )
    assert "algebra" in invoke("eval", "report", "s", "--slice", "topic").stdout


def test_version_prints_the_package_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert (
        result.stdout == f"wink (weakincentives) {importlib.metadata.version('weakincentives')}\n"
    )


def test_reports_show_per_check_pass_rates_of_combined_evaluators(work: Path) -> None:
    base = ["tasks.py:upper", "--dataset", "data.jsonl", "--run-id", "c"]
    data = run(*base, "--evaluator", "tasks.py:two_checks", "--evaluator", "contains")
    checks = data["experiments"]["baseline"]["checks"]
    # two_checks: "IJKL" is too long; its own metrics come as two_checks.exact / .short.
    assert {name: c["pass_rate"] for name, c in checks.items()} == {
        "two_checks": 0.8, "two_checks.exact": 1.0, "two_checks.short": 0.8, "contains": 1.0,
    }  # fmt: skip
    assert checks["two_checks"]["pass_rate_ci"][0] < 0.8 < checks["two_checks"]["pass_rate_ci"][1]
    result = invoke("eval", "report", "c", "--html", work / "c.html")
    assert "baseline: checks" in result.stdout
    assert "80.0% [37.6%, 96.4%] (n=5)" in result.stdout
    assert "<h2>Checks</h2>" in (work / "c.html").read_text()
