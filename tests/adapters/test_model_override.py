"""`with_model`: another model and sampling parameters without editing code (`--model`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.fake_openai_server import FakeOpenAIServer, completion
from weakincentives.adapters import (
    FunctionAdapter,
    ModelConfigurable,
    ModelRequest,
    configure_model,
    parse_model_args,
)
from weakincentives.adapters.openai import OpenAIAdapter
from weakincentives.clock import FakeClock
from weakincentives.errors import ConfigurationError
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime.session import Session

TEMPLATE = PromptTemplate[str](
    ns="tests", key="override", sections=(MarkdownSection("Q", "q", "Say hi.", role="user"),)
)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default=completion("hi")) as s:
        yield s


def test_openai_with_model_sends_the_new_model_and_parameters(server: FakeOpenAIServer) -> None:
    original = OpenAIAdapter(
        "small", base_url=server.base_url, api_key="k", clock=FakeClock(),
        extra_body={"top_k": 5},
    )  # fmt: skip
    changed = configure_model(
        original, "large", parse_model_args(["temperature=0", "top_p=0.5", "seed=7"])
    )
    assert isinstance(original, ModelConfigurable)
    changed.evaluate(Prompt(TEMPLATE), session=Session())
    original.evaluate(Prompt(TEMPLATE), session=Session())
    new, old = server.bodies
    assert (new["model"], new["temperature"], new["top_p"], new["seed"], new["top_k"]) == (
        "large", 0.0, 0.5, 7, 5,
    )  # fmt: skip
    assert old["model"] == "small" and "temperature" not in old and "top_p" not in old
    assert (original.model, original.temperature) == ("small", None)


def test_openai_with_model_sets_adapter_settings_and_checks_them(
    server: FakeOpenAIServer,
) -> None:
    adapter = OpenAIAdapter("m", base_url=server.base_url, api_key="k")
    changed = adapter.with_model(None, max_turns=2, timeout=5, max_retries=0)
    assert (changed.model, changed.max_turns, changed.timeout, changed.max_retries) == (
        "m", 2, 5, 0,
    )  # fmt: skip
    assert changed.extra_body is None
    with pytest.raises(ConfigurationError, match="max_turns must be at least 1"):
        adapter.with_model(max_turns=0)
    with pytest.raises(ConfigurationError, match="temperature must be a number, got 'hot'"):
        adapter.with_model(temperature="hot")
    changed.close()  # a copy does not close the shared client
    adapter.evaluate(Prompt(TEMPLATE), session=Session())


def test_function_adapter_takes_a_model_name_but_no_sampling_parameters() -> None:
    seen: list[str] = []

    def model(request: ModelRequest) -> str:
        seen.append(request.last_user_text())
        return "ok"

    adapter = FunctionAdapter(model)
    renamed = configure_model(adapter, "fn-large", {"max_turns": 3})
    response = renamed.evaluate(Prompt(TEMPLATE), session=Session())
    assert (response.model, renamed.max_turns, adapter.model_name) == (
        "fn-large", 3, "function-model",
    )  # fmt: skip
    with pytest.raises(ConfigurationError, match="takes no sampling parameters; got temperature"):
        configure_model(adapter, None, {"temperature": 0})


def test_configure_model_refuses_an_adapter_without_with_model() -> None:
    class Plain:
        def evaluate(self, prompt: Any, **kwargs: Any) -> Any:
            raise AssertionError

    plain = Plain()
    assert configure_model(plain, None, {}) is plain
    with pytest.raises(ConfigurationError, match=r"--model: the adapter .*Plain cannot be given"):
        configure_model(plain, "x", {})


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("temperature=0", {"temperature": 0}),
        ('stop=["\\n"]', {"stop": ["\n"]}),
        ("user=eval bot", {"user": "eval bot"}),
        ("logprobs=true", {"logprobs": True}),
        ("x=", {"x": ""}),
    ],
)
def test_model_args_are_json_when_they_parse_and_text_otherwise(
    spec: str, expected: dict[str, Any]
) -> None:
    assert parse_model_args([spec]) == expected


@pytest.mark.parametrize("spec", ["temperature", "=0", "top p=1"])
def test_malformed_model_args_are_refused(spec: str) -> None:
    with pytest.raises(ConfigurationError, match="must look like KEY=VALUE"):
        parse_model_args([spec])
