"""Core value types of evaluation: samples, scores, requests and results."""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, cast

from weakincentives import serde
from weakincentives._frozen import quick_init
from weakincentives._ids import uuid4_hex_batch
from weakincentives.errors import ConfigurationError, InvalidScoreError
from weakincentives.experiment import Experiment
from weakincentives.runtime.session import (
    ChatMessage,
    SessionViewProtocol,
    TokenUsage,
    TurnUsage,
)

from ._values import (
    ADAPTERS_ATTR,
    DEFAULT_VALUE_LIMIT,
    RecordInputs,
    error_message,
    recorded_value,
)

__all__ = [
    "ADAPTERS_ATTR",
    "DEFAULT_VALUE_LIMIT",
    "ERROR_KINDS",
    "ErrorKind",
    "EvalRequest",
    "EvalResult",
    "Metric",
    "RecordInputs",
    "Sample",
    "Score",
    "ToolCallRecord",
    "Trajectory",
    "TurnUsage",
    "build_request",
    "build_result",
    "error_message",
    "recorded_value",
]

InputT = TypeVar("InputT")
ExpectedT = TypeVar("ExpectedT")

ErrorKind = Literal[
    "agent", "output_parsing", "no_output", "evaluator", "judge", "timeout", "budget",
    "environment", "cancelled", "dead_letter", "lost",
]  # fmt: skip
"""Why a sample has no trustworthy score:

- `agent`: the agent (or target function) raised;
- `output_parsing`: the model's final answer did not parse into the output type (after
  the adapter's retries);
- `no_output`: the agent finished without an output to score;
- `evaluator`: the evaluator raised;
- `judge`: an LLM judge failed or returned something unparseable (unscored, not 0);
- `timeout`: the per-sample timeout or the run's deadline passed;
- `budget`: the token budget was exceeded;
- `environment`: the environment could not be created, serialized or restored;
- `cancelled`: the run was interrupted before the sample finished;
- `dead_letter`: a worker gave up on the request (it kept failing on infrastructure
  after its retries, or its body could not be decoded) and dead-lettered it; the error
  says why;
- `lost`: the distributed client sent the request twice and each time it vanished
  (neither queued, nor held by a worker, nor answered past its deadline).
"""

ERROR_KINDS: tuple[ErrorKind, ...] = (
    "agent", "output_parsing", "no_output", "evaluator", "judge", "timeout", "budget",
    "environment", "cancelled", "dead_letter", "lost",
)  # fmt: skip
"""Every `ErrorKind`, in the order reports list them."""


_UNSET: Any = object()
_NO_EXPECTED: Any = None


# No slots on generic values: `Sample[str, str](...)` sets __orig_class__, which slotted
# frozen dataclasses reject. The `__init__` is written out so that it can also take the
# second design's `ground_truth=` for `expected`.
@dataclass(frozen=True, init=False)
class Sample(Generic[InputT, ExpectedT]):
    """One evaluation case.

    `expected` defaults to None (a sample scored without a reference, as RL prompts
    are); `ground_truth` is the second design's name for it (`Sample(id=..., input=...,
    ground_truth=...)`, `sample.ground_truth`).

    Examples:
        >>> Sample(id="math-1", input="What is 2 + 2?", expected="4").id
        'math-1'
        >>> Sample(id="math-2", input="What is 3 + 3?", ground_truth="6").expected
        '6'
    """

    id: str
    """Unique id within its dataset."""
    input: InputT
    """What the agent receives."""
    expected: ExpectedT
    """What a correct answer looks like (evaluators decide how to compare); None if none."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Free-form labels for slicing results (difficulty, topic, cluster key...)."""

    def __init__(
        self,
        id: str,
        input: InputT,
        expected: ExpectedT = _NO_EXPECTED,
        metadata: Mapping[str, Any] | None = None,
        *,
        ground_truth: ExpectedT = _UNSET,
    ) -> None:
        """Build a sample; `ground_truth` is an alias of `expected` (pass one of them).

        Raises:
            ConfigurationError: both `expected` and `ground_truth` are given.
        """
        if ground_truth is not _UNSET:
            if expected is not None:
                raise ConfigurationError(
                    f"sample {id!r}: expected and ground_truth are one field; pass one of them"
                )
            expected = ground_truth
        # Into the instance's dict, as `object.__setattr__` would put them (a sample is
        # made per item of a dataset; this is a third of the cost).
        fields = self.__dict__
        fields["id"] = id
        fields["input"] = input
        fields["expected"] = expected
        fields["metadata"] = {} if metadata is None else metadata

    @property
    def ground_truth(self) -> ExpectedT:
        """The second design's name for `expected`."""
        return self.expected


@dataclass(frozen=True, slots=True)
class Metric:
    """A measured dimension of a score. Weight 0 tracks only; weight > 0 feeds the reward."""

    name: str
    """Metric name (unique within a score)."""
    value: float
    """Measured value."""
    weight: float = 0.0
    """Contribution to `Score.reward` (0 = tracking only)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Anything else worth keeping with the metric."""

    def __post_init__(self) -> None:
        # Fast path (a metric is made per sample and per check, and per line when a run
        # is read): a finite float passes `_check_finite`, and `x - x` is 0.0 only for
        # finite x.
        value, weight = self.value, self.weight
        if type(value) is not float or value - value != 0.0:
            _check_finite(f"metric {self.name!r} value", value)
        if type(weight) is not float or weight - weight != 0.0:
            _check_finite(f"metric {self.name!r} weight", weight)
        if weight < 0:
            raise InvalidScoreError(f"metric {self.name!r} weight must be >= 0, got {self.weight}")


@quick_init
@dataclass(frozen=True, slots=True)
class Score:
    """The verdict on one output.

    `value` and `passed` may be omitted when `metrics` are given: `value` then defaults to
    `reward` and `passed` to `value >= 0.5` (use `Score.from_metrics` to pick a threshold).

    Examples:
        >>> s = Score(metrics=(Metric("correct", 1.0, weight=1.0), Metric("turns", 3.0)))
        >>> s.reward, s.passed
        (1.0, True)
    """

    value: float = cast(float, _UNSET)
    """Normalized score, usually in [0, 1]."""
    passed: bool = cast(bool, _UNSET)
    """Binary verdict."""
    reason: str = ""
    """Why: what was found and what was expected."""
    metrics: tuple[Metric, ...] = ()
    """Named measurements; those with weight > 0 make up `reward`."""

    def __post_init__(self) -> None:
        value, metrics = self.value, self.metrics
        if value is _UNSET:
            if not metrics:
                raise InvalidScoreError("Score needs a value (or metrics to derive it from)")
            value = self.reward
            object.__setattr__(self, "value", value)
        # Fast path (a score is made per sample): a finite float passes `_check_finite`,
        # and `x - x` is 0.0 only for finite x.
        if type(value) is not float or value - value != 0.0:
            _check_finite("score value", value)
        if self.passed is _UNSET:
            object.__setattr__(self, "passed", value >= 0.5)
        if len(metrics) > 1:
            names = [m.name for m in metrics]
            if len(names) != len(set(names)):
                raise InvalidScoreError(f"duplicate metric names in score: {names}")

    @property
    def reward(self) -> float:
        """Weighted mean of metrics with weight > 0 (0.0 when there are none)."""
        weighted = [(m.value, m.weight) for m in self.metrics if m.weight > 0]
        if not weighted:
            return 0.0
        total = sum(w for _, w in weighted)
        return sum(v * w for v, w in weighted) / total

    def metric(self, name: str) -> Metric | None:
        """Return the metric called `name`, if any."""
        return next((m for m in self.metrics if m.name == name), None)

    @classmethod
    def from_metrics(
        cls, metrics: tuple[Metric, ...] | list[Metric], *, threshold: float = 0.5, reason: str = ""
    ) -> Score:
        """Build a score whose value is the reward and which passes at `reward >= threshold`."""
        metrics = tuple(metrics)
        probe = cls(value=0.0, passed=False, metrics=metrics)
        reward = probe.reward
        return cls(value=reward, passed=reward >= threshold, reason=reason, metrics=metrics)


def _check_finite(what: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidScoreError(f"{what} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise InvalidScoreError(f"{what} must be finite, got {value}")


def _now() -> datetime:
    return datetime.now(UTC)


class _RequestId(uuid.UUID):
    """A `uuid.UUID` that keeps its text: the runner takes `str(request_id)` per result.

    Equal to, hashed like, printed and pickled as the plain `UUID` of the same value.
    """

    __slots__ = ("_text",)
    _text: str

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"UUID({self._text!r})"

    def __reduce__(self) -> tuple[type[uuid.UUID], tuple[str]]:
        return (uuid.UUID, (self._text,))


# What `UUID.__init__` sets, set through the slots themselves (`UUID.__setattr__` refuses):
# a request id is made per sample, and its value needs no checking.
_set_int = uuid.UUID.__dict__["int"].__set__
_set_is_safe = uuid.UUID.__dict__["is_safe"].__set__
_set_text = _RequestId.__dict__["_text"].__set__


class _RandomIds:
    """Random (version 4) UUIDs like `uuid.uuid4()`, made from OS randomness in batches.

    `uuid.uuid4()` reads 16 bytes with `os.urandom` per id: a syscall that releases the
    GIL, so with many worker threads each request id could hand the GIL to another
    thread; and then `str()` formats it again for each result. One `os.urandom` call here
    makes 256 ids, their version and variant bits set for all at once on one big integer,
    each with its text. The batch is dropped in a forked child, so parent and child never
    hand out the same ids.
    """

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._ids: list[_RequestId] = []

    def __call__(self) -> uuid.UUID:
        # No lock: `list.pop` is atomic, so each id goes to one caller. Threads that find
        # the batch empty at once each make one; the last one installed serves the next
        # callers, the rest of the others are dropped. (A lock held across `os.urandom`,
        # which releases the GIL, would line the worker threads up behind it.)
        try:
            return self._ids.pop()
        except IndexError:
            ids = self._batch()
            made = ids.pop()
            self._ids = ids
            return made

    @staticmethod
    def _batch() -> list[_RequestId]:
        digits = uuid4_hex_batch()
        new, unknown, ids = object.__new__, uuid.SafeUUID.unknown, []
        for start in range(0, len(digits), 32):
            h = digits[start : start + 32]
            made = new(_RequestId)
            _set_int(made, int(h, 16))
            _set_is_safe(made, unknown)
            _set_text(made, f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
            ids.append(made)
        return ids


_new_request_id = _RandomIds()


@dataclass(frozen=True)
class EvalRequest(Generic[InputT, ExpectedT]):
    """A request to evaluate one sample under one experiment."""

    sample: Sample[InputT, ExpectedT]
    """The sample to evaluate."""
    experiment: Experiment
    """The experiment to evaluate under."""
    request_id: uuid.UUID = field(default_factory=_new_request_id)
    """Unique id; results are de-duplicated by it."""
    created_at: datetime = field(default_factory=_now)
    """When the request was created."""
    epoch: int = 0
    """Repetition index when a dataset is run several times (pass@k)."""
    run_id: str | None = None
    """Run the request belongs to; `collect_results` ignores other runs' results."""


def build_request(
    sample: Sample[InputT, ExpectedT],
    experiment: Experiment,
    *,
    epoch: int = 0,
    run_id: str | None = None,
    created_at: datetime | None = None,
) -> EvalRequest[InputT, ExpectedT]:
    """`EvalRequest(sample, experiment, epoch=..., run_id=...)`, made at a third of the cost.

    Submitting a dataset makes one request per sample, and the frozen dataclass's
    `__init__` sets each field through `object.__setattr__`; this fills the instance's
    dict directly instead (the fields need no checking). `created_at` lets the requests of
    one submission share one timestamp (default: now).
    """
    request: EvalRequest[InputT, ExpectedT] = object.__new__(EvalRequest)
    fields = request.__dict__
    fields["sample"] = sample
    fields["experiment"] = experiment
    fields["request_id"] = _new_request_id()
    fields["created_at"] = _now() if created_at is None else created_at
    fields["epoch"] = epoch
    fields["run_id"] = run_id
    return request


@quick_init
@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """A compact record of one tool call, kept with a result for querying."""

    name: str
    """Tool name."""
    params: Mapping[str, Any]
    """Arguments as decoded."""
    message: str
    """What the tool returned to the model."""
    success: bool
    """Whether the call succeeded."""
    duration_ms: float = 0.0
    """Time spent in the handler."""
    error: str | None = None
    """Exception or validation error, if any."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Trajectory:
    """What happened while the agent ran one sample, as a trajectory scorer sees it.

    A trajectory scorer (`evals.scoring`) gets one built from the live run, session
    included; `EvalResult.trajectory` builds one from a recorded result (no session).
    """

    messages: tuple[ChatMessage, ...] = ()
    """The conversation, oldest first (the final answer is usually `messages[-1]`)."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """Tool calls made during the run, in order."""
    output: Any = None
    """The agent's output (structured output, else the final text; None if there was none)."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    """Tokens used by the run."""
    session: SessionViewProtocol | None = None
    """Read-only view of the run's session. A run with an `environment_factory` has its
    environment seeded there under its own type: `session[MyEnv].latest()`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalResult:
    """The outcome of evaluating one sample under one experiment (and epoch)."""

    sample_id: str
    """Sample identifier."""
    experiment_name: str
    """Experiment the sample ran under."""
    score: Score
    """The score (for errors: value 0, not passed, reason = the error)."""
    latency_ms: serde.WholeNumber
    """Time to run the agent on the sample, in whole milliseconds (EVALS.md: `int`; a
    fractional value from an older record is rounded when read)."""
    error: str | None = None
    """Error message when the sample could not be scored."""
    bundle_path: Path | None = None
    """Debug bundle written for the sample, if enabled."""
    error_kind: ErrorKind | None = None
    """Which stage failed (see `ErrorKind`); None when the sample was scored."""
    epoch: int = 0
    """Repetition index (pass@k)."""
    request_id: str | None = None
    """Id of the `EvalRequest`; duplicates of one request count once."""
    run_id: str | None = None
    """Run the result belongs to."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    """Tokens the agent used on the sample."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The sample's metadata, copied for slicing."""
    output: Any = None
    """The agent's output (JSON-compatible form)."""
    messages: tuple[ChatMessage, ...] = ()
    """Transcript of the run, when recorded."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """Tool calls made during the run, when recorded."""
    delivery_count: int = 1
    """How many times the request was delivered before this result (1 = first try)."""
    environment: Mapping[str, Any] | None = None
    """Serialized environment state at the end of the sample, if any."""
    input: Any = None
    """The sample's input as the agent saw it (JSON form, truncated past
    `RecordInputs.limit` characters; None when `record_inputs=False`)."""
    expected: Any = None
    """The sample's expected value (JSON form, truncated like `input`)."""
    cost: float | None = None
    """Dollars the agent's model calls cost (None: unpriced, or no model was called)."""
    judge_cost: float | None = None
    """Dollars the judge's model calls cost (None: no judge, or its model is unpriced)."""
    session_id: str | None = None
    """Id of the session the sample ran in (its debug bundle's `ids.session_id`); None
    when nothing reads that session: a plain function target (no `session=` parameter)
    scored by a plain evaluator, without a bundle or an environment, on every path."""
    turns: tuple[TurnUsage, ...] = ()
    """Tokens and cost of each of the agent's model calls, in order, up to the failure for
    an error (empty when the agent reported none, as a plain function does). The last
    turns are the assistant messages of `messages`, one each."""

    @property
    def trajectory(self) -> Trajectory:
        """The run as a `Trajectory` (evaluation-abstractions.md's `EvalResult.trajectory`).

        A view built from `messages`, `tool_calls`, `output` and `usage` on each access,
        not a second stored copy; it has no `session` (a result does not keep one).
        """
        return Trajectory(
            messages=self.messages, tool_calls=self.tool_calls, output=self.output,
            usage=self.usage,
        )  # fmt: skip

    @property
    def sample(self) -> Sample[Any, Any]:
        """The sample as recorded on the result (the second design's `EvalResult.sample`).

        Built from `sample_id`, `input`, `expected` and `metadata`: the input and expected
        value are their recorded JSON forms (truncated past `RecordInputs.limit`; None
        when inputs are not recorded).
        """
        return Sample(
            id=self.sample_id, input=self.input, expected=self.expected, metadata=self.metadata
        )

    @property
    def passed(self) -> bool:
        """Whether the sample passed (errors never pass)."""
        return self.error is None and self.score.passed

    @property
    def is_error(self) -> bool:
        """Whether the sample ended in an error."""
        return self.error is not None

    @property
    def tokens(self) -> int:
        """Total tokens used (input + output)."""
        return self.usage.total_tokens

    @property
    def key(self) -> tuple[str, str, int]:
        """`(sample_id, experiment_name, epoch)`: what a run records once."""
        return (self.sample_id, self.experiment_name, self.epoch)


def _result_of() -> Callable[..., EvalResult]:
    names = [f.name for f in fields(EvalResult)]
    namespace: dict[str, Any] = {"new": object.__new__, "EvalResult": EvalResult}
    body = ["def result_of(" + ", ".join(names) + "):", "    result = new(EvalResult)"]
    for name in names:  # each field set through its slot (the class refuses assignment)
        namespace[f"set_{name}"] = EvalResult.__dict__[name].__set__
        body.append(f"    set_{name}(result, {name})")
    exec("\n".join([*body, "    return result"]), namespace)  # field names only
    return cast("Callable[..., EvalResult]", namespace["result_of"])


result_of = _result_of()
"""`EvalResult` from the values of its fields, passed in field order, none checked: the
per-sample route (see `build_result`), for callers that fill every field as declared
(`latency_ms` a whole number). Keyword arguments are slower to pass than positional
ones: 23 of them cost as much as setting the fields."""


def build_result(
    *,
    sample_id: str,
    experiment_name: str,
    score: Score,
    latency_ms: float,
    error: str | None = None,
    bundle_path: Path | None = None,
    error_kind: ErrorKind | None = None,
    epoch: int = 0,
    request_id: str | None = None,
    run_id: str | None = None,
    usage: TokenUsage,
    metadata: Mapping[str, Any],
    output: Any = None,
    messages: tuple[ChatMessage, ...] = (),
    tool_calls: tuple[ToolCallRecord, ...] = (),
    delivery_count: int = 1,
    environment: Mapping[str, Any] | None = None,
    input: Any = None,
    expected: Any = None,
    cost: float | None = None,
    judge_cost: float | None = None,
    session_id: str | None = None,
    turns: tuple[TurnUsage, ...] = (),
) -> EvalResult:
    """`EvalResult(...)` for the per-sample path: the same value in half the time.

    A frozen dataclass's `__init__` sets each field through `object.__setattr__`; this
    sets the slots directly, which matters for a value made twice per sample (the
    recorded result and its slim copy). The parameters are `EvalResult`'s fields, in
    order, with its defaults, except that `usage` and `metadata` (default factories
    there) must be given; a test keeps the two in step.
    """
    return result_of(
        sample_id, experiment_name, score, round(latency_ms), error, bundle_path, error_kind,
        epoch, request_id, run_id, usage, metadata, output, messages, tool_calls,
        delivery_count, environment, input, expected, cost, judge_cost, session_id, turns,
    )  # fmt: skip
