"""Session: typed slices of state keyed by dataclass type."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from weakincentives import serde
from weakincentives._ids import Uuid4Texts
from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import SerdeError

__all__ = [
    "Reducer",
    "Session",
    "SessionProtocol",
    "SessionSnapshot",
    "SessionView",
    "SessionViewProtocol",
    "Slice",
    "SliceView",
    "append_reducer",
    "replace_latest",
    "upsert_by",
]

_new_session_id = Uuid4Texts()

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

Reducer = Callable[[tuple[Any, ...], Any], tuple[Any, ...]]
"""`(current values, event) -> new values` for one slice."""


def append_reducer(values: tuple[Any, ...], event: Any) -> tuple[Any, ...]:
    """Append the event to the slice (the default)."""
    return (*values, event)


def replace_latest(values: tuple[Any, ...], event: Any) -> tuple[Any, ...]:
    """Keep only the newest event."""
    del values
    return (event,)


def upsert_by(key: Callable[[Any], Hashable]) -> Reducer:
    """Replace the value with the same `key(value)`, or append a new one."""

    def reducer(values: tuple[Any, ...], event: Any) -> tuple[Any, ...]:
        k = key(event)
        for i, v in enumerate(values):
            if key(v) == k:
                return (*values[:i], event, *values[i + 1 :])
        return (*values, event)

    return reducer


class SliceView(Generic[T]):
    """Read-only queries over one slice."""

    __slots__ = ("_session", "_type")

    def __init__(self, session: Session, slice_type: type[T]) -> None:
        self._session = session
        self._type = slice_type

    def _read(self) -> tuple[T, ...]:
        return self._session._values(self._type)

    def all(self) -> tuple[T, ...]:
        """Return every value, oldest first."""
        # As `_read`, inlined: an evaluation reads a few slices of every sample's session.
        return self._session._slices.get(self._type, ())

    def latest(self) -> T | None:
        """Return the newest value, or None when the slice is empty."""
        values = self._session._slices.get(self._type, ())
        return values[-1] if values else None

    def where(self, predicate: Callable[[T], bool]) -> tuple[T, ...]:
        """Return the values for which `predicate` is true."""
        return tuple(v for v in self._read() if predicate(v))

    def __len__(self) -> int:
        return len(self._read())


class Slice(SliceView[T]):
    """Read-write access to one slice of a `Session`."""

    __slots__ = ()

    def seed(self, values: Iterable[T]) -> None:
        """Replace the slice's values with `values` (no reducer runs)."""
        self._session._set(self._type, tuple(values))

    def append(self, value: T) -> None:
        """Append `value` directly (no reducer runs)."""
        self._session._set(self._type, (*self._session._values(self._type), value))

    def clear(self) -> None:
        """Remove every value."""
        self._session._set(self._type, ())


@runtime_checkable
class SessionViewProtocol(Protocol):
    """What session-aware evaluators receive: read-only slice access."""

    def __getitem__(self, slice_type: type[T], /) -> SliceView[T]: ...


@runtime_checkable
class SessionProtocol(SessionViewProtocol, Protocol):
    """A session that can also receive events."""

    @property
    def session_id(self) -> str: ...

    def dispatch(self, event: object) -> None: ...


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """A JSON-ready copy of a session's slices."""

    session_id: str
    """Id of the session the snapshot was taken from."""
    taken_at: datetime
    """When the snapshot was taken."""
    slices: dict[str, list[Any]]
    """`module:QualName` of each slice type -> its values as JSON-compatible data."""

    def to_json(self) -> bytes:
        """Serialize the snapshot."""
        return serde.dumps(self)

    @classmethod
    def from_json(cls, data: str | bytes) -> SessionSnapshot:
        """Parse a snapshot produced by `to_json`."""
        return serde.loads(cls, data)


class Session:
    """Typed, thread-safe state of one agent run.

    Values live in slices keyed by their dataclass type: `session[ToolInvoked].all()`.
    Events go through `dispatch`, which runs the reducer registered for the event's type
    (append by default).
    """

    def __init__(self, *, session_id: str | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        # A random id is made on first read (`session_id`): most sessions of an evaluation
        # are never asked for theirs. It is a uuid4, made in batches (`Uuid4Texts`).
        self._id = session_id or None
        self._clock = clock
        self._lock = threading.RLock()
        self._slices: dict[type[Any], tuple[Any, ...]] = {}
        self._reducers: dict[type[Any], Reducer] = {}

    @property
    def session_id(self) -> str:
        """Unique id of this session."""
        sid = self._id
        if sid is None:
            with self._lock:
                if self._id is None:
                    self._id = _new_session_id()
                sid = self._id
        return sid

    def __getitem__(self, slice_type: type[T], /) -> Slice[T]:
        return Slice(self, slice_type)

    def register_reducer(self, slice_type: type[Any], reducer: Reducer) -> None:
        """Use `reducer` for events of `slice_type` from now on."""
        with self._lock:
            self._reducers[slice_type] = reducer

    def dispatch(self, event: object) -> None:
        """Apply `event` to the slice of its type through that slice's reducer."""
        tp = type(event)
        lock = self._lock
        lock.acquire()  # not `with`: a few events per sample, each a little cheaper
        try:
            reducer = self._reducers.get(tp)
            if reducer is None:  # `append_reducer`, without a call per event
                self._slices[tp] = (*self._slices.get(tp, ()), event)
            else:
                self._slices[tp] = reducer(self._slices.get(tp, ()), event)
        finally:
            lock.release()

    def slice_types(self) -> tuple[type[Any], ...]:
        """Return the types of every non-empty slice."""
        with self._lock:
            return tuple(t for t, v in self._slices.items() if v)

    def view(self) -> SessionView:
        """Return a read-only view of this session."""
        return SessionView(self)

    def snapshot(self) -> SessionSnapshot:
        """Return a JSON-ready copy of every slice."""
        with self._lock:
            items = list(self._slices.items())
        return SessionSnapshot(
            session_id=self.session_id,
            taken_at=self._clock.now(),
            slices={_type_key(t): [serde.dump(v) for v in vals] for t, vals in items if vals},
        )

    @classmethod
    def restore(cls, snapshot: SessionSnapshot, *, clock: Clock = SYSTEM_CLOCK) -> Session:
        """Rebuild a session from a snapshot; slice types are imported by name.

        Raises:
            SerdeError: when a slice type cannot be imported or a value does not validate.
        """
        session = cls(session_id=snapshot.session_id, clock=clock)
        for key, values in snapshot.slices.items():
            tp = _import_type(key)
            session._slices[tp] = tuple(serde.load(tp, v) for v in values)
        return session

    def _values(self, slice_type: type[T]) -> tuple[T, ...]:
        # No lock: writers replace a slice's tuple in one dict store (atomic under the
        # GIL), so a reader sees the old tuple or the new one, never a partial update.
        return self._slices.get(slice_type, ())

    def _set(self, slice_type: type[Any], values: tuple[Any, ...]) -> None:
        with self._lock:
            self._slices[slice_type] = values


class SessionView:
    """A read-only view of a `Session`: queries only, no dispatch or seeding."""

    __slots__ = ("_session",)

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def session_id(self) -> str:
        """Id of the viewed session."""
        return self._session.session_id

    def __getitem__(self, slice_type: type[T], /) -> SliceView[T]:
        return SliceView(self._session, slice_type)

    def slice_types(self) -> Sequence[type[Any]]:
        """Return the types of every non-empty slice."""
        return self._session.slice_types()

    def snapshot(self) -> SessionSnapshot:
        """Return a snapshot of the viewed session."""
        return self._session.snapshot()


def _type_key(tp: type[Any]) -> str:
    return f"{tp.__module__}:{tp.__qualname__}"


def _import_type(key: str) -> type[Any]:
    module_name, _, qualname = key.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise SerdeError(f"snapshot slice type {key!r} cannot be imported: {exc}") from exc
    if not isinstance(obj, type):
        raise SerdeError(f"snapshot slice type {key!r} is not a class")
    return obj
