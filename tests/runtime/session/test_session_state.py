from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from weakincentives.runtime.session import (
    Session,
    SessionProtocol,
    SessionView,
    SessionViewProtocol,
    SliceView,
    append_reducer,
    replace_latest,
    upsert_by,
)


@dataclass(frozen=True, slots=True)
class Note:
    key: str
    text: str


@dataclass(frozen=True, slots=True)
class Counter:
    value: int


def test_dispatch_appends_to_the_slice_of_the_event_type() -> None:
    session = Session()
    session.dispatch(Note("a", "one"))
    session.dispatch(Counter(1))
    session.dispatch(Note("b", "two"))

    assert session[Note].all() == (Note("a", "one"), Note("b", "two"))
    assert session[Counter].all() == (Counter(1),)
    assert session[Note].latest() == Note("b", "two")
    assert session[Note].where(lambda n: n.key == "a") == (Note("a", "one"),)
    assert len(session[Note]) == 2


def test_empty_slice_has_no_latest_and_is_not_listed() -> None:
    session = Session()
    assert session[Note].all() == ()
    assert session[Note].latest() is None
    assert len(session[Note]) == 0
    session.dispatch(Counter(1))
    assert session.slice_types() == (Counter,)


def test_session_ids_are_unique_unless_given() -> None:
    assert Session().session_id != Session().session_id
    assert Session(session_id="s-1").session_id == "s-1"


@pytest.mark.parametrize(
    ("reducer", "expected"),
    [
        (append_reducer, (Note("a", "1"), Note("b", "2"), Note("a", "3"))),
        (replace_latest, (Note("a", "3"),)),
        (upsert_by(lambda n: n.key), (Note("a", "3"), Note("b", "2"))),
    ],
    ids=["append", "replace_latest", "upsert_by"],
)
def test_registered_reducer_decides_the_new_slice(
    reducer: object, expected: tuple[Note, ...]
) -> None:
    session = Session()
    session.register_reducer(Note, reducer)  # type: ignore[arg-type]  # parametrized reducers
    for event in (Note("a", "1"), Note("b", "2"), Note("a", "3")):
        session.dispatch(event)
    assert session[Note].all() == expected


def test_reducer_applies_only_to_its_type() -> None:
    session = Session()
    session.register_reducer(Counter, replace_latest)
    for i in range(3):
        session.dispatch(Counter(i))
        session.dispatch(Note(str(i), ""))
    assert session[Counter].all() == (Counter(2),)
    assert len(session[Note]) == 3


def test_upsert_by_keeps_the_position_of_the_replaced_value() -> None:
    reducer = upsert_by(lambda n: n.key)
    values = reducer(reducer(reducer((), Note("a", "1")), Note("b", "2")), Note("a", "9"))
    assert values == (Note("a", "9"), Note("b", "2"))


def test_slice_seed_append_and_clear_bypass_reducers() -> None:
    session = Session()
    session.register_reducer(Note, replace_latest)
    session[Note].seed([Note("a", "1"), Note("b", "2")])
    session[Note].append(Note("c", "3"))
    assert [n.key for n in session[Note].all()] == ["a", "b", "c"]
    session[Note].clear()
    assert session[Note].all() == ()


def test_slice_reads_are_live() -> None:
    session = Session()
    notes = session[Note]
    session.dispatch(Note("a", "1"))
    assert notes.latest() == Note("a", "1")


def test_concurrent_dispatch_loses_no_events() -> None:
    session = Session()
    per_thread, threads = 200, 8

    def work(tid: int) -> None:
        for i in range(per_thread):
            session.dispatch(Counter(tid * per_thread + i))

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    values = sorted(c.value for c in session[Counter].all())
    assert values == list(range(per_thread * threads))


# -- SessionView --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "attribute", ["dispatch", "seed", "append", "clear", "register_reducer", "restore"]
)
def test_session_view_has_no_mutating_attributes(attribute: str) -> None:
    view = Session().view()
    assert not hasattr(view, attribute)


@pytest.mark.parametrize("attribute", ["seed", "append", "clear"])
def test_session_view_slices_are_read_only(attribute: str) -> None:
    session = Session()
    session.dispatch(Note("a", "1"))
    view_slice = session.view()[Note]
    assert type(view_slice) is SliceView
    assert not hasattr(view_slice, attribute)


def test_session_view_cannot_grow_attributes() -> None:
    view = Session().view()
    with pytest.raises(AttributeError):
        view.dispatch = print  # type: ignore[attr-defined]  # the point: it is not allowed


def test_session_view_reads_the_live_session() -> None:
    session = Session(session_id="s-1")
    view = session.view()
    session.dispatch(Note("a", "1"))
    session.dispatch(Counter(3))
    assert view.session_id == "s-1"
    assert view[Note].all() == (Note("a", "1"),)
    assert view[Counter].latest() == Counter(3)
    assert set(view.slice_types()) == {Note, Counter}
    assert view.snapshot().slices == session.snapshot().slices


def test_session_and_view_satisfy_their_protocols() -> None:
    session = Session()
    view = SessionView(session)
    assert isinstance(session, SessionProtocol)
    assert isinstance(view, SessionViewProtocol)
    assert not isinstance(view, SessionProtocol)
