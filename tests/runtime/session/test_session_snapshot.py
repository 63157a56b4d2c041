from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

import pytest

from tests.helpers import ScriptedModel, calculator_tool
from weakincentives import serde
from weakincentives.adapters import FunctionAdapter, FunctionReply
from weakincentives.clock import FakeClock
from weakincentives.errors import SerdeError
from weakincentives.experiment import Experiment
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime.session import (
    PromptExecuted,
    PromptRendered,
    Session,
    SessionSnapshot,
    ToolInvoked,
)


@dataclass(frozen=True, slots=True)
class Plan:
    """A user-defined slice type with nested, typed fields."""

    id: UUID
    status: Literal["draft", "done"]
    steps: tuple[str, ...]
    due: datetime
    meta: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Answer:
    value: float


PLAN = Plan(
    id=UUID("12345678-1234-5678-1234-567812345678"),
    status="draft",
    steps=("add", "check"),
    due=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
    meta={"priority": 2},
)


def _run_session(clock: FakeClock) -> Session:
    template = PromptTemplate[Answer](
        ns="tests",
        key="snap",
        sections=(MarkdownSection("Q", "q", "$q", role="user"),),
        tools=(calculator_tool(),),
        output_type=Answer,
    )
    model = ScriptedModel(
        FunctionReply.calls(("calculate", {"a": 6, "op": "*", "b": 7}), ("calculate", {})),
        FunctionReply(output=Answer(42.0)),
    )
    session = Session(clock=clock)
    session.dispatch(Experiment(name="exp", flags={"x": 1}))
    session.dispatch(PLAN)
    FunctionAdapter(model, clock=clock).evaluate(Prompt(template).bind(q="6*7?"), session=session)
    return session


def test_snapshot_json_round_trip_restores_typed_slices() -> None:
    clock = FakeClock()
    session = _run_session(clock)
    data = session.snapshot().to_json()

    restored = Session.restore(SessionSnapshot.from_json(data), clock=clock)

    assert restored.session_id == session.session_id
    assert set(restored.slice_types()) == {
        Experiment,
        Plan,
        PromptRendered,
        ToolInvoked,
        PromptExecuted,
    }
    assert restored[Plan].all() == (PLAN,)
    assert restored[Experiment].latest() == Experiment(name="exp", flags={"x": 1})
    assert restored[PromptRendered].all() == session[PromptRendered].all()
    invoked = restored[ToolInvoked].all()
    assert invoked == session[ToolInvoked].all()
    assert [(t.success, t.result.value) for t in invoked] == [(True, 42.0), (False, None)]


def test_snapshot_round_trip_keeps_untyped_fields_as_json_data() -> None:
    clock = FakeClock()
    session = _run_session(clock)
    restored = Session.restore(SessionSnapshot.from_json(session.snapshot().to_json()))

    original = session[PromptExecuted].latest()
    again = restored[PromptExecuted].latest()
    assert original is not None
    assert again is not None
    # `output: Any` cannot name its type, so it comes back as the JSON it was stored as.
    assert again.output == {"value": 42.0}
    assert replace(again, output=original.output) == original
    assert restored.snapshot().slices == session.snapshot().slices


def test_snapshot_is_plain_json_stamped_with_the_session_clock() -> None:
    clock = FakeClock()
    session = _run_session(clock)
    clock.advance(60)
    snapshot = session.snapshot()
    raw = json.loads(snapshot.to_json())
    assert raw["taken_at"] == "2024-01-01T00:01:00Z"
    assert f"{Plan.__module__}:Plan" in raw["slices"]
    assert snapshot.taken_at == clock.now()


def test_empty_slices_are_left_out_of_snapshots() -> None:
    session = Session()
    session[Plan].seed([])
    assert session.snapshot().slices == {}


def _snapshot_with(key: str, values: list[Any]) -> SessionSnapshot:
    return SessionSnapshot(
        session_id="s", taken_at=datetime(2024, 1, 1, tzinfo=UTC), slices={key: values}
    )


@pytest.mark.parametrize(
    ("key", "match"),
    [
        ("no_such_module_xyz:Thing", "cannot be imported"),
        (f"{__name__}:Missing", "cannot be imported"),
        (f"{__name__}:PLAN", "is not a class"),
    ],
)
def test_restore_rejects_slice_types_it_cannot_import(key: str, match: str) -> None:
    with pytest.raises(SerdeError, match=match):
        Session.restore(_snapshot_with(key, [{}]))


def test_restore_rejects_a_local_class() -> None:
    @dataclass(frozen=True)
    class Local:
        x: int

    session = Session()
    session.dispatch(Local(1))
    with pytest.raises(SerdeError, match="<locals>"):
        Session.restore(session.snapshot())


def test_restore_names_the_field_that_does_not_validate() -> None:
    bad = {**serde.dump(PLAN), "status": "archived"}
    with pytest.raises(SerdeError, match="status"):
        Session.restore(_snapshot_with(f"{__name__}:Plan", [bad]))


@pytest.mark.parametrize("text", [b"{not json", b'{"session_id": "s"}', b"[]"])
def test_from_json_rejects_malformed_snapshots(text: bytes) -> None:
    with pytest.raises(SerdeError):
        SessionSnapshot.from_json(text)
