"""submit_dataset, submit_experiments and collect_results: the client side of EvalLoop."""

from __future__ import annotations

import time
from typing import Any

import pytest

from weakincentives.clock import FakeClock
from weakincentives.errors import ConfigurationError, MailboxConnectionError
from weakincentives.evals import (
    BASELINE,
    Dataset,
    EvalRequest,
    EvalResult,
    Experiment,
    Sample,
    Score,
    collect_results,
    submit_dataset,
    submit_experiments,
)
from weakincentives.runtime import InMemoryMailbox
from weakincentives.runtime.mailbox import FakeMailbox

DATASET: Dataset[str, str] = Dataset(
    samples=tuple(Sample(id=f"s{i}", input=f"q{i}", expected=f"a{i}") for i in range(3))
)
TREATMENT = Experiment(name="treatment", overrides_tag="v2")


def received(mailbox: InMemoryMailbox[Any, Any]) -> list[tuple[Any, str | None]]:
    """Every (body, reply-to name) in `mailbox`, in order (acknowledged)."""
    out = []
    while batch := mailbox.receive(max_messages=10):
        for message in batch:
            out.append((message.body, message.reply_to_name))
            message.acknowledge()
    return out


def result(
    sample_id: str = "s0",
    *,
    request_id: str | None = "r0",
    run_id: str | None = None,
    passed: bool = True,
) -> EvalResult:
    return EvalResult(
        sample_id=sample_id,
        experiment_name="baseline",
        latency_ms=1,
        score=Score(value=float(passed), passed=passed),
        request_id=request_id,
        run_id=run_id,
    )


# -- submitting ------------------------------------------------------------------------


def test_submit_dataset_sends_one_request_per_sample_with_reply_to() -> None:
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-requests")
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-results")

    assert submit_dataset(DATASET, TREATMENT, requests, reply_to=results, run_id="r-1") == 3

    sent = received(requests)
    assert [(b.sample.id, b.experiment, b.run_id, b.epoch) for b, _ in sent] == [
        (f"s{i}", TREATMENT, "r-1", 0) for i in range(3)
    ]
    assert {reply for _, reply in sent} == {"eval-results"}
    assert len({b.request_id for b, _ in sent}) == 3


def test_submit_dataset_without_an_experiment_uses_the_baseline() -> None:
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-requests")

    assert submit_dataset(DATASET, requests, reply_to="eval-results") == 3

    sent = received(requests)
    assert {(b.experiment, reply) for b, reply in sent} == {(BASELINE, "eval-results")}


def test_submit_dataset_without_reply_to_sends_none() -> None:
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-requests")
    submit_dataset(DATASET, BASELINE, requests)
    assert {reply for _, reply in received(requests)} == {None}


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((BASELINE,), "needs a requests mailbox"),
        (("baseline", InMemoryMailbox("x")), "expected an Experiment, got str"),
    ],
)
def test_submit_dataset_rejects_bad_arguments(args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        submit_dataset(DATASET, *args)


def test_submit_experiments_is_experiment_major_with_epochs() -> None:
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-requests")

    count = submit_experiments(DATASET, [BASELINE, TREATMENT], requests, epochs=2)

    bodies: list[EvalRequest[str, str]] = [b for b, _ in received(requests)]
    assert count == len(bodies) == 12
    assert [(b.experiment.name, b.epoch, b.sample.id) for b in bodies[:4]] == [
        ("baseline", 0, "s0"),
        ("baseline", 0, "s1"),
        ("baseline", 0, "s2"),
        ("baseline", 1, "s0"),
    ]
    assert [b.experiment.name for b in bodies[6:]] == ["treatment"] * 6


def test_submit_sends_in_batches_to_a_mailbox_that_has_send_many() -> None:
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-requests")
    batches: list[int] = []
    send_many = requests.send_many

    def counting(bodies: Any, **kwargs: Any) -> list[str]:
        batches.append(len(bodies))
        return send_many(bodies, **kwargs)

    requests.send_many = counting  # type: ignore[method-assign]
    big = Dataset(samples=tuple(Sample(id=f"s{i}", input="q", expected="a") for i in range(250)))

    assert submit_experiments(big, [BASELINE], requests, reply_to="out", epochs=2) == 500

    assert batches == [100, 100, 100, 100, 100]
    sent = received(requests)
    assert [(b.epoch, b.sample.id) for b, _ in sent] == [
        (epoch, f"s{i}") for epoch in range(2) for i in range(250)
    ]
    assert {reply for _, reply in sent} == {"out"}


def test_submit_sends_one_by_one_to_a_mailbox_without_send_many() -> None:
    requests: FakeMailbox[Any, Any] = FakeMailbox("eval-requests")
    requests.fail_next_send(MailboxConnectionError("down"))

    with pytest.raises(MailboxConnectionError):  # the first send fails, nothing is sent
        submit_dataset(DATASET, BASELINE, requests)
    assert submit_dataset(DATASET, BASELINE, requests) == 3

    assert requests.calls["send"] == 4
    bodies: list[str] = []
    while batch := requests.receive(max_messages=10):
        bodies.extend(m.body.sample.id for m in batch)
    assert bodies == ["s0", "s1", "s2"]


@pytest.mark.parametrize(
    ("experiments", "epochs", "match"),
    [
        ([], 1, "at least one experiment"),
        ([BASELINE, BASELINE.with_flag("x")], 1, "unique"),
        ([BASELINE], 0, "epochs"),
    ],
)
def test_submit_experiments_rejects_bad_arguments(
    experiments: list[Experiment], epochs: int, match: str
) -> None:
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-requests")
    with pytest.raises(ConfigurationError, match=match):
        submit_experiments(DATASET, experiments, requests, epochs=epochs)
    assert requests.approximate_count() == 0  # nothing half-sent


# -- collecting ------------------------------------------------------------------------


def test_duplicate_deliveries_of_one_request_count_once() -> None:
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-results")
    first = result("s0", request_id="r0", passed=True)
    results.send(first)
    results.send(result("s0", request_id="r0", passed=False))  # the same request, redelivered
    results.send(result("s1", request_id="r1"))

    report = collect_results(results, 2, timeout_seconds=5)

    assert report.total == 2 and report.complete
    assert report.results[0] == first  # the first delivery wins


def test_results_without_a_request_id_are_keyed_by_sample_experiment_and_epoch() -> None:
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-results")
    for sample_id in ("s0", "s0", "s1"):
        results.send(result(sample_id, request_id=None))

    report = collect_results(results, 2, timeout_seconds=5)

    assert sorted(r.sample_id for r in report.results) == ["s0", "s1"]


def test_results_of_other_runs_and_foreign_bodies_are_ignored() -> None:
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-results")
    results.send(result("s0", request_id="old", run_id="run-0"))
    results.send("not a result")
    results.send(result("s0", request_id="new", run_id="run-1"))

    report = collect_results(results, 1, timeout_seconds=5, run_id="run-1")

    assert [(r.request_id, r.run_id) for r in report.results] == [("new", "run-1")]
    assert report.run_id == "run-1" and report.complete
    assert results.approximate_count() == 0  # ignored bodies are acknowledged, not re-read


def test_a_timeout_with_missing_results_is_an_incomplete_report_on_a_fake_clock() -> None:
    clock = FakeClock()
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-results", clock=clock)
    results.send(result("s0", request_id="r0"))

    report = collect_results(results, 3, timeout_seconds=30, clock=clock, wait_time_seconds=0)

    assert (report.complete, report.missing, report.total) == (False, 2, 1)
    assert 30 <= clock.monotonic() <= 30.1


def test_a_tiny_real_timeout_returns_promptly() -> None:
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-results")
    start = time.monotonic()

    report = collect_results(results, 1, timeout_seconds=0.05)

    assert not report.complete and report.missing == 1
    assert time.monotonic() - start < 2


def test_nothing_expected_returns_at_once() -> None:
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-results")
    results.send(result())
    report = collect_results(results, 0, timeout_seconds=60)
    assert report.complete and report.total == 0
    assert results.approximate_count() == 1  # nothing was consumed


def test_a_closed_results_mailbox_ends_collection_with_what_arrived() -> None:
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-results")
    results.close()
    report = collect_results(results, 2, timeout_seconds=60)
    assert not report.complete and report.missing == 2


def test_a_receive_connection_error_is_retried() -> None:
    clock = FakeClock()
    results: FakeMailbox[Any, Any] = FakeMailbox("eval-results", clock=clock)
    results.send(result())
    results.fail_next_receive(MailboxConnectionError("redis went away"), times=2)

    report = collect_results(results, 1, timeout_seconds=30, clock=clock, wait_time_seconds=0)

    assert report.complete and results.calls["receive"] == 3


@pytest.mark.parametrize(
    "kwargs",
    [{"expected_count": -1}, {"timeout_seconds": -1.0}, {"wait_time_seconds": -1.0}],
)
def test_collect_results_rejects_negative_arguments(kwargs: dict[str, Any]) -> None:
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox("eval-results")
    arguments: dict[str, Any] = {"expected_count": 1, **kwargs}
    with pytest.raises(ConfigurationError):
        collect_results(results, **arguments)
