from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers import calculator_tool
from weakincentives.errors import PromptError, PromptParamsError, PromptRenderError
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate


@dataclass(frozen=True)
class Question:
    question: str
    level: int = 1


@dataclass(frozen=True)
class Persona:
    name: str


@dataclass(frozen=True)
class Unrelated:
    x: int


def _template(*sections: MarkdownSection[Any]) -> PromptTemplate[str]:
    return PromptTemplate[str](ns="tests", key="qa", sections=sections)


QUESTION = MarkdownSection(
    "Question", "question", "$question (level ${level})", Question, role="user"
)
PERSONA = MarkdownSection("Persona", "persona", "You are $name.", Persona)


def test_render_fills_placeholders_from_params_and_merges_roles() -> None:
    rules: MarkdownSection[Any] = MarkdownSection("Rules", "rules", "Cost: $$5, style: $style.")
    prompt = Prompt(_template(PERSONA, rules, QUESTION)).bind(
        Question("2+2?", level=3), Persona("a tutor"), style="short"
    )
    rendered = prompt.render()

    assert [m.role for m in rendered.messages] == ["system", "user"]
    assert rendered.messages[0].content == (
        "## Persona\n\nYou are a tutor.\n\n## Rules\n\nCost: $5, style: short."
    )
    assert rendered.messages[1].content == "## Question\n\n2+2? (level 3)"
    assert rendered.applied_overrides == ()
    assert "You are a tutor." in rendered.text


def test_section_without_title_renders_body_only() -> None:
    rendered = Prompt(_template(MarkdownSection("", "body", "Just this."))).render()
    assert rendered.messages[0].content == "Just this."


def test_alternating_roles_become_separate_messages() -> None:
    sections: tuple[MarkdownSection[Any], ...] = (
        MarkdownSection("", "s1", "one"),
        MarkdownSection("", "u1", "two", role="user"),
        MarkdownSection("", "s2", "three"),
    )
    rendered = Prompt(_template(*sections)).render()
    assert [(m.role, m.content) for m in rendered.messages] == [
        ("system", "one"),
        ("user", "two"),
        ("system", "three"),
    ]


def test_latest_bound_params_win() -> None:
    prompt = Prompt(_template(QUESTION)).bind(Question("old")).bind(Question("new"))
    assert "new" in prompt.render().text


def test_bind_returns_a_copy() -> None:
    prompt = Prompt(_template(QUESTION))
    bound = prompt.bind(Question("q"))
    assert prompt.params == ()
    assert bound.params == (Question("q"),)


def test_section_without_placeholders_needs_no_params() -> None:
    section = MarkdownSection("Static", "static", "No placeholders.", Question)
    assert "No placeholders." in Prompt(_template(section)).render().text


# -- bad input ----------------------------------------------------------------------------


def test_unknown_placeholder_is_rejected_when_the_section_is_built() -> None:
    with pytest.raises(PromptRenderError, match=r"unknown placeholder \$topic.*question, level"):
        MarkdownSection("Q", "q", "$topic", Question)


@pytest.mark.parametrize("body", ["Price: $5", "trailing $", "${unclosed"])
def test_malformed_placeholder_is_rejected_with_a_hint(body: str) -> None:
    with pytest.raises(PromptRenderError, match=r"\$\$"):
        MarkdownSection("", "s", body)


def test_missing_keyword_value_fails_at_render() -> None:
    prompt = Prompt(_template(MarkdownSection("Rules", "rules", "Be $style.")))
    with pytest.raises(PromptRenderError, match=r"'rules' has no value for \$style.*bind\(style"):
        prompt.render()


def test_missing_params_fail_at_render() -> None:
    with pytest.raises(PromptRenderError, match="needs Question params"):
        Prompt(_template(QUESTION)).render()


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (Unrelated(1), "no section takes Unrelated.*Question"),
        ("a string", "got str"),
        (Question, "got type"),
        (42, "got int"),
    ],
    ids=["other-dataclass", "str", "dataclass-type", "int"],
)
def test_bind_rejects_params_of_the_wrong_type(value: object, match: str) -> None:
    prompt = Prompt(_template(QUESTION))
    with pytest.raises(PromptParamsError, match=match):
        prompt.bind(value)


def test_prompt_errors_are_value_and_type_errors() -> None:
    assert issubclass(PromptRenderError, ValueError)
    assert issubclass(PromptParamsError, TypeError)
    assert issubclass(PromptParamsError, PromptError)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ns": "Bad NS", "key": "k"},
        {"ns": "ok", "key": "../k"},
        {"ns": "ok", "key": "k", "sections": (PERSONA, PERSONA)},
        {"ns": "ok", "key": "k", "tools": (calculator_tool(), calculator_tool())},
    ],
    ids=["namespace", "key", "duplicate-sections", "duplicate-tools"],
)
def test_template_rejects_invalid_configuration(kwargs: dict[str, Any]) -> None:
    with pytest.raises(PromptError):
        PromptTemplate[str](**kwargs)


def test_section_key_is_validated() -> None:
    with pytest.raises(PromptError, match="invalid overrides key"):
        MarkdownSection("T", "../escape", "body")


def test_display_name_defaults_to_ns_and_key() -> None:
    assert Prompt(_template()).name == "tests/qa"
    named = PromptTemplate[str](ns="tests", key="qa", name="Q&A")
    assert Prompt(named).name == "Q&A"


def test_defining_a_template_notes_its_output_and_tool_types(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Noted, not built (that imports pydantic): an agent loop builds them (serde.prepare_pending).
    from weakincentives import serde

    noted: list[object] = []
    monkeypatch.setattr(serde, "prepare_later", noted.append)
    tool = calculator_tool()
    PromptTemplate[Persona](ns="tests", key="typed", output_type=Persona, tools=(tool,))
    assert noted == [Persona, tool.params_type]
    noted.clear()
    _template(QUESTION)  # plain text, no tools: nothing to note
    assert noted == []
