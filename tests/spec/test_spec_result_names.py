"""The spec's names for a result and for `evaluate` (issue #21 point 2).

- `EvalResult.session_id` (guide-evaluation-chapter.md's class diagram): the id of the
  session the sample ran in, on the result, in the stored line, in `wink query`'s
  `results` table and in the viewer's API; the same id as the sample's debug bundle.
- `EvalResult.trajectory` (evaluation-abstractions.md): a read-only view of the result's
  parts as a `Trajectory`, never stored twice.
- `evaluate(samples=, config=, score_fn=)`: the spec's keywords for `dataset`, `target`
  and `evaluator`.
"""

from __future__ import annotations

import functools
import json
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from weakincentives import serde
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.evals import (
    EvalConfig,
    EvalLoop,
    EvalRequest,
    EvalResult,
    RunStore,
    Sample,
    Score,
    Trajectory,
    evaluate,
    exact_match,
    run_eval,
    submit_dataset,
)
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate, Tool, ToolContext
from weakincentives.prompt import ToolResult as ToolReturn
from weakincentives.runtime import AgentLoop, InMemoryMailbox, Session


@dataclass(frozen=True, slots=True)
class Question:
    text: str


@dataclass(frozen=True, slots=True)
class Lookup:
    word: str


def lookup(params: Lookup, context: ToolContext) -> ToolReturn:
    return ToolReturn(message=params.word.upper(), value=params.word.upper())


TEMPLATE = PromptTemplate[Any](
    ns="spec-results",
    key="shout",
    sections=(MarkdownSection("Question", "question", "$text", Question, role="user"),),
    tools=(Tool(name="lookup", description="Shout a word.", params_type=Lookup, handler=lookup),),
)


def model(request: ModelRequest) -> FunctionReply | str:
    """Calls `lookup` once, then answers with what it returned."""
    answers = request.tool_messages()
    if not answers:
        return FunctionReply.call("lookup", word=request.last_user_text().rsplit("\n", 1)[-1])
    return str(answers[-1].content)


class Shout(AgentLoop[Question, Any]):
    def create_prompt(self, request: Question) -> Prompt[Any]:
        return Prompt(TEMPLATE).bind(request)


def questions(n: int) -> list[Sample[Question, str]]:
    return [Sample(id=f"s{i}", input=Question(f"q{i}"), expected=f"Q{i}") for i in range(n)]


def agent() -> Shout:
    return Shout(adapter=FunctionAdapter(model))


# -- EvalResult.session_id ---------------------------------------------------------------


def test_each_result_names_the_session_its_bundle_records(tmp_path: Path) -> None:
    report = run_eval(
        questions(3), agent(), exact_match, store=tmp_path, run_id="r1", bundles="all"
    )
    assert report.pass_rate == 1.0
    stored = RunStore(tmp_path).open("r1").latest_results()
    ids = [str(r.session_id) for r in stored]
    assert len(set(ids)) == 3 and all(uuid.UUID(str(i)).version == 4 for i in ids)
    for result in stored:
        with zipfile.ZipFile(str(result.bundle_path)) as bundle:
            manifest = json.loads(bundle.read("manifest.json"))
        assert manifest["ids"]["session_id"] == result.session_id
    lines = (tmp_path / "r1" / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["session_id"] for line in lines) == sorted(ids)


def test_query_and_the_viewer_show_the_session_id(tmp_path: Path) -> None:
    from weakincentives.debug import query
    from weakincentives.debug._viewer_data import ViewerData

    run_eval(questions(2), agent(), exact_match, store=tmp_path, run_id="r1")
    stored = {r.sample_id: r.session_id for r in RunStore(tmp_path).open("r1").latest_results()}
    rows = query(
        tmp_path / "r1", "SELECT sample_id, session_id FROM results", cache=False
    ).to_dicts()
    assert {r["sample_id"]: r["session_id"] for r in rows} == stored
    data = ViewerData.open(tmp_path / "r1")
    shown = {
        row["sample_id"]: data.result("r1", int(row["id"]))["result"]["session_id"]
        for row in data.results("r1", [])["rows"]
    }
    assert shown == stored


def test_a_failed_run_still_names_its_session() -> None:
    def broken(request: ModelRequest) -> FunctionReply:
        raise RuntimeError("model down")

    loop = Shout(adapter=FunctionAdapter(broken))
    (result,) = run_eval(questions(1), loop, exact_match).results
    assert result.error_kind == "agent" and result.session_id is not None


def test_a_session_is_named_only_when_the_run_made_one() -> None:
    def aware(output: str, expected: str, session: Session) -> Score:
        return Score(value=1.0, passed=output == expected)

    samples = [Sample(id="a", input="hi", expected="HI")]
    (plain,) = run_eval(samples, str.upper, exact_match).results
    (read,) = run_eval(samples, str.upper, aware).results
    assert plain.session_id is None  # a function scored plainly runs without a session
    assert read.session_id is not None


def test_the_mailbox_path_carries_the_session_id_and_old_lines_read_as_none() -> None:
    requests: InMemoryMailbox[EvalRequest[Any, Any], EvalResult] = InMemoryMailbox("requests")
    results: InMemoryMailbox[EvalResult, None] = InMemoryMailbox("results")
    submit_dataset(questions(2), requests, reply_to=results)
    EvalLoop(loop=agent(), evaluator=exact_match, requests=requests).run(
        until_drained=True, wait_time_seconds=0
    )
    got = [m.body for m in results.receive(max_messages=10)]
    assert len({r.session_id for r in got}) == 2 and None not in {r.session_id for r in got}
    assert serde.loads(EvalResult, serde.dumps(got[0])).session_id == got[0].session_id
    old = (
        b'{"sample_id":"a","experiment_name":"x","score":{"value":1,"passed":true},"latency_ms":1}'
    )
    assert serde.loads(EvalResult, old).session_id is None


# -- EvalResult.trajectory ---------------------------------------------------------------


def test_the_trajectory_is_built_from_the_results_parts() -> None:
    (result,) = run_eval(questions(1), agent(), exact_match).results
    trajectory = result.trajectory
    assert isinstance(trajectory, Trajectory)
    assert trajectory == Trajectory(
        messages=result.messages, tool_calls=result.tool_calls, output=result.output,
        usage=result.usage,
    )  # fmt: skip
    assert [c.name for c in trajectory.tool_calls] == ["lookup"]
    assert trajectory.messages[-1].content == "Q0" and trajectory.session is None
    view = vars(EvalResult)["trajectory"]
    assert isinstance(view, property) and view.fset is None  # a read-only view
    assert "trajectory" not in serde.dump(result)  # nothing stored twice


# -- evaluate(samples=, config=, score_fn=) ----------------------------------------------


def _run(**kwargs: Any) -> Any:
    return anyio.run(functools.partial(evaluate, **kwargs))


def test_evaluate_takes_the_specs_keywords() -> None:
    samples = [Sample(id=f"s{i}", input=f"x{i}", expected=f"X{i}") for i in range(3)]
    config = EvalConfig(target=str.upper, max_samples=2, experiment_name="spec")
    by_spec = _run(samples=samples, config=config, score_fn=exact_match)
    ours = _run(dataset=samples, target=config, evaluator=exact_match)
    assert [r.key for r in by_spec.results] == [r.key for r in ours.results]
    assert by_spec.pass_rate == ours.pass_rate == 1.0
    assert by_spec.config["experiment_name"] == "spec"
    mixed = anyio.run(functools.partial(evaluate, samples, config=config, score_fn=exact_match))
    assert mixed.total == 2


@pytest.mark.parametrize(
    ("ours", "spec"), [("dataset", "samples"), ("target", "config"), ("evaluator", "score_fn")]
)
def test_both_spellings_of_one_argument_are_a_type_error(ours: str, spec: str) -> None:
    samples = [Sample(id="a", input="x", expected="X")]
    arguments: dict[str, Any] = {"dataset": samples, "target": str.upper, "evaluator": exact_match}
    arguments[spec] = arguments[ours]
    with pytest.raises(TypeError, match=f"got both {ours}= and {spec}=.*pass one of them"):
        _run(**arguments)


def test_a_missing_argument_names_both_spellings() -> None:
    with pytest.raises(
        TypeError, match="missing required argument: 'evaluator' \\(or 'score_fn'\\)"
    ):
        _run(samples=[Sample(id="a", input="x", expected="X")], config=str.upper)
