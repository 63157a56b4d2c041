"""The adapter contract, run against every adapter: OpenAI, Anthropic, Gemini and Function.

The three provider adapters run their official SDKs over real HTTP against a local server
speaking that provider's protocol (see `adapter_backends.py`); nothing in an SDK is
mocked. Behaviour that needs a network (rate limits, timeouts, malformed answers, keys
in errors) is checked on the three HTTP adapters; the rest on all four.
"""

from __future__ import annotations

import sqlite3
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.contracts.adapter_backends import (
    BACKENDS,
    HTTP_BACKENDS,
    SECRET,
    Backend,
    Call,
    HTTPBackend,
    Say,
)
from tests.helpers.fake_openai_server import RecordedRequest, Reply, drop, hang, raw
from weakincentives import serde
from weakincentives.adapters import (
    CacheableAdapter,
    DescribedAdapter,
    SQLiteResponseCache,
    describe_adapter,
)
from weakincentives.clock import SYSTEM_CLOCK, FakeClock
from weakincentives.errors import (
    AdapterError,
    AdapterResponseError,
    AdapterTimeoutError,
    BudgetExceededError,
    DeadlineExceededError,
    ProviderRequestError,
    RateLimitError,
)
from weakincentives.prompt import (
    MarkdownSection,
    Prompt,
    PromptTemplate,
    Tool,
    ToolContext,
    ToolResult,
)
from weakincentives.runtime.limits import Budget, Deadline
from weakincentives.runtime.session import PromptExecuted, Session, TokenUsage, ToolInvoked


@dataclass(frozen=True)
class Question:
    text: str


@dataclass(frozen=True)
class ForecastParams:
    city: str
    days: int


@dataclass(frozen=True)
class Forecast:
    city: str
    celsius: int


def _forecast(params: ForecastParams, ctx: ToolContext) -> ToolResult:
    if params.city == "Atlantis":
        raise LookupError("no such city")
    if params.days > 7:
        return ToolResult(message="at most 7 days", success=False)
    return ToolResult(message=f"{params.city}: 21C for {params.days} days", value=params)


FORECAST = Tool(
    name="forecast",
    description="Forecast for a city.",
    params_type=ForecastParams,
    handler=_forecast,
)


def ask(text: str = "How warm is Paris?", *, output: type[Any] | None = None) -> Prompt[Any]:
    template = PromptTemplate[Any](
        ns="contract",
        key="ask",
        sections=(
            MarkdownSection("Role", "role", "You answer briefly."),
            MarkdownSection("Question", "question", "$text", Question, role="user"),
        ),
        tools=(FORECAST,),
        output_type=output,
    )
    return Prompt(template).bind(Question(text))


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    with BACKENDS[request.param]() as b:
        yield b


@pytest.fixture(params=HTTP_BACKENDS)
def http(request: pytest.FixtureRequest) -> Iterator[HTTPBackend]:
    made = BACKENDS[request.param]()
    assert isinstance(made, HTTPBackend)
    with made as b:
        yield b


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# -- tools ------------------------------------------------------------------------------


def test_tool_calls_get_typed_params_and_their_results_reach_the_model(
    backend: Backend, clock: FakeClock
) -> None:
    backend.script(
        Call((("forecast", {"city": "Paris", "days": 2}),)),
        Call(
            (("forecast", {"city": "Oslo", "days": 1}), ("forecast", {"city": "Rome", "days": 3}))
        ),
        Say("Rome is warmest."),
    )
    session = Session()

    response = backend.make(clock).evaluate(ask(), session=session)

    assert response.text == "Rome is warmest."
    assert (response.model_requests, response.tool_calls) == (3, 3)
    values = [e.result.value for e in session[ToolInvoked].all()]
    assert values == [
        ForecastParams("Paris", 2),
        ForecastParams("Oslo", 1),
        ForecastParams("Rome", 3),
    ]
    assert [r.content for r in backend.tool_results(1)] == ["Paris: 21C for 2 days"]
    assert [r.content for r in backend.tool_results(2)][-2:] == [
        "Oslo: 21C for 1 days",
        "Rome: 21C for 3 days",
    ]


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (("forecast", {"city": "Paris", "days": 30}), "at most 7 days"),
        (("forecast", {"city": "Atlantis", "days": 1}), "no such city"),
        (("forecast", {"city": "Paris", "days": "many"}), "Invalid arguments"),
        (("horoscope", {"sign": "leo"}), "Unknown tool 'horoscope'"),
    ],
    ids=["tool-says-no", "tool-raises", "bad-params", "unknown-tool"],
)
def test_tool_failures_are_recorded_and_sent_back_marked_as_errors(
    backend: Backend, clock: FakeClock, call: tuple[str, dict[str, Any]], says: str
) -> None:
    backend.script(Call((call,)), Say("Sorry."))
    session = Session()

    response = backend.make(clock).evaluate(ask(), session=session)

    assert response.text == "Sorry."
    (event,) = session[ToolInvoked].all()
    assert event.success is False
    (sent,) = backend.tool_results(1)
    assert says in sent.content
    assert sent.is_error in (True, None)  # None: the wire format has no flag (OpenAI)


# -- structured output ------------------------------------------------------------------


def test_structured_output_sends_the_schema_and_parses_the_answer(
    backend: Backend, clock: FakeClock
) -> None:
    backend.script(Say('{"city": "Paris", "celsius": 21}'))
    session = Session()

    response = backend.make(clock).evaluate(ask(output=Forecast), session=session)

    assert response.output == Forecast("Paris", 21)
    executed = session[PromptExecuted].latest()
    assert executed is not None and executed.output == Forecast("Paris", 21)
    schema = backend.sent_schema(0)
    assert schema is not None
    assert set(schema["properties"]) == set(serde.json_schema(Forecast)["properties"])


def test_structured_output_that_does_not_parse_is_sent_back_once(
    backend: Backend, clock: FakeClock
) -> None:
    backend.script(Say('{"city": "Paris"}'), Say('{"city": "Paris", "celsius": 21}'))

    response = backend.make(clock).evaluate(ask(output=Forecast), session=Session())

    assert response.output == Forecast("Paris", 21)
    assert response.model_requests == 2
    assert "could not be used" in backend.last_user_text(1)
    assert "celsius" in backend.last_user_text(1)


def test_structured_output_that_never_parses_fails(backend: Backend, clock: FakeClock) -> None:
    backend.script(Say("twenty-one"), Say("still prose"))
    session = Session()

    with pytest.raises(AdapterResponseError, match="does not parse"):
        backend.make(clock).evaluate(ask(output=Forecast), session=session)

    assert backend.request_count == 2
    assert session[PromptExecuted].all() == ()


# -- usage ------------------------------------------------------------------------------


def test_usage_is_summed_across_turns_with_cached_tokens(
    backend: Backend, clock: FakeClock
) -> None:
    backend.script(
        Call((("forecast", {"city": "Oslo", "days": 1}),), TokenUsage(100, 10, cached_tokens=60)),
        Say("9C", TokenUsage(150, 20, cached_tokens=100)),
    )
    session = Session()

    response = backend.make(clock).evaluate(ask(), session=session)

    expected = TokenUsage(input_tokens=250, output_tokens=30, cached_tokens=160)
    assert response.usage == expected
    executed = session[PromptExecuted].latest()
    assert executed is not None and executed.usage == expected


def test_budget_stops_the_run(backend: Backend, clock: FakeClock) -> None:
    backend.script(
        Call((("forecast", {"city": "Oslo", "days": 1}),), TokenUsage(100, 10)),
        Say("9C", TokenUsage(100, 10)),
    )

    with pytest.raises(BudgetExceededError, match="total"):
        backend.make(clock).evaluate(ask(), session=Session(), budget=Budget(max_total_tokens=50))

    assert backend.request_count == 1


# -- deadline and cancellation ----------------------------------------------------------


def test_deadline_passing_during_a_call_stops_the_run(backend: Backend, clock: FakeClock) -> None:
    def slow(step: Say) -> Any:
        def play(request: object) -> Any:
            clock.advance(10.0)  # the model took 10s of the run's 5
            return step if not isinstance(backend, HTTPBackend) else backend.reply(step)

        return play

    backend.script(slow(Say("late")))

    with pytest.raises(DeadlineExceededError):
        backend.make(clock).evaluate(
            ask(), session=Session(), deadline=Deadline.after(5.0, clock=clock)
        )

    assert backend.request_count == 1


class Cancelled(Exception):
    """What a worker's heartbeat raises once its lease is lost or the run is cancelled."""


def test_a_heartbeat_that_raises_cancels_before_the_next_model_call(
    backend: Backend, clock: FakeClock
) -> None:
    beats = 0

    def heartbeat() -> None:
        nonlocal beats
        beats += 1
        if beats > 1:  # the beat before turn 0 passes; the one before turn 1 cancels
            raise Cancelled("lease lost")

    backend.script(Call((("forecast", {"city": "Oslo", "days": 1}),)), Say("never sent"))
    session = Session()

    with pytest.raises(Cancelled):
        backend.make(clock).evaluate(ask(), session=session, heartbeat=heartbeat)

    assert backend.request_count == 1
    assert len(session[ToolInvoked].all()) == 1
    assert session[PromptExecuted].all() == ()


# -- response cache ---------------------------------------------------------------------


def test_response_cache_hit_sends_nothing_and_a_new_question_misses(
    backend: Backend, clock: FakeClock
) -> None:
    backend.script(Say("21C"), Say("9C"))
    with SQLiteResponseCache(":memory:") as cache:
        adapter = backend.make(clock, temperature=0.0)
        assert isinstance(adapter, CacheableAdapter)
        cached = adapter.with_cache(cache)

        first = cached.evaluate(ask("Paris?"), session=Session())
        again = cached.evaluate(ask("Paris?"), session=Session())
        other = cached.evaluate(ask("Oslo?"), session=Session())

        assert (first.text, again.text, other.text) == ("21C", "21C", "9C")
        assert again.usage == first.usage  # a replay reports the recorded usage
        assert backend.request_count == 2
        assert (cache.stats.hits, cache.stats.misses, cache.stats.writes) == (1, 2, 2)


def test_failed_calls_are_not_cached(http: HTTPBackend, clock: FakeClock) -> None:
    http.script(http.error(400, "bad"), Say("ok"))
    with SQLiteResponseCache(":memory:") as cache:
        adapter = http.make(clock, temperature=0.0).with_cache(cache)

        with pytest.raises(ProviderRequestError):
            adapter.evaluate(ask(), session=Session())
        assert adapter.evaluate(ask(), session=Session()).text == "ok"

        assert http.request_count == 2
        assert cache.stats.writes == 1


# -- rate limits, timeouts, malformed answers -------------------------------------------


def test_rate_limit_is_retried_after_retry_after(http: HTTPBackend, clock: FakeClock) -> None:
    http.script(http.error(429, "slow down", {"Retry-After": "2"}), Say("ok"))

    response = http.make(clock).evaluate(ask(), session=Session())

    assert response.text == "ok"
    assert http.request_count == 2
    assert clock.monotonic() == pytest.approx(2.0)


def test_persistent_rate_limit_gives_up_with_the_attempts_counted(
    http: HTTPBackend, clock: FakeClock
) -> None:
    http.server.default = http.error(429, "slow down")

    with pytest.raises(RateLimitError, match=r"HTTP 429.*slow down.*after 3 attempts"):
        http.make(clock, max_retries=2).evaluate(ask(), session=Session())

    assert http.request_count == 3


def test_server_errors_and_dropped_connections_are_retried(
    http: HTTPBackend, clock: FakeClock
) -> None:
    http.script(http.error(503, "overloaded"), drop(), Say("ok"))

    response = http.make(clock).evaluate(ask(), session=Session())

    assert response.text == "ok"
    assert http.request_count == 3
    assert clock.monotonic() > 0  # backed off between attempts


def test_a_server_that_never_answers_times_out(http: HTTPBackend, clock: FakeClock) -> None:
    http.server.default = hang()
    started = time.monotonic()

    with pytest.raises(AdapterTimeoutError, match=r"no answer within 0\.50s"):
        http.make(clock, timeout=0.5).evaluate(ask(), session=Session())

    assert time.monotonic() - started < 5.0
    assert http.request_count == 1  # a timeout is not retried


def test_the_run_deadline_shortens_the_request_timeout(http: HTTPBackend) -> None:
    http.server.default = hang()
    started = time.monotonic()

    with pytest.raises((AdapterTimeoutError, DeadlineExceededError)):
        http.make(SYSTEM_CLOCK, timeout=30.0).evaluate(
            ask(), session=Session(), deadline=Deadline.after(0.4)
        )

    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("body", ["not json {", "[1, 2]", "{}"])
def test_malformed_answers_are_response_errors(
    http: HTTPBackend, clock: FakeClock, body: str
) -> None:
    http.script(raw(body))

    with pytest.raises(AdapterResponseError, match="prompt contract/ask"):
        http.make(clock).evaluate(ask(), session=Session())


def _echo_key(request: RecordedRequest, http: HTTPBackend, status: int) -> Reply:
    key = request.headers.get("x-api-key") or request.headers.get("x-goog-api-key")
    key = key or request.headers.get("authorization", "")
    return raw(f"bad credentials: {key}") if status == 200 else http.error(status, f"bad: {key}")


@pytest.mark.parametrize("status", [200, 401, 429, 500])
def test_the_api_key_never_appears_in_errors(
    http: HTTPBackend, clock: FakeClock, status: int
) -> None:
    http.server.default = lambda request: _echo_key(request, http, status)
    adapter = http.make(clock, max_retries=1)

    with pytest.raises(AdapterError) as info:
        adapter.evaluate(ask(), session=Session())

    assert "***" in str(info.value)  # the server did echo the key
    rendered = "".join(traceback.format_exception(info.value))
    assert SECRET not in f"{info.value} {info.value!r} {rendered} {adapter!r}"


# -- provenance -------------------------------------------------------------------------


def test_every_adapter_describes_itself(backend: Backend, clock: FakeClock) -> None:
    adapter = backend.make(clock, temperature=0.0)

    assert isinstance(adapter, DescribedAdapter)
    info = describe_adapter(adapter)
    assert info == adapter.describe()
    assert info.provider == backend.name
    if isinstance(backend, HTTPBackend):
        assert info.model == "contract-model"
    else:  # a function model is named by its function; the name it reports is a parameter
        assert info.model.endswith("FunctionBackend.model")
        assert info.parameters["model_name"] == "contract-model"
    assert info.adapter.endswith(type(adapter).__name__)
    assert SECRET not in repr(info.to_dict())
    if isinstance(backend, HTTPBackend):
        assert info.base_url is not None and "127.0.0.1" in info.base_url
        assert info.parameters["temperature"] == 0.0
        assert info.version  # the SDK's version
        hotter = backend.make(clock, temperature=0.7).describe()
        assert hotter.behaviour() != info.behaviour()


def test_the_base_url_is_recorded_without_credentials(http: HTTPBackend, clock: FakeClock) -> None:
    port = http.server.port
    adapter = http.build(
        base_url=f"http://user:{SECRET}@127.0.0.1:{port}/api?key={SECRET}",
        api_key=SECRET,
        clock=clock,
    )
    try:
        info = adapter.describe()
    finally:
        adapter.close()

    assert info.base_url is not None and info.base_url.startswith(f"http://127.0.0.1:{port}")
    assert SECRET not in repr(info.to_dict())


def test_the_cache_file_never_holds_the_key(
    http: HTTPBackend, clock: FakeClock, tmp_path: Any
) -> None:
    http.script(Say(f"your key is {SECRET}"))
    path = tmp_path / "cache.db"
    with SQLiteResponseCache(path) as cache:
        adapter = http.make(clock, temperature=0.0).with_cache(cache)
        adapter.evaluate(ask(), session=Session())
        assert cache.stats.writes == 0
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT value FROM responses").fetchall()
    assert all(SECRET.encode() not in bytes(v) for (v,) in rows)
