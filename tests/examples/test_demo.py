"""The offline demo runs end to end, shows a real difference, and its hints work.

`real_model.py` runs against a local OpenAI-compatible server that answers like the
offline models, so the real-endpoint variant is exercised over real HTTP too.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.helpers.fake_anthropic_server import FakeAnthropicServer, anthropic_usage, message
from tests.helpers.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, completion
from weakincentives import serde
from weakincentives.adapters import ModelRequest
from weakincentives.evals import EvalReport
from weakincentives.evals.report import format_usd
from weakincentives.runtime import ChatMessage, ToolCall

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
WINK = Path(sys.executable).with_name("wink")
TIMEOUT = 100


@dataclass(frozen=True)
class DemoRun:
    stdout: str
    runs_dir: Path
    run_dir: Path


def run_demo(runs_dir: Path, *args: str, n: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "WINK_DEMO_N"}
    if n is not None:
        env["WINK_DEMO_N"] = n
    return subprocess.run(
        [sys.executable, str(EXAMPLES / "demo.py"), "--runs-dir", str(runs_dir), *args],
        cwd=ROOT, env=env, text=True, capture_output=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The demo at its default size (what `make demo` runs), once for this module."""
    runs_dir = tmp_path_factory.mktemp("demo") / "runs"
    done = run_demo(runs_dir)
    assert done.returncode == 0, done.stderr
    run_dirs = [p for p in runs_dir.iterdir() if (p / "run.json").is_file()]
    assert len(run_dirs) == 1
    return DemoRun(done.stdout, runs_dir, run_dirs[0])


def test_the_demo_completes_every_sample_under_both_experiments(demo: DemoRun) -> None:
    report = EvalReport.load(demo.run_dir)
    assert report.complete
    assert report.total == 480
    assert set(report.experiment_names) == {"baseline", "careful"}
    # The offline model answers in prose twice now and then (baseline only): each such
    # sample is an `output_parsing` error that keeps its transcript and its turns.
    errors = [r for r in report.results if r.is_error]
    assert 0 < len(errors) < 20
    assert {(r.experiment_name, r.error_kind) for r in errors} == {("baseline", "output_parsing")}
    for r in errors:
        assert [m.role for m in r.messages][-3:] == ["assistant", "user", "assistant"]
        assert len(r.turns) == sum(m.role == "assistant" for m in r.messages)
        assert r.cost == pytest.approx(sum(t.cost or 0.0 for t in r.turns))
    lines = (demo.run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == 480
    assert {"category", "difficulty"} <= set(json.loads(lines[0])["metadata"])


def test_the_demo_comparison_shows_a_real_difference(demo: DemoRun) -> None:
    comparison = EvalReport.load(demo.run_dir).compare_experiments("baseline", "careful")
    assert comparison.delta_ci.low > 0.05
    assert comparison.p_value < 0.001
    assert comparison.regressions, "the careful prompt costs something too"
    for text in ("careful vs baseline", "Paired delta", "95% CI", "McNemar"):
        assert text in demo.stdout


def test_the_demo_scores_with_output_session_and_judge_checks(demo: DemoRun) -> None:
    first = json.loads((demo.run_dir / "results.jsonl").read_text().splitlines()[0])
    names = {m["name"].split(".")[0] for m in first["score"]["metrics"]}
    assert {"value_and_unit", "required_tool", "all_tools_succeeded()"} <= names
    assert "explanation_judge" in names
    assert "max_model_requests(3)" in names


def hint(stdout: str, label: str) -> list[str]:
    line = next(x for x in stdout.splitlines() if x.strip().startswith(f"{label}:"))
    words = shlex.split(line.split(":", 1)[1])
    return [str(WINK) if w == ".venv/bin/wink" else w for w in words]


def test_the_demo_resume_hint_matches_the_run(demo: DemoRun) -> None:
    command = hint(demo.stdout, "resume")
    assert command[:4] == [str(WINK), "eval", "run", "examples/calc_suite.py:suite"]
    done = subprocess.run(
        [*command, "--json"], cwd=ROOT, text=True, capture_output=True, timeout=TIMEOUT,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total"] == 480
    assert len((demo.run_dir / "results.jsonl").read_text().splitlines()) == 480


def test_the_demo_report_hint_works(demo: DemoRun) -> None:
    done = subprocess.run(
        hint(demo.stdout, "report"), cwd=ROOT, text=True, capture_output=True,
        timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Pass rate by difficulty" in done.stdout


@pytest.mark.parametrize(("how", "n"), [("env", "10"), ("flag", "12")])
def test_a_smaller_demo(tmp_path: Path, how: str, n: str) -> None:
    args = ("--n", n) if how == "flag" else ()
    done = run_demo(tmp_path / "runs", *args, n=n if how == "env" else None)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    assert EvalReport.load(run_dir).total == 2 * int(n)


# -- real_model.py against an OpenAI-compatible server -------------------------------------------


@pytest.fixture
def examples() -> Iterator[dict[str, ModuleType]]:
    path, modules = list(sys.path), set(sys.modules)
    sys.path.insert(0, str(EXAMPLES))
    yield {name: importlib.import_module(name) for name in ("calc_agent", "calc_suite")}
    sys.path[:] = path
    # Only the examples' own modules go: a library imported on first use (numpy) cannot
    # be imported twice in one process.
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None)
        if file is None or Path(file).resolve().is_relative_to(EXAMPLES):
            del sys.modules[name]


def _message(m: dict[str, Any]) -> ChatMessage:
    calls = tuple(
        ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in m.get("tool_calls") or ()
    )
    return ChatMessage(
        role=m["role"], content=m.get("content"), tool_calls=calls,
        tool_call_id=m.get("tool_call_id"),
    )  # fmt: skip


def offline_server(examples: dict[str, ModuleType]) -> FakeOpenAIServer:
    """A server answering like the offline agent model (requests with tools) and judge."""

    def respond(request: RecordedRequest) -> Reply:
        body = request.json()
        messages = tuple(_message(m) for m in body["messages"])
        turn = sum(1 for m in messages if m.role == "assistant")
        agent = bool(body.get("tools"))
        model = (
            examples["calc_agent"].offline_model if agent else examples["calc_suite"].offline_judge
        )
        reply = model(ModelRequest(messages=messages, turn=turn))
        if reply.tool_calls:
            return completion(tool_calls=[(c.name, c.arguments) for c in reply.tool_calls])
        return completion(serde.dumps(reply.output).decode())

    return FakeOpenAIServer(default=respond)


def test_real_model_example_runs_against_an_openai_compatible_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, examples: dict[str, ModuleType]
) -> None:
    real_model = importlib.import_module("real_model")
    with offline_server(examples) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_MODEL", "agent-model")
        monkeypatch.setenv("WINK_JUDGE_MODEL", "judge-model")
        code = real_model.main(["--n", "8", "--runs-dir", str(tmp_path / "runs")])
    assert code == 0
    (run_dir,) = (p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    report = EvalReport.load(run_dir)
    assert report.total == 16
    assert report.error_count == 0
    models = {b["model"] for b in server.bodies}
    assert models == {"agent-model", "judge-model"}
    assert any(b.get("response_format") for b in server.bodies)
    # The adapters describe themselves: nothing is added by hand, and both are recorded.
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["fingerprint"]["extra"] == {}
    models = manifest["fingerprint"]["models"]
    assert (models["agent"]["model"], models["judge"]["model"]) == ("agent-model", "judge-model")
    assert models["agent"]["parameters"]["temperature"] == 0.0
    assert manifest["provenance"]["dataset"]["path"].endswith("calc-questions-8.jsonl")


# -- real_model.py --provider anthropic against a Messages API server ------------------------------


def _anthropic_messages(body: dict[str, Any]) -> tuple[ChatMessage, ...]:
    out: list[ChatMessage] = []
    for m in body["messages"]:
        if m["role"] == "assistant":
            texts = [b["text"] for b in m["content"] if b["type"] == "text"]
            calls = tuple(
                ToolCall(b["id"], b["name"], json.dumps(b["input"]))
                for b in m["content"]
                if b["type"] == "tool_use"
            )
            out.append(
                ChatMessage(role="assistant", content="".join(texts) or None, tool_calls=calls)
            )
            continue
        for b in m["content"]:
            if b["type"] == "tool_result":
                out.append(
                    ChatMessage(role="tool", content=b["content"], tool_call_id=b["tool_use_id"])
                )
            else:
                out.append(ChatMessage(role="user", content=b["text"]))
    return tuple(out)


CACHED_USAGE = anthropic_usage(200, 30, cache_read=1000, cache_write=0)


def anthropic_offline_server(examples: dict[str, ModuleType]) -> FakeAnthropicServer:
    """A Messages API server answering like the offline agent model and judge."""

    def respond(request: RecordedRequest) -> Reply:
        body = request.json()
        messages = _anthropic_messages(body)
        turn = sum(1 for m in messages if m.role == "assistant")
        agent = bool(body.get("tools"))
        model = (
            examples["calc_agent"].offline_model if agent else examples["calc_suite"].offline_judge
        )
        reply = model(ModelRequest(messages=messages, turn=turn))
        # Like the real API, the answer names the model that was asked for.
        if reply.tool_calls:
            uses = [(c.name, json.loads(c.arguments)) for c in reply.tool_calls]
            return message(tool_uses=uses, usage=CACHED_USAGE, model=body["model"])
        return message(serde.dumps(reply.output).decode(), usage=CACHED_USAGE, model=body["model"])

    return FakeAnthropicServer(default=respond)


def test_real_model_example_runs_against_an_anthropic_server_and_prints_its_cost(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    examples: dict[str, ModuleType],
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    real_model = importlib.import_module("real_model")
    with anthropic_offline_server(examples) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_MODEL", "claude-haiku-4-5")
        monkeypatch.setenv("WINK_JUDGE_MODEL", "claude-judge")
        args = ["--provider", "anthropic", "--n", "4", "--runs-dir", str(tmp_path / "runs")]
        code = real_model.main(args)
    assert code == 0
    (run_dir,) = (p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    report = EvalReport.load(run_dir)
    assert (report.total, report.error_count) == (8, 0)
    assert {b["model"] for b in server.bodies} == {"claude-haiku-4-5", "claude-judge"}
    assert any(b.get("output_config") for b in server.bodies)  # structured output
    assert any(b.get("tools") for b in server.bodies)
    # Every agent call reported 1000 cache-read tokens; the stored results keep them.
    calls = sum(1 for b in server.bodies if b.get("tools"))
    usage = [r.usage for r in report.results]
    assert sum(u.cached_tokens for u in usage) == 1000 * calls
    assert sum(u.input_tokens for u in usage) == 1200 * calls
    # claude-haiku-4-5: $1 in, $0.10 cached, $5 out per million tokens.
    per_call = (200 * 1.0 + 1000 * 0.1 + 30 * 5.0) / 1e6
    expected = calls * per_call
    out = capsys.readouterr().out
    total = format_usd(expected)
    assert f"Cost: {total} (agent {total}, no priced judge calls)" in out
    # Each stored result has its transcript (tool calls included) and its cost; the judge's
    # model is not in the price table, so its cost is unpriced (None), not zero.
    # (One sample's agent made several calls: its cost is at least one call's.)
    assert sum(r.cost or 0.0 for r in report.results) == pytest.approx(expected)
    assert all(r.cost is not None and r.cost >= per_call for r in report.results)
    assert all(r.judge_cost is None for r in report.results)
    assert all(r.messages and r.tool_calls for r in report.results)
    assert "unpriced" not in out
