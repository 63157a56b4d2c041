"""A template renders through its render plan exactly as it renders section by section.

`Prompt.render` without overrides fills a plan made once per template (fixed messages
shared, placeholders joined in); with overrides it renders each section. These tests
compare the two on templates Hypothesis builds: titles or none, both roles in any order,
`$name`, `${name}` and `$$`, params sections and keyword sections, values with spaces at
their ends (the render strips each section), and params not bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weakincentives.errors import PromptRenderError
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate, RenderedPrompt
from weakincentives.prompt._template import _merge


@dataclass(frozen=True)
class Params:
    a: str
    b: int


@dataclass(frozen=True)
class Other:
    a: str


def section_by_section(prompt: Prompt[Any]) -> RenderedPrompt:
    """How `Prompt.render` rendered every prompt before it had plans (no overrides)."""
    parts: list[tuple[str, str]] = []
    for section in prompt.template.sections:
        text = prompt._fill(section, section.template)
        rendered = f"## {section.title}\n\n{text}" if section.title else text
        parts.append((section.role, rendered.strip()))
    return RenderedPrompt(
        messages=_merge(parts),
        tools=tuple(prompt.template.tools),
        output_type=prompt.template.output_type,
    )


PIECES = ["$a", "${a}", "$b", "$$", " text ", "\n", "-x$${a}y", "  ", "$a$b"]
KEYWORD_PIECES = ["$k", "${k}", "$$", " text ", "\n"]


@st.composite
def sections(draw: st.DrawFn) -> MarkdownSection[Any]:
    kind = draw(st.sampled_from(["params", "other", "keywords", "fixed"]))
    pieces = {"params": PIECES, "other": ["$a", "$$", " t "], "keywords": KEYWORD_PIECES}
    body = "".join(draw(st.lists(st.sampled_from(pieces.get(kind, [" fixed ", "\n"])))))
    return MarkdownSection(
        draw(st.sampled_from(["", "Title", " Spaced "])),
        f"s{draw(st.integers(0, 10**6))}",
        body,
        {"params": Params, "other": Other}.get(kind),
        role=draw(st.sampled_from(["system", "user"])),
    )


@given(
    chosen=st.lists(sections(), min_size=1, max_size=6, unique_by=lambda s: s.key),
    a=st.sampled_from(["", "x", "  padded  ", "$a", "line\n"]),
    b=st.integers(-5, 5),
    bind=st.sets(st.sampled_from(["params", "other", "keywords"])),
)
def test_a_planned_render_is_the_section_by_section_render(
    chosen: list[MarkdownSection[Any]], a: str, b: int, bind: set[str]
) -> None:
    template = PromptTemplate[str](ns="t", key="plan", sections=tuple(chosen))
    prompt: Prompt[str] = Prompt(template)
    types = {s.params_type for s in chosen}
    if "params" in bind and Params in types:
        prompt = prompt.bind(Params(a, b))
    if "other" in bind and Other in types:
        prompt = prompt.bind(Other(a))
    if "keywords" in bind:
        prompt = prompt.bind(k=a)
    try:
        expected = section_by_section(prompt)
    except PromptRenderError as exc:
        with pytest.raises(PromptRenderError) as raised:
            prompt.render()
        assert str(raised.value) == str(exc)
        return
    assert prompt.render() == expected
    assert prompt.render() == expected  # the plan, made by the first render, serves again


def test_a_message_of_fixed_text_is_made_once_per_template() -> None:
    template = PromptTemplate[str](
        ns="t", key="shared",
        sections=(
            MarkdownSection("Task", "task", "Answer."),
            MarkdownSection("Q", "q", "$a", Other, role="user"),
        ),
    )  # fmt: skip
    first = Prompt(template).bind(Other("1")).render()
    second = Prompt(template).bind(Other("2")).render()
    assert first.messages[0] is second.messages[0]
    assert [m.content for m in (first.messages[1], second.messages[1])] == [
        "## Q\n\n1",
        "## Q\n\n2",
    ]
