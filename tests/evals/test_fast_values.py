"""Values the runner makes per sample by faster routes are the values the slow routes make."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import pickle
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from weakincentives import serde
from weakincentives.evals._records import (
    EvalRequest,
    EvalResult,
    Metric,
    Sample,
    Score,
    TurnUsage,
    build_request,
    build_result,
    result_of,
)
from weakincentives.evals._values import recorded_value
from weakincentives.experiment import BASELINE
from weakincentives.runtime.session import ChatMessage, TokenUsage

# -- build_result ---------------------------------------------------------------------


def test_build_result_takes_exactly_the_fields_of_eval_result_with_their_defaults() -> None:
    params = inspect.signature(build_result).parameters
    fields = dataclasses.fields(EvalResult)
    assert list(params) == [f.name for f in fields]
    for f in fields:
        param = params[f.name]
        assert param.kind is inspect.Parameter.KEYWORD_ONLY
        if f.default is dataclasses.MISSING:  # required, or a default factory
            assert param.default is inspect.Parameter.empty, f.name
        else:
            assert param.default == f.default, f.name


def test_build_result_makes_what_the_constructor_makes() -> None:
    values: dict[str, Any] = {
        "sample_id": "s1", "experiment_name": "exp", "latency_ms": 2, "error": "E: x",
        "score": Score(value=0.5, passed=False, reason="r", metrics=(Metric("m", 1.0),)),
        "bundle_path": Path("b.zip"), "error_kind": "agent", "epoch": 2, "request_id": "id",
        "run_id": "run", "usage": TokenUsage(1, 2, 3), "metadata": {"k": "v"},
        "output": {"a": [1]}, "messages": (ChatMessage(role="assistant", content="hi"),),
        "tool_calls": (), "delivery_count": 3, "environment": {"state": 1},
        "input": {"q": "2+2"}, "expected": "4",
        "cost": 0.25, "judge_cost": 0.01, "session_id": "session",
        "turns": (TurnUsage(1, 2, 0.25),),
    }  # fmt: skip
    assert set(values) == {f.name for f in dataclasses.fields(EvalResult)}, "every field"
    built, made = build_result(**values), EvalResult(**values)
    assert type(built) is EvalResult
    assert built == made
    assert hash(built.key) == hash(made.key)
    assert serde.dumps(built) == serde.dumps(made)
    assert dataclasses.replace(built, epoch=5) == dataclasses.replace(made, epoch=5)
    minimal: dict[str, Any] = {"sample_id": "s", "experiment_name": "e", "score": Score(1.0, True)}
    assert build_result(**minimal, latency_ms=0, usage=TokenUsage(), metadata={}) == (
        EvalResult(**minimal, latency_ms=0)
    )
    # The positional route: the same fields, in `EvalResult`'s field order.
    ordered = [values[f.name] for f in dataclasses.fields(EvalResult)]
    assert type(result_of(*ordered)) is EvalResult
    assert result_of(*ordered) == made
    assert serde.dumps(result_of(*ordered)) == serde.dumps(made)


# -- build_request --------------------------------------------------------------------


def test_build_request_makes_what_the_constructor_makes() -> None:
    sample: Sample[str, str] = Sample(id="s1", input="q", expected="a")
    built = build_request(sample, BASELINE, epoch=2, run_id="run")
    assert type(built) is EvalRequest
    assert [f.name for f in dataclasses.fields(EvalRequest)] == list(vars(built)), "every field"
    made = EvalRequest(
        sample, BASELINE, request_id=built.request_id, created_at=built.created_at,
        epoch=2, run_id="run",
    )  # fmt: skip
    assert built == made
    assert serde.dumps(built) == serde.dumps(made)
    assert dataclasses.replace(built, epoch=0) == dataclasses.replace(made, epoch=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.epoch = 3  # type: ignore[misc]


def test_build_request_defaults_and_shared_timestamp() -> None:
    sample: Sample[str, str] = Sample(id="s1", input="q", expected="a")
    first, second = build_request(sample, BASELINE), build_request(sample, BASELINE)
    assert (first.epoch, first.run_id) == (0, None)
    assert first.request_id != second.request_id
    assert first.created_at.tzinfo is not None
    stamp = first.created_at
    assert build_request(sample, BASELINE, created_at=stamp).created_at is stamp


# -- request ids ----------------------------------------------------------------------


def new_id() -> uuid.UUID:
    return EvalRequest(Sample(id="s", input=1, expected=1), BASELINE).request_id


def test_a_request_id_is_a_uuid_in_every_way() -> None:
    made = new_id()
    plain = uuid.UUID(str(made))
    assert isinstance(made, uuid.UUID)
    assert made == plain and plain == made and hash(made) == hash(plain)
    assert (made.int, made.hex, made.bytes, made.version) == (
        plain.int, plain.hex, plain.bytes, 4,
    )  # fmt: skip
    assert made.variant == uuid.RFC_4122
    assert repr(made) == repr(plain) and str(made) == str(plain) and f"{made}" == str(plain)
    for clone in (copy.copy(made), copy.deepcopy(made), pickle.loads(pickle.dumps(made))):
        assert type(clone) is uuid.UUID and clone == made
    assert serde.dumps(made) == serde.dumps(plain)
    assert serde.load(uuid.UUID, str(made)) == made


def test_request_ids_stay_unique_across_batches_and_threads() -> None:
    ids: list[list[uuid.UUID]] = [[] for _ in range(8)]
    start = threading.Barrier(len(ids))

    def take(into: list[uuid.UUID]) -> None:
        start.wait()
        into.extend(new_id() for _ in range(300))  # several batches of 256 between them

    threads = [threading.Thread(target=take, args=(into,)) for into in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [str(i) for into in ids for i in into]
    assert len(set(everything)) == len(everything) == 8 * 300
    assert all(uuid.UUID(text).version == 4 for text in everything)


# -- recorded_value -------------------------------------------------------------------


def _recorded_slowly(value: Any, limit: int) -> Any:
    """`recorded_value` as it was written first: the JSON text measured every time."""
    data = serde.dump(value)
    text = (
        data
        if isinstance(data, str)
        else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    )
    return data if len(text) <= limit else f"{text[:limit]}…[truncated: {len(text)} chars]"


@dataclasses.dataclass(frozen=True)
class _Numbers:
    big: list[float]
    label: str


@pytest.mark.parametrize(
    "value",
    [
        _Numbers([1e16] * 40, "x"),  # `json.dumps` writes 1e+16: longer than the fast bytes
        _Numbers([0.5, float("nan"), float("inf")], "héllo ✓"),
        {"k": ["a" * 30, None, True, 3]},
        ["\n\t\x01", {"nested": [1, 2, {"deep": "é" * 10}]}],
    ],
)
def test_recorded_value_keeps_or_cuts_exactly_as_the_json_text_says(value: Any) -> None:
    size = len(json.dumps(serde.dump(value), ensure_ascii=False, separators=(",", ":")))
    for limit in sorted({1, size // 2 - 1, size // 2, size // 2 + 1, size - 1, size, size + 1}):
        if limit > 0:
            assert recorded_value(value, limit) == _recorded_slowly(value, limit), limit
