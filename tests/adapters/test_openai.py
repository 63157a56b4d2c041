"""OpenAIAdapter over real HTTP against the scripted fake server (the SDK is not mocked)."""

from __future__ import annotations

import random
import socket
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import openai
import pytest

from tests.helpers.fake_openai_server import (
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
    completion,
    drop,
    error,
    hang,
    raw,
    usage,
)
from weakincentives import serde
from weakincentives.adapters import DescribedAdapter, ModelRequest
from weakincentives.adapters.openai import OpenAIAdapter
from weakincentives.clock import SYSTEM_CLOCK, FakeClock
from weakincentives.errors import (
    AdapterConnectionError,
    AdapterError,
    AdapterResponseError,
    AdapterTimeoutError,
    ConfigurationError,
    DeadlineExceededError,
    ProviderRequestError,
    ProviderServerError,
    RateLimitError,
    TurnLimitExceededError,
)
from weakincentives.experiment import Experiment
from weakincentives.prompt import (
    MarkdownSection,
    Prompt,
    PromptTemplate,
    Tool,
    ToolContext,
    ToolResult,
)
from weakincentives.runtime.agent_loop import AgentLoop
from weakincentives.runtime.limits import Deadline
from weakincentives.runtime.session import (
    PromptExecuted,
    PromptFailed,
    Session,
    TokenUsage,
    ToolInvoked,
)

SECRET = "sk-test-3f9a1c7e5b2d"


@dataclass(frozen=True)
class Question:
    text: str


@dataclass(frozen=True)
class CityParams:
    city: str


@dataclass(frozen=True)
class Forecast:
    city: str
    celsius: int


TEMPERATURES = {"Paris": 21, "Oslo": 9, "Rome": 27}


def _weather(params: CityParams, ctx: ToolContext) -> ToolResult:
    celsius = TEMPERATURES[params.city]
    exp = ctx.experiment
    if exp is not None and exp.flags.get("units") == "F":
        return ToolResult(message=f"{params.city}: {celsius * 9 // 5 + 32}F", value=celsius)
    return ToolResult(message=f"{params.city}: {celsius}C", value=celsius)


WEATHER = Tool(
    name="weather",
    description="Current temperature of a city.",
    params_type=CityParams,
    handler=_weather,
)
SECTIONS: tuple[MarkdownSection[Any], ...] = (
    MarkdownSection("Role", "role", "You answer briefly."),
    MarkdownSection("Question", "question", "$text", Question, role="user"),
)


def ask(
    question: str = "How warm is it?",
    *,
    tools: tuple[Tool[Any], ...] = (),
    output_type: type[Any] | None = None,
) -> Prompt[Any]:
    template = PromptTemplate[Any](
        ns="tests", key="ask", sections=SECTIONS, tools=tools, output_type=output_type
    )
    return Prompt(template).bind(Question(question))


AdapterFactory = Callable[..., OpenAIAdapter]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_adapter(server: FakeOpenAIServer, clock: FakeClock) -> Iterator[AdapterFactory]:
    made: list[OpenAIAdapter] = []

    def make(**kwargs: Any) -> OpenAIAdapter:
        options: dict[str, Any] = {
            "base_url": server.base_url,
            "api_key": SECRET,
            "clock": clock,
            "rng": random.Random(7),
            **kwargs,
        }
        adapter = OpenAIAdapter("test-model", **options)
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        adapter.close()


# -- happy paths ------------------------------------------------------------------------


def test_plain_text_answer(server: FakeOpenAIServer, make_adapter: AdapterFactory) -> None:
    server.enqueue(completion("About 21C."))
    session = Session()

    response = make_adapter().evaluate(ask("How warm is Paris?"), session=session)

    assert response.text == "About 21C."
    assert response.output == response.text  # a text prompt's output is its text
    assert response.model == "fake-model"
    assert response.model_requests == 1
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert executed.text == "About 21C."
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    body = request.json()
    assert body["model"] == "test-model"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "How warm is Paris?" in body["messages"][1]["content"]
    assert "tools" not in body
    assert "response_format" not in body


def test_tool_calls_over_several_turns(
    server: FakeOpenAIServer, make_adapter: AdapterFactory
) -> None:
    server.enqueue(
        completion(tool_calls=[("weather", {"city": "Paris"})]),
        completion(tool_calls=[("weather", {"city": "Oslo"}), ("weather", {"city": "Rome"})]),
        completion("Rome is warmest."),
    )
    session = Session()

    response = make_adapter().evaluate(ask(tools=(WEATHER,)), session=session)

    assert response.text == "Rome is warmest."
    assert (response.model_requests, response.tool_calls) == (3, 3)
    invoked = session[ToolInvoked].all()
    assert [(e.name, dict(e.params), e.result.message, e.result.value) for e in invoked] == [
        ("weather", {"city": "Paris"}, "Paris: 21C", 21),
        ("weather", {"city": "Oslo"}, "Oslo: 9C", 9),
        ("weather", {"city": "Rome"}, "Rome: 27C", 27),
    ]
    assert all(e.success for e in invoked)
    second, third = server.bodies[1]["messages"], server.bodies[2]["messages"]
    assert second[-2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            },
        ],
    }
    assert second[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "Paris: 21C"}
    assert third[-2:] == [
        {"role": "tool", "tool_call_id": "call_0", "content": "Oslo: 9C"},
        {"role": "tool", "tool_call_id": "call_1", "content": "Rome: 27C"},
    ]


def test_request_carries_tools_schema_response_format_and_options(
    server: FakeOpenAIServer, make_adapter: AdapterFactory
) -> None:
    server.enqueue(completion('{"city": "Paris", "celsius": 21}'))

    make_adapter(temperature=0.2, extra_body={"top_k": 5}).evaluate(
        ask(tools=(WEATHER,), output_type=Forecast), session=Session()
    )

    (body,) = server.bodies
    assert body["model"] == "test-model"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Current temperature of a city.",
                "parameters": serde.json_schema(CityParams),
            },
        },
    ]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Forecast", "schema": serde.json_schema(Forecast), "strict": False},
    }
    assert body["temperature"] == 0.2
    assert body["top_k"] == 5
    assert not body.get("stream")


@pytest.mark.parametrize(
    "text", ['{"city": "Paris", "celsius": 21}', '```json\n{"city": "Paris", "celsius": 21}\n```']
)
def test_structured_output_is_parsed_into_the_dataclass(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, text: str
) -> None:
    server.enqueue(completion(text))
    session = Session()

    response = make_adapter().evaluate(ask(output_type=Forecast), session=session)

    assert response.output == Forecast(city="Paris", celsius=21)
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert executed.output == Forecast(city="Paris", celsius=21)


@pytest.mark.parametrize("text", ['{"city": "Paris"}', '{"city": "Paris", "celsius": "warm"}', ""])
def test_structured_output_that_does_not_validate_fails(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, text: str
) -> None:
    server.enqueue(completion(text), completion(text))
    session = Session()

    with pytest.raises(AdapterResponseError, match=r"Forecast|structured output"):
        make_adapter().evaluate(ask(output_type=Forecast), session=session)

    # One retry by default, shown the parse error; both answers' tokens are kept.
    assert len(server.bodies) == 2
    retry = server.bodies[1]["messages"]
    assert retry[-1]["role"] == "user"
    assert "Reply again" in retry[-1]["content"]
    failed = session[PromptFailed].latest()
    assert failed is not None
    assert failed.stage == "output_parsing"
    assert failed.model_requests == 2
    assert failed.usage == TokenUsage(input_tokens=20, output_tokens=10)  # 2 x the default


def test_structured_output_retry_sends_the_parse_error_then_succeeds(
    server: FakeOpenAIServer, make_adapter: AdapterFactory
) -> None:
    server.enqueue(completion('{"city": "Paris"}'), completion('{"city": "Paris", "celsius": 21}'))
    session = Session()

    response = make_adapter().evaluate(ask(output_type=Forecast), session=session)

    assert response.output == Forecast(city="Paris", celsius=21)
    correction = server.bodies[1]["messages"][-1]["content"]
    assert "celsius" in correction and "Field required" in correction
    assert [m.role for m in response.messages][-3:] == ["assistant", "user", "assistant"]
    assert session[PromptFailed].all() == ()


def test_output_retries_zero_fails_on_the_first_bad_answer(
    server: FakeOpenAIServer, make_adapter: AdapterFactory
) -> None:
    server.enqueue(completion("not json"))

    with pytest.raises(AdapterResponseError, match="does not parse"):
        make_adapter(output_retries=0).evaluate(ask(output_type=Forecast), session=Session())
    assert len(server.bodies) == 1


def test_describe_records_model_server_and_parameters_without_credentials(
    server: FakeOpenAIServer,
) -> None:
    url = server.base_url.replace("http://", "http://alice:hunter2@") + "?key=abc"
    with OpenAIAdapter(
        "test-model", base_url=url, api_key=SECRET, temperature=0.2, extra_body={"top_k": 5}
    ) as adapter:
        info = adapter.describe()

    assert isinstance(adapter, DescribedAdapter)
    assert info.provider == "openai"
    assert info.model == "test-model"
    assert info.base_url is not None
    assert info.base_url.rstrip("/") == server.base_url.rstrip("/")
    assert "hunter2" not in str(info.to_dict()) and SECRET not in str(info.to_dict())
    assert dict(info.parameters) == {
        "temperature": 0.2,
        "extra_body": {"top_k": 5},
        "max_turns": 16,
        "output_retries": 1,
    }
    assert info.adapter == "weakincentives.adapters.openai.OpenAIAdapter"
    assert info.version == openai.__version__


@pytest.mark.parametrize(
    "change",
    [{"model": "other"}, {"temperature": 0.7}, {"base_url": "http://127.0.0.1:1/v1"}],
    ids=["model", "temperature", "base_url"],
)
def test_what_changes_the_model_changes_the_behaviour(
    server: FakeOpenAIServer, change: dict[str, Any]
) -> None:
    options: dict[str, Any] = {
        "model": "test-model",
        "base_url": server.base_url,
        "api_key": SECRET,
    }
    with OpenAIAdapter(**options) as a, OpenAIAdapter(**{**options, **change}) as b:
        assert a.describe().behaviour() != b.describe().behaviour()
        assert a.describe().behaviour() == OpenAIAdapter(**options).describe().behaviour()


def test_usage_is_summed_across_turns_with_cached_tokens(
    server: FakeOpenAIServer, make_adapter: AdapterFactory
) -> None:
    server.enqueue(
        completion(tool_calls=[("weather", {"city": "Oslo"})], usage=usage(10, 5, 4)),
        completion("9C", usage=usage(20, 7, 8)),
    )
    session = Session()

    response = make_adapter().evaluate(ask(tools=(WEATHER,)), session=session)

    expected = TokenUsage(input_tokens=30, output_tokens=12, cached_tokens=12)
    assert response.usage == expected
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert executed.usage == expected


@pytest.mark.parametrize(
    "block", [None, {"prompt_tokens": 3}, {"prompt_tokens": 3, "prompt_tokens_details": None}]
)
def test_missing_usage_counts_as_zero(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, block: dict[str, Any] | None
) -> None:
    server.enqueue(completion("ok", usage=block))

    response = make_adapter().evaluate(ask(), session=Session())

    prompt_tokens = (block or {}).get("prompt_tokens", 0)
    assert response.usage == TokenUsage(input_tokens=prompt_tokens)


def test_lenient_servers_arguments_object_and_missing_ids(
    server: FakeOpenAIServer, make_adapter: AdapterFactory
) -> None:
    # Some compatible servers send arguments as an object and leave out call ids.
    call = {"type": "function", "function": {"name": "weather", "arguments": {"city": "Oslo"}}}
    body = {"model": "m", "choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}
    server.enqueue(raw(serde.dumps(body)), completion("9C"))
    session = Session()

    make_adapter().evaluate(ask(tools=(WEATHER,)), session=session)

    (event,) = session[ToolInvoked].all()
    assert (dict(event.params), event.call_id, event.success) == (
        {"city": "Oslo"},
        "call_0_0",
        True,
    )
    assert server.bodies[1]["messages"][-1]["tool_call_id"] == "call_0_0"


def test_turn_limit(server: FakeOpenAIServer, make_adapter: AdapterFactory) -> None:
    server.default = completion(tool_calls=[("weather", {"city": "Paris"})])

    with pytest.raises(TurnLimitExceededError, match="2 turns"):
        make_adapter(max_turns=2).evaluate(ask(tools=(WEATHER,)), session=Session())
    assert len(server.requests) == 2


# -- retries and failures ---------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize(
    ("headers", "waited"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "0.25"}, 0.25),
        ({"Retry-After": "Mon, 01 Jan 2024 00:00:12 GMT"}, 12.0),  # FakeClock starts at 00:00
        ({"retry-after-ms": "1500"}, 1.5),
    ],
)
def test_retry_after_is_honoured_then_success(
    server: FakeOpenAIServer,
    make_adapter: AdapterFactory,
    clock: FakeClock,
    status: int,
    headers: dict[str, str],
    waited: float,
) -> None:
    server.enqueue(error(status, "busy", headers=headers), completion("ok"))

    response = make_adapter().evaluate(ask(), session=Session())

    assert response.text == "ok"
    assert len(server.requests) == 2
    assert clock.monotonic() == pytest.approx(waited)


def test_server_error_then_success_backs_off_with_jitter(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, clock: FakeClock
) -> None:
    server.enqueue(error(500), error(502), completion("ok"))

    response = make_adapter().evaluate(ask(), session=Session())

    assert response.text == "ok"
    assert len(server.requests) == 3
    # 0.5s then 1s ceilings, each at least half of its ceiling.
    assert 0.75 <= clock.monotonic() <= 1.5


def test_connection_dropped_then_success(
    server: FakeOpenAIServer, make_adapter: AdapterFactory
) -> None:
    server.enqueue(drop(), completion("ok"))

    response = make_adapter().evaluate(ask(), session=Session())

    assert response.text == "ok"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("status", "expected"),
    [(429, RateLimitError), (500, ProviderServerError), (503, ProviderServerError)],
)
@pytest.mark.parametrize("max_retries", [0, 3])
def test_persistent_failure_raises_after_every_retry(
    server: FakeOpenAIServer,
    make_adapter: AdapterFactory,
    clock: FakeClock,
    status: int,
    expected: type[AdapterError],
    max_retries: int,
) -> None:
    server.default = error(status, "try later please")

    with pytest.raises(expected) as info:
        make_adapter(max_retries=max_retries).evaluate(ask(), session=Session())

    message = str(info.value)
    assert f"HTTP {status}" in message
    assert "try later please" in message
    assert f"after {max_retries + 1} attempts" in message
    assert len(server.requests) == max_retries + 1
    assert (clock.monotonic() > 0) == (max_retries > 0)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_fail_at_once(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, clock: FakeClock, status: int
) -> None:
    server.default = error(status, "model 'test-model' does not exist")

    with pytest.raises(ProviderRequestError) as info:
        make_adapter().evaluate(ask(), session=Session())

    assert f"HTTP {status}" in str(info.value)
    assert "does not exist" in str(info.value)
    assert len(server.requests) == 1
    assert clock.monotonic() == 0


@pytest.mark.parametrize(
    "reply",
    [
        raw("not json {"),
        raw("<html>gateway</html>", content_type="text/html"),
        raw(""),
        raw("[1, 2]"),
        raw('{"object": "chat.completion"}'),
        raw('{"choices": []}'),
        raw('{"choices": [{"index": 0}]}'),
        raw('{"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}'),
        raw('{"choices": [{"message": {"content": null, "refusal": "I cannot help."}}]}'),
    ],
    ids=[
        "not-json",
        "html",
        "empty",
        "list",
        "no-choices",
        "empty-choices",
        "no-message",
        "nameless-tool-call",
        "refusal",
    ],
)
def test_malformed_answers_raise_response_error(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, reply: Reply
) -> None:
    server.enqueue(reply)

    with pytest.raises(AdapterResponseError, match="prompt tests/ask"):
        make_adapter().evaluate(ask(), session=Session())
    assert len(server.requests) == 1


def test_server_that_never_answers_times_out(
    server: FakeOpenAIServer, make_adapter: AdapterFactory
) -> None:
    server.default = hang()
    start = time.monotonic()

    with pytest.raises(AdapterTimeoutError, match=r"0\.50s"):
        make_adapter(timeout=0.5).evaluate(ask(), session=Session())

    assert time.monotonic() - start < 5.0
    assert len(server.requests) == 1  # a timeout is not retried


def test_run_deadline_shortens_the_request_timeout(
    server: FakeOpenAIServer, make_adapter: AdapterFactory
) -> None:
    server.default = hang()
    start = time.monotonic()

    with pytest.raises(AdapterTimeoutError):
        make_adapter(timeout=30.0).evaluate(
            ask(), session=Session(), deadline=Deadline.after(0.3, clock=SYSTEM_CLOCK)
        )

    assert time.monotonic() - start < 5.0


@pytest.mark.parametrize(
    ("retry_after", "deadline", "reason"),
    [("30", 5.0, "deadline leaves"), ("3600", None, "asked to wait 3600s")],
)
def test_gives_up_when_retry_after_cannot_be_waited_out(
    server: FakeOpenAIServer,
    make_adapter: AdapterFactory,
    clock: FakeClock,
    retry_after: str,
    deadline: float | None,
    reason: str,
) -> None:
    server.default = error(429, headers={"Retry-After": retry_after})
    run_deadline = Deadline.after(deadline, clock=clock) if deadline else None

    with pytest.raises(RateLimitError, match=reason):
        make_adapter().evaluate(ask(), session=Session(), deadline=run_deadline)

    assert len(server.requests) == 1
    assert clock.monotonic() == 0


def test_connection_refused(clock: FakeClock) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound but not listening: connections are refused
        port = sock.getsockname()[1]
        with (
            OpenAIAdapter(
                "m", base_url=f"http://127.0.0.1:{port}/v1", api_key=SECRET, clock=clock
            ) as adapter,
            pytest.raises(AdapterConnectionError, match="after 4 attempts") as info,
        ):
            adapter.evaluate(ask(), session=Session())

    assert f"127.0.0.1:{port}" in str(info.value)
    assert clock.monotonic() > 0  # retried with backoff


def test_deadline_already_passed_and_unknown_sdk_errors_are_translated(
    make_adapter: AdapterFactory,
) -> None:
    adapter = make_adapter()
    # Internal seams: run_prompt checks the deadline first, and the raw-response path
    # gives the SDK no other way to fail, so these are reached directly.
    with pytest.raises(DeadlineExceededError, match="deadline passed"):
        adapter._call_model(ModelRequest(messages=(), prompt_name="p", timeout=-0.1))
    failure = adapter._translate(openai.OpenAIError("odd"), "prompt p", 1.0)
    assert failure is not None and failure.error is AdapterResponseError
    assert "OpenAIError: odd" in failure.message
    assert adapter._translate(ValueError("not the SDK's"), "prompt p", 1.0) is None


def _echo_key(request: RecordedRequest, status: int) -> Reply:
    message = f"bad credentials: {request.headers['authorization']}"
    return raw(message) if status == 200 else error(status, message)


@pytest.mark.parametrize("status", [200, 400, 429, 500])
def test_api_key_never_appears_in_errors(
    server: FakeOpenAIServer, make_adapter: AdapterFactory, status: int
) -> None:
    server.default = lambda request: _echo_key(request, status)
    adapter = make_adapter(max_retries=1)

    with pytest.raises(AdapterError) as info:
        adapter.evaluate(ask(), session=Session())

    err = info.value
    assert "bad credentials: Bearer ***" in str(err)  # the server did echo it
    rendered = "".join(traceback.format_exception(err))
    assert SECRET not in f"{err} {err!r} {rendered} {adapter!r}"


# -- configuration ----------------------------------------------------------------------


def test_configuration_from_environment(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.enqueue(completion("ok"))

    with OpenAIAdapter() as adapter:
        assert adapter.evaluate(ask(), session=Session()).text == "ok"

    (request,) = server.requests
    assert request.json()["model"] == "env-model"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert repr(adapter) == f"OpenAIAdapter(model='env-model', base_url='{server.base_url}/')"


def test_local_server_needs_no_key(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.enqueue(completion("ok"))

    with OpenAIAdapter("llama", base_url=server.base_url) as adapter:
        assert adapter.evaluate(ask(), session=Session()).text == "ok"

    assert server.requests[0].headers["authorization"] == "Bearer no-key"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": None}, "OPENAI_MODEL"),
        ({"model": "m"}, "OPENAI_API_KEY"),
        ({"model": "m", "api_key": "k", "max_turns": 0}, "max_turns"),
        ({"model": "m", "api_key": "k", "max_retries": -1}, "max_retries"),
        ({"model": "m", "api_key": "k", "timeout": 0}, "timeout"),
        ({"model": "m", "client": "a client", "api_key": "k"}, "not both"),
    ],
)
def test_configuration_errors(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], match: str
) -> None:
    for name in ("OPENAI_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    with openai.OpenAI(api_key="k") as client:
        if "client" in kwargs:
            kwargs = {**kwargs, "client": client}
        with pytest.raises(ConfigurationError, match=match):
            OpenAIAdapter(**kwargs)


def test_given_client_has_its_sdk_retries_turned_off(
    server: FakeOpenAIServer, clock: FakeClock
) -> None:
    server.default = error(500)
    # The SDK would retry 5 times, sleeping for real; the adapter must make one call.
    with openai.OpenAI(base_url=server.base_url, api_key=SECRET, max_retries=5) as client:
        adapter = OpenAIAdapter("m", client=client, max_retries=0, clock=clock)
        with pytest.raises(ProviderServerError):
            adapter.evaluate(ask(), session=Session())
        adapter.close()  # does not close a client it was given
        assert not client.is_closed()
    assert len(server.requests) == 1


# -- end to end -------------------------------------------------------------------------


class WeatherLoop(AgentLoop[str, Forecast]):
    def create_prompt(self, request: str) -> Prompt[Forecast]:
        template = PromptTemplate[Forecast](
            ns="tests", key="forecast", sections=SECTIONS, tools=(WEATHER,), output_type=Forecast
        )
        return Prompt(template).bind(Question(request))


def test_agent_loop_end_to_end(server: FakeOpenAIServer, make_adapter: AdapterFactory) -> None:
    server.enqueue(
        completion(tool_calls=[("weather", {"city": "Rome"})], usage=usage(40, 10)),
        completion('{"city": "Rome", "celsius": 27}', usage=usage(60, 12, 32)),
    )
    loop = WeatherLoop(adapter=make_adapter())
    experiment = Experiment(name="fahrenheit").with_flag("units", "F")

    response, session = loop.execute("How warm is Rome?", experiment=experiment, deadline=30.0)

    assert response.output == Forecast(city="Rome", celsius=27)
    assert response.usage == TokenUsage(input_tokens=100, output_tokens=22, cached_tokens=32)
    assert session[Experiment].latest() == experiment
    (invoked,) = session[ToolInvoked].all()
    assert invoked.result.message == "Rome: 80F"  # the experiment's flag reached the tool
    assert server.bodies[1]["messages"][-1]["content"] == "Rome: 80F"
    assert "How warm is Rome?" in server.bodies[0]["messages"][1]["content"]
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert (executed.prompt_name, executed.model, executed.tool_calls) == (
        "tests/forecast",
        "fake-model",
        1,
    )
