"""The spec's names work as the spec (and its reference implementation) spells them.

Each name is an alias of this project's own name, not a second implementation: the
tests check that both spellings reach the same thing. `tests/spec/ADAPTATIONS.md` lists
every alias and why it exists.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.helpers import ScriptedModel
from weakincentives import serde
from weakincentives.adapters import (
    CacheableAdapter,
    FunctionAdapter,
    ProviderAdapter,
)
from weakincentives.clock import FakeClock
from weakincentives.contrib.mailbox import MailboxCodec
from weakincentives.debug import DebugBundle, DebugBundleConfig, bundle_recorder
from weakincentives.errors import ConfigurationError
from weakincentives.evals import (
    BASELINE,
    EvalConfig,
    EvalLoop,
    EvalRequest,
    EvalResult,
    Evaluator,
    JudgeOutput,
    JudgeRating,
    Sample,
    Score,
    SessionEvaluator,
    TrajectoryScorer,
    all_of,
    any_of,
    contains,
    evaluate,
    exact_match,
    is_session_aware,
    run_eval,
    tool_not_called,
)
from weakincentives.evals._records import build_result
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop, AgentLoopRequest, AgentLoopResult, InMemoryMailbox
from weakincentives.runtime.dlq import DeadLetter, DLQPolicy
from weakincentives.runtime.mailbox import Mailbox, MailboxFactory, MailboxResolver
from weakincentives.runtime.session import ChatMessage, Session, SessionView, TokenUsage

# -- adapters: ProviderAdapter[JudgeOutput] --------------------------------------------------


def test_provider_adapter_is_subscriptable_like_the_draft_writes_it() -> None:
    judge_type = ProviderAdapter[JudgeOutput]
    assert judge_type.__origin__ is ProviderAdapter  # type: ignore[attr-defined]
    assert CacheableAdapter[str].__origin__ is CacheableAdapter  # type: ignore[attr-defined]


def test_every_adapter_still_matches_the_bare_and_the_subscripted_protocol() -> None:
    adapter = FunctionAdapter(ScriptedModel("ok"))
    assert isinstance(adapter, CacheableAdapter)

    def judge_with(judge: ProviderAdapter[JudgeOutput]) -> ProviderAdapter[JudgeOutput]:
        return judge

    assert judge_with(adapter) is adapter  # structurally typed: mypy checks this line too


# -- runtime: DLQPolicy(max_delivery_count=...) ----------------------------------------------


def _dead() -> InMemoryMailbox[DeadLetter[Any], None]:
    return InMemoryMailbox(name="dead")


def test_dlq_policy_takes_the_reference_spelling() -> None:
    dead = _dead()
    policy: DLQPolicy[Any] = DLQPolicy(dead, max_delivery_count=3)
    assert policy.max_deliveries == 3
    assert policy.max_delivery_count == 3
    assert policy == DLQPolicy(dead, max_deliveries=3)
    assert DLQPolicy(dead).max_delivery_count == 5  # one default, read under both names


def test_dlq_policy_refuses_two_different_limits() -> None:
    with pytest.raises(ConfigurationError, match="max_delivery_count"):
        DLQPolicy(_dead(), max_deliveries=3, max_delivery_count=4)
    assert DLQPolicy(_dead(), max_deliveries=2, max_delivery_count=2).max_deliveries == 2


def test_dlq_policy_checks_the_alias_like_the_name() -> None:
    with pytest.raises(ConfigurationError, match="at least 1"):
        DLQPolicy(_dead(), max_delivery_count=0)


def test_dlq_policy_is_still_a_frozen_dataclass() -> None:
    policy: DLQPolicy[Any] = DLQPolicy(_dead(), max_delivery_count=2)
    assert [f.name for f in dataclasses.fields(policy)] == [
        "mailbox",
        "max_deliveries",
        "dead_letter_on",
        "never_dead_letter",
    ]
    assert dataclasses.replace(policy, max_deliveries=7).max_delivery_count == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_deliveries = 9  # type: ignore[misc]


# -- runtime: AgentLoop(requests=...) ---------------------------------------------------------

ECHO = PromptTemplate[str](
    ns="spec",
    key="echo",
    sections=(MarkdownSection("Question", "question", "What is 2 + 2?", role="user"),),
)


class EchoLoop(AgentLoop[str, str]):
    def create_prompt(self, request: str) -> Prompt[str]:
        del request
        return Prompt(ECHO)


def test_agent_loop_serves_the_requests_mailbox_given_at_construction() -> None:
    requests: InMemoryMailbox[AgentLoopRequest[str], AgentLoopResult[str]] = InMemoryMailbox(
        name="requests"
    )
    replies: InMemoryMailbox[AgentLoopResult[str], None] = InMemoryMailbox(name="replies")
    loop = EchoLoop(adapter=FunctionAdapter(ScriptedModel("4")), requests=requests)
    assert loop.requests is requests
    requests.send(AgentLoopRequest(request="2 + 2?"), reply_to=replies)

    stats = loop.run(until_drained=True, wait_time_seconds=0)

    assert stats.succeeded == 1
    [reply] = replies.receive(max_messages=10)
    assert reply.body.text == "4"


def test_agent_loop_run_argument_wins_over_the_constructor_mailbox() -> None:
    at_init: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="at-init")
    at_run: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="at-run")
    results: InMemoryMailbox[Any, None] = InMemoryMailbox(name="results")
    loop = EchoLoop(adapter=FunctionAdapter(ScriptedModel("4")), requests=at_init)
    at_run.send(AgentLoopRequest(request="q"))

    loop.run(at_run, results=results, until_drained=True, wait_time_seconds=0)

    assert results.approximate_count() == 1
    assert at_run.approximate_count() == 0


def test_agent_loop_run_without_any_mailbox_says_what_to_pass() -> None:
    loop = EchoLoop(adapter=FunctionAdapter(ScriptedModel("4")))
    assert loop.requests is None
    with pytest.raises(ConfigurationError, match="requests="):
        loop.run(until_drained=True, wait_time_seconds=0)


# -- debug: DebugBundle.load -------------------------------------------------------------------


def test_debug_bundle_load_is_open(tmp_path: Path) -> None:
    clock = FakeClock()
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, kind="eval", request_id="req-1", clock=clock) as rec:
        rec.set_request({"sample": "s"})
    assert rec.path is not None
    loaded = DebugBundle.load(rec.path)
    opened = DebugBundle.open(rec.path)
    assert loaded.path == opened.path == rec.path
    assert loaded.manifest == opened.manifest
    assert loaded.request == {"sample": "s"}


# -- evals: an untyped mailbox's plain-JSON requests ----------------------------------------


def test_eval_loop_reads_a_request_sent_as_plain_json() -> None:
    """An untyped `RedisMailbox` (as the guide builds it) delivers bodies as JSON values."""
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="requests")
    replies: InMemoryMailbox[Any, None] = InMemoryMailbox(name="replies")
    request = EvalRequest(sample=Sample(id="q1", input="2 + 2?", expected="4"), experiment=BASELINE)
    requests.send(serde.dump(request), reply_to=replies)
    loop = EchoLoop(adapter=FunctionAdapter(ScriptedModel("4")))

    EvalLoop(loop=loop, evaluator=exact_match, requests=requests).run(
        until_drained=True, wait_time_seconds=0
    )

    [reply] = replies.receive()
    assert reply.body.sample_id == "q1" and reply.body.passed
    assert reply.body.request_id == str(request.request_id)


def test_eval_loop_dead_letters_json_that_is_no_request() -> None:
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="requests")
    dead: InMemoryMailbox[DeadLetter[Any], None] = InMemoryMailbox(name="dead")
    requests.send({"sample": {"id": "q1"}})
    loop = EchoLoop(adapter=FunctionAdapter(ScriptedModel("4")))

    EvalLoop(loop=loop, evaluator=exact_match, requests=requests, dlq=DLQPolicy(dead)).run(
        until_drained=True, wait_time_seconds=0
    )

    [letter] = dead.receive()
    assert letter.body.reason == "non_retryable"  # dead-lettered at once, never retried
    assert letter.body.error_type.endswith("MessageDecodeError")
    assert "EvalRequest" in (letter.body.error_message or "")


# -- evals: combinators of plain evaluators, judge output -----------------------------------


@pytest.mark.parametrize("combine", [all_of, any_of])
def test_a_plain_combinator_also_takes_a_session(combine: Any) -> None:
    evaluator = combine(exact_match, contains)
    assert not is_session_aware(evaluator)  # still run as (output, expected)
    session = SessionView(Session())
    assert evaluator("4", "4", session) == evaluator("4", "4")
    assert not evaluator("5", "4", session).passed


def test_a_plain_combinator_fits_where_a_session_evaluator_is_expected() -> None:
    inner = all_of(exact_match, contains)
    outer = all_of(inner, tool_not_called("fallback"))  # session-aware
    assert is_session_aware(outer)
    assert outer("4", "4", SessionView(Session())).passed


@pytest.mark.parametrize(
    ("rating", "score", "passed"),
    [("excellent", 1.0, True), ("good", 0.75, True), ("fair", 0.5, False), ("wrong", 0.0, False)],
)
def test_judge_output_reads_as_the_drafts_score_passed_reason(
    rating: JudgeRating, score: float, passed: bool
) -> None:
    out = JudgeOutput(justification="because", rating=rating)
    assert (out.score, out.passed, out.reason) == (score, passed, "because")
    assert out.reason is out.justification


# -- evals: EvalResult as EVALS.md writes it -------------------------------------------------


def _explode(question: str) -> str:
    raise RuntimeError("model exploded")


def test_error_text_is_the_message_and_latency_whole_milliseconds() -> None:
    samples = [Sample(id="a", input="hi", expected="HI")]
    [failed] = run_eval(samples, _explode, exact_match).results
    assert failed.error == "model exploded"  # EVALS.md: `error` is the error message
    assert failed.score.reason == "model exploded"
    assert failed.error_kind == "agent"
    [ok] = run_eval(samples, str.upper, exact_match).results
    assert type(ok.latency_ms) is int and type(failed.latency_ms) is int


def test_an_exception_without_a_message_is_named_by_its_type() -> None:
    def silent(question: str) -> str:
        raise KeyError

    [failed] = run_eval([Sample(id="a", input="hi", expected="HI")], silent, exact_match).results
    assert failed.error == "KeyError"


def test_latency_rounds_to_whole_milliseconds_on_the_per_sample_path() -> None:
    result = build_result(
        sample_id="a", experiment_name="x", score=Score(value=1.0, passed=True),
        latency_ms=12.6, usage=TokenUsage(), metadata={},
    )  # fmt: skip
    assert result.latency_ms == 13 and type(result.latency_ms) is int


# -- evals: EvalConfig, max_samples, experiment_name, prepare_messages -----------------------


def _samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"x{i}", expected=f"X{i}") for i in range(n)]


def test_eval_config_runs_the_first_max_samples_under_its_experiment_name() -> None:
    config = EvalConfig(target=str.upper, max_samples=2, experiment_name="upper_smoke")
    report = anyio.run(evaluate, _samples(5), config, exact_match)
    assert [r.sample_id for r in report.results] == ["s0", "s1"]
    assert {r.experiment_name for r in report.results} == {"upper_smoke"}
    assert report.config["experiment_name"] == "upper_smoke"
    assert report.config["max_concurrent"] == 16 and report.pass_rate == 1.0


def test_max_samples_also_limits_a_streamed_dataset_and_works_as_a_keyword() -> None:
    report = run_eval((s for s in _samples(5)), str.upper, exact_match, max_samples=3)
    assert report.total == 3
    assert report.config["experiment_name"] == "baseline"


def test_eval_config_is_a_frozen_value_to_replace() -> None:
    base = EvalConfig(target=str.upper, max_concurrent=2)
    variant = dataclasses.replace(base, max_samples=1, experiment_name="v")
    assert (base.max_samples, variant.max_samples, variant.max_concurrent) == (None, 1, 2)
    with pytest.raises(ConfigurationError, match="max_samples"):
        EvalConfig(target=str.upper, max_samples=-1)


def test_prepare_messages_is_what_the_target_receives() -> None:
    seen: list[Any] = []

    def prepare(sample: Sample[Any, Any]) -> list[ChatMessage]:
        return [
            ChatMessage(role="system", content="Shout."),
            ChatMessage(role="user", content=sample.input),
        ]

    def target(messages: list[ChatMessage]) -> str:
        seen.append(messages)
        return str(messages[-1].content).upper()

    report = run_eval(_samples(2), target, exact_match, prepare_messages=prepare)
    assert report.pass_rate == 1.0
    assert [m[-1].content for m in seen] == ["x0", "x1"]
    assert all(isinstance(m, list) and m[0].content == "Shout." for m in seen)


# -- every protocol that carries a type is subscriptable ------------------------------------


@pytest.mark.parametrize(
    ("protocol", "args"),
    [
        (ProviderAdapter, (JudgeOutput,)),
        (CacheableAdapter, (str,)),
        (Evaluator, (str, str)),
        (SessionEvaluator, (str, str)),
        (TrajectoryScorer, (dict, str)),
        (Mailbox, (EvalRequest, EvalResult)),
        (MailboxFactory, (str,)),
        (MailboxResolver, (str,)),
        (MailboxCodec, (str,)),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_protocols_with_a_type_parameter_are_subscriptable(
    protocol: Any, args: tuple[Any, ...]
) -> None:
    alias = protocol[args if len(args) > 1 else args[0]]
    assert alias.__origin__ is protocol and alias.__args__ == args


def test_a_result_reads_back_its_sample() -> None:
    sample = Sample(id="a", input="hi", ground_truth="HI", metadata={"level": 1})
    [result] = run_eval([sample], str.upper, exact_match).results
    assert result.sample == sample
    assert result.sample.ground_truth == "HI"


def test_an_older_record_with_a_fractional_latency_still_reads() -> None:
    line = (
        b'{"sample_id":"a","experiment_name":"x","score":{"value":1.0,"passed":true},'
        b'"latency_ms":12.6}'
    )
    result = serde.loads(EvalResult, line)
    assert result.latency_ms == 13 and type(result.latency_ms) is int
    assert serde.loads(EvalResult, serde.dumps(result)) == result
