"""The run record tells the whole truth (issue 14): provenance, inputs, failures, secrets.

Runs go through the real OpenAI adapter against a local server speaking its protocol.
"""

from __future__ import annotations

import json
import platform
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, completion
from tests.helpers.secrets import ENV_SECRETS, PLANTED, SECRETS, assert_no_secret
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest, package_version
from weakincentives.adapters.openai import OpenAIAdapter
from weakincentives.errors import ConfigurationError, FingerprintMismatchError
from weakincentives.evals import (
    Sample,
    Score,
    exact_match,
    llm_judge,
    run_eval,
)
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop

KEY = "sk-test-record-0123456789abcdef"


@dataclass(frozen=True)
class Question:
    text: str


@dataclass(frozen=True)
class Answer:
    answer: str


TEXT = PromptTemplate[Any](
    ns="tests", key="record", sections=(MarkdownSection("Q", "q", "$text", Question, role="user"),)
)
STRUCTURED = PromptTemplate[Answer](
    ns="tests",
    key="record-structured",
    sections=(MarkdownSection("Q", "q", "$text", Question, role="user"),),
    output_type=Answer,
)


class Agent(AgentLoop[str, Any]):
    def __init__(self, adapter: Any, template: PromptTemplate[Any] = TEXT) -> None:
        super().__init__(adapter=adapter)
        self.template = template

    def create_prompt(self, request: str) -> Prompt[Any]:
        return Prompt(self.template).bind(Question(request))


def echo(request: RecordedRequest) -> Reply:
    """Answer the last user message back (so exact_match passes)."""
    return completion(request.json()["messages"][-1]["content"].split()[-1])


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default=echo) as s:
        yield s


def samples(n: int = 3) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"q{i}") for i in range(n)]


def adapter(server: FakeOpenAIServer, **options: Any) -> OpenAIAdapter:
    model = options.pop("model", "record-model")
    return OpenAIAdapter(model, base_url=server.base_url, api_key=KEY, **options)


def lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


# -- provenance ----------------------------------------------------------------------


def test_manifest_records_the_model_its_parameters_and_where_the_run_came_from(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("")
    with adapter(server, temperature=0.0) as agent_model:
        report = run_eval(
            samples(), Agent(agent_model), exact_match, store=tmp_path / "runs",
            run_id="r1", dataset_path=dataset,
        )  # fmt: skip
    assert report.pass_rate == 1.0

    manifest = json.loads((tmp_path / "runs" / "r1" / "run.json").read_text())
    provenance = manifest["provenance"]
    agent = provenance["agent"]
    assert agent["provider"] == "openai" and agent["model"] == "record-model"
    assert agent["base_url"].rstrip("/") == server.base_url.rstrip("/")
    assert agent["parameters"]["temperature"] == 0.0
    assert agent["adapter"] == "weakincentives.adapters.openai.OpenAIAdapter"
    assert provenance["python_version"] == platform.python_version()
    assert provenance["package_version"] == package_version()
    assert provenance["host"]
    assert provenance["command"]
    assert provenance["dataset"] == {"sha256": report_sha(tmp_path), "path": str(dataset)}
    assert provenance["git_dirty"] in (True, False, None)
    assert manifest["fingerprint"]["models"]["agent"]["model"] == "record-model"
    assert KEY not in json.dumps(manifest)


def report_sha(tmp_path: Path) -> str:
    manifest = json.loads((tmp_path / "runs" / "r1" / "run.json").read_text())
    sha: str = manifest["fingerprint"]["dataset_sha256"]
    return sha


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        ({"model": "other-model"}, 'agent model: "record-model" -> "other-model"'),
        ({"temperature": 0.7}, "agent parameters.temperature: 0.0 -> 0.7"),
        ({"base_url": "http://127.0.0.1:9/v1"}, "agent base_url:"),
    ],
    ids=["model", "temperature", "base_url"],
)
def test_resume_against_another_model_is_refused_with_the_difference(
    tmp_path: Path, server: FakeOpenAIServer, change: dict[str, Any], shown: str
) -> None:
    with adapter(server, temperature=0.0) as first:
        run_eval(samples(), Agent(first), exact_match, store=tmp_path, run_id="r1")
    options: dict[str, Any] = {"temperature": 0.0, **change}
    base_url = options.pop("base_url", server.base_url)
    model = options.pop("model", "record-model")
    with (
        OpenAIAdapter(model, base_url=base_url, api_key=KEY, **options) as second,
        pytest.raises(FingerprintMismatchError) as caught,
    ):
        run_eval(samples(), Agent(second), exact_match, store=tmp_path, resume="r1")
    assert shown in str(caught.value)


def test_resume_with_the_same_model_is_accepted(tmp_path: Path, server: FakeOpenAIServer) -> None:
    with adapter(server) as first:
        run_eval(samples(), Agent(first), exact_match, store=tmp_path, run_id="r1")
    with adapter(server) as again:
        report = run_eval(samples(), Agent(again), exact_match, store=tmp_path, resume="r1")
    assert report.total == 3


def test_the_judge_model_is_recorded_and_fingerprinted(tmp_path: Path) -> None:
    def judge_model(request: ModelRequest) -> FunctionReply | str:
        return '{"justification": "fine", "rating": "good"}'

    judge = llm_judge(FunctionAdapter(judge_model, model_name="judge-1"), "is it right")
    run_eval(samples(1), str.upper, judge, store=tmp_path, run_id="r1")

    manifest = json.loads((tmp_path / "r1" / "run.json").read_text())
    (recorded,) = manifest["provenance"]["judges"]
    assert recorded["provider"] == "function"
    assert recorded["parameters"]["model_name"] == "judge-1"
    assert manifest["provenance"]["agent"] is None
    other = llm_judge(FunctionAdapter(judge_model, model_name="judge-2"), "is it right")
    with pytest.raises(FingerprintMismatchError, match=r"judge parameters\.model_name"):
        run_eval(samples(1), str.upper, other, store=tmp_path, resume="r1")


def test_a_function_target_that_declares_its_adapter_is_fingerprinted(tmp_path: Path) -> None:
    def task(text: str) -> str:
        return text

    task.adapter = FunctionAdapter(lambda r: "x", model_name="declared")  # type: ignore[attr-defined]
    run_eval(samples(1), task, exact_match, store=tmp_path, run_id="r1")
    manifest = json.loads((tmp_path / "r1" / "run.json").read_text())
    assert manifest["fingerprint"]["models"]["agent"]["parameters"]["model_name"] == "declared"


# -- what every sample saw --------------------------------------------------------------


def test_every_result_line_has_input_and_expected(tmp_path: Path, server: FakeOpenAIServer) -> None:
    with adapter(server) as model:
        run_eval(samples(), Agent(model), exact_match, store=tmp_path, run_id="r1")
    rows = sorted(lines(tmp_path / "r1"), key=lambda r: str(r["sample_id"]))
    assert [(r["input"], r["expected"]) for r in rows] == [(f"q{i}", f"q{i}") for i in range(3)]


def test_large_values_are_truncated_with_a_marker_and_can_be_turned_off(tmp_path: Path) -> None:
    big = [Sample(id="big", input={"text": "x" * 50}, expected="y" * 30)]
    run_eval(big, lambda v: "y" * 30, exact_match, store=tmp_path, run_id="r1", value_limit=20)
    (row,) = lines(tmp_path / "r1")
    assert row["input"] == '{"text":"' + "x" * 11 + "…[truncated: 61 chars]"
    assert row["expected"] == "y" * 20 + "…[truncated: 30 chars]"

    run_eval(big, lambda v: "y" * 30, exact_match, store=tmp_path, run_id="r2", record_inputs=False)
    (row,) = lines(tmp_path / "r2")
    assert row["input"] is None and row["expected"] is None


# -- failures keep their evidence -----------------------------------------------------------


def test_an_unparseable_structured_answer_keeps_transcript_tokens_and_kind(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    server.enqueue(completion("not json"), completion("still not json"))
    with adapter(server) as model:
        run_eval(samples(1), Agent(model, STRUCTURED), exact_match, store=tmp_path, run_id="r1")

    (row,) = lines(tmp_path / "r1")
    assert row["error_kind"] == "output_parsing"
    assert "does not parse" in row["error"]
    assert row["usage"]["input_tokens"] == 20 and row["usage"]["output_tokens"] == 10
    contents = [m["content"] for m in row["messages"]]
    assert "not json" in contents and "still not json" in contents
    assert any("Reply again" in (c or "") for c in contents)  # the retry is in the transcript


def test_a_failing_agent_keeps_its_tool_calls(tmp_path: Path) -> None:
    from tests.helpers import calculator_tool

    template = PromptTemplate[Any](
        ns="tests", key="tools", sections=TEXT.sections, tools=(calculator_tool(),)
    )

    def model(request: ModelRequest) -> FunctionReply | str:
        if request.turn == 0:
            return FunctionReply.call("calculate", a=2, op="+", b=2)
        raise RuntimeError("the provider hung up")

    run_eval(
        samples(1), Agent(FunctionAdapter(model), template), exact_match, store=tmp_path,
        run_id="r1",
    )  # fmt: skip
    (row,) = lines(tmp_path / "r1")
    assert row["error_kind"] == "agent" and "hung up" in row["error"]
    assert [t["name"] for t in row["tool_calls"]] == ["calculate"]
    assert row["usage"]["output_tokens"] > 0
    assert [m["role"] for m in row["messages"]][-2:] == ["assistant", "tool"]


def test_a_structured_loop_without_output_is_a_no_output_error(tmp_path: Path) -> None:
    class NoOutput(FunctionAdapter):
        def evaluate(self, prompt: Any, **kwargs: Any) -> Any:
            response = FunctionAdapter.evaluate(self, prompt, **kwargs)
            return type(response)(prompt_name=response.prompt_name, text="42", output=None)

    agent = Agent(NoOutput(lambda r: '{"answer": "42"}'), STRUCTURED)
    run_eval(samples(1), agent, lambda out, exp: Score(1.0, True), store=tmp_path, run_id="r1")
    (row,) = lines(tmp_path / "r1")
    assert row["error_kind"] == "no_output"
    assert "structured output" in row["error"]


# -- no secret reaches disk ----------------------------------------------------------------


def test_planted_secrets_reach_neither_results_nor_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV_SECRETS.items():
        monkeypatch.setenv(name, value)
    planted = [
        Sample(
            id=f"p{i}",
            input=text,
            expected="ok",
            metadata={"api_key": "ak-planted-123456", "note": f"in a prompt: {text}"},
        )
        for i, (_, text, _) in enumerate(PLANTED)
    ]

    def task(text: str) -> str:
        raise PermissionError(f"rejected {text}")

    run_eval(planted, task, exact_match, store=tmp_path, run_id="r1")
    for path in (tmp_path / "r1").iterdir():
        assert_no_secret(path.read_bytes(), [*SECRETS, "ak-planted-123456"], where=path.name)
    rows = lines(tmp_path / "r1")
    assert all(r["metadata"]["api_key"] == "[REDACTED]" for r in rows)


def _sync_task(text: str) -> str:
    if text == "q1":
        raise RuntimeError(f"boom with {KEY}")
    return text


async def _async_task(text: str) -> str:
    return _sync_task(text)


@pytest.mark.parametrize("task", [_sync_task, _async_task], ids=["sync", "async"])
@pytest.mark.parametrize(("scope", "bundled"), [("all", {"s0", "s1", "s2"}), ("failed", {"s1"})])
def test_bundles_all_or_failed_go_into_the_run_directory(
    tmp_path: Path, scope: Any, bundled: set[str], task: Any
) -> None:
    report = run_eval(samples(), task, exact_match, store=tmp_path, run_id="r1", bundles=scope)
    assert report.total == 3
    rows = {r["sample_id"]: r for r in lines(tmp_path / "r1")}
    have = {sid for sid, r in rows.items() if r["bundle_path"]}
    assert have == bundled
    for sid in have:
        path = Path(rows[sid]["bundle_path"])
        assert path.is_relative_to(tmp_path / "r1" / "bundles")
        with zipfile.ZipFile(path) as zf:
            assert "eval.json" in zf.namelist()
            for name in zf.namelist():
                assert_no_secret(zf.read(name), [KEY], where=f"{sid}/{name}")
    error = json.loads(zipfile.ZipFile(rows["s1"]["bundle_path"]).read("error.json"))
    assert "boom" in json.dumps(error)


def test_bundles_need_a_store() -> None:
    with pytest.raises(ConfigurationError, match="bundles= needs store="):
        run_eval(samples(1), str, exact_match, bundles="all")


# -- wink query and the report show it -------------------------------------------------------


def test_query_exposes_provenance_columns_and_inputs(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    from weakincentives.debug import query

    with adapter(server, temperature=0.2) as model:
        run_eval(samples(2), Agent(model), exact_match, store=tmp_path, run_id="r1")
    (run,) = query(
        tmp_path / "r1",
        "SELECT agent_provider, agent_model, json_extract(agent_parameters, '$.temperature') AS t,"
        " python_version, host, package_version FROM runs",
        cache=False,
    ).to_dicts()
    assert (run["agent_provider"], run["agent_model"], run["t"]) == ("openai", "record-model", 0.2)
    assert run["python_version"] == platform.python_version() and run["host"]
    rows = query(
        tmp_path / "r1", "SELECT sample_id, input, expected FROM results ORDER BY sample_id",
        cache=False,
    ).to_dicts()  # fmt: skip
    assert [(r["input"], r["expected"]) for r in rows] == [('"q0"', '"q0"'), ('"q1"', '"q1"')]


def test_the_viewer_shows_input_expected_and_a_failed_samples_partial_transcript(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    from weakincentives.debug._viewer_data import ViewerData

    server.enqueue(completion("not json"), completion("still not json"))
    with adapter(server) as model:
        run_eval(samples(1), Agent(model, STRUCTURED), exact_match, store=tmp_path, run_id="r1")
    data = ViewerData.open(tmp_path / "r1")
    (row,) = data.results("r1", [])["rows"]
    shown = data.result("r1", int(row["id"]))
    assert shown["sample"] == {"recorded": True, "input": "q0", "expected": "q0"}
    result = shown["result"]
    assert result["error_kind"] == "output_parsing"
    assert result["usage"]["output_tokens"] == 10
    assert [m["content"] for m in result["messages"] if m["role"] == "assistant"] == [
        "not json", "still not json",
    ]  # fmt: skip


def test_a_timed_out_sample_still_records_its_input_and_expected(tmp_path: Path) -> None:
    import anyio

    async def slow(text: str) -> str:
        await anyio.sleep(5)
        return text

    run_eval(samples(1), slow, exact_match, store=tmp_path, run_id="r1", timeout=0.05)
    (row,) = lines(tmp_path / "r1")
    assert row["error_kind"] == "timeout"
    assert (row["input"], row["expected"]) == ("q0", "q0")
