from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from weakincentives.errors import OverridesError, PromptRenderError
from weakincentives.prompt import (
    LocalPromptOverridesStore,
    MarkdownSection,
    Prompt,
    PromptTemplate,
    SectionOverride,
    StaleOverrideWarning,
    section_hash,
)

INSTRUCTIONS = "Answer briefly."


@dataclass(frozen=True)
class Question:
    question: str


TEMPLATE = PromptTemplate[str](
    ns="app/qa",
    key="answer",
    sections=(
        MarkdownSection("Instructions", "instructions", INSTRUCTIONS),
        MarkdownSection("Question", "question", "$question", Question, role="user"),
    ),
)


@pytest.fixture
def store(tmp_path: Path) -> LocalPromptOverridesStore:
    return LocalPromptOverridesStore(tmp_path)


def _render(store: LocalPromptOverridesStore, tag: str) -> str:
    return Prompt(TEMPLATE).bind(Question("why?")).with_overrides(store, tag).render().text


def test_stored_override_replaces_the_section_body(store: LocalPromptOverridesStore) -> None:
    path = store.store(
        "app/qa",
        "answer",
        "concise",
        section_key="instructions",
        original=INSTRUCTIONS,
        body="Answer in one word.",
    )
    assert path == store.root / "app/qa/answer/concise.json"

    rendered = Prompt(TEMPLATE).bind(Question("why?")).with_overrides(store, "concise").render()

    assert "Answer in one word." in rendered.text
    assert INSTRUCTIONS not in rendered.text
    assert rendered.applied_overrides == ("instructions",)


def test_overrides_are_per_tag(store: LocalPromptOverridesStore) -> None:
    store.store(
        "app/qa", "answer", "v2", section_key="instructions", original=INSTRUCTIONS, body="V2."
    )
    assert "V2." in _render(store, "v2")
    assert INSTRUCTIONS in _render(store, "latest")


def test_override_may_use_the_section_placeholders(store: LocalPromptOverridesStore) -> None:
    store.store(
        "app/qa",
        "answer",
        "v2",
        section_key="question",
        original="$question",
        body="Please answer: $question",
    )
    assert "Please answer: why?" in _render(store, "v2")


def test_override_with_an_unknown_placeholder_fails(store: LocalPromptOverridesStore) -> None:
    store.store(
        "app/qa", "answer", "v2", section_key="question", original="$question", body="$topic"
    )
    with pytest.raises(PromptRenderError, match=r"\$topic"):
        _render(store, "v2")


def test_store_updates_one_section_and_keeps_the_others(
    store: LocalPromptOverridesStore,
) -> None:
    store.store("app/qa", "answer", "v2", section_key="instructions", original="a", body="A")
    path = store.store("app/qa", "answer", "v2", section_key="question", original="b", body="B")
    assert dict(store.resolve("app/qa", "answer", "v2")) == {
        "instructions": SectionOverride(body="A", expected_hash=section_hash("a")),
        "question": SectionOverride(body="B", expected_hash=section_hash("b")),
    }
    assert [p.name for p in path.parent.iterdir()] == ["v2.json"]  # no temp files left


def test_missing_file_means_no_overrides(store: LocalPromptOverridesStore) -> None:
    assert store.resolve("app/qa", "answer", "nothing-here") == {}


def test_stale_override_is_ignored_with_a_warning(store: LocalPromptOverridesStore) -> None:
    store.store(
        "app/qa",
        "answer",
        "old",
        section_key="instructions",
        original="The text this section used to have.",
        body="Stale body.",
    )
    with pytest.warns(StaleOverrideWarning, match="'instructions'.*'old'.*older text"):
        rendered = Prompt(TEMPLATE).bind(Question("q")).with_overrides(store, "old").render()
    assert INSTRUCTIONS in rendered.text
    assert "Stale body." not in rendered.text
    assert rendered.applied_overrides == ()


def _write(store: LocalPromptOverridesStore, tag: str, text: str) -> Path:
    path = store.path_for("app/qa", "answer", tag)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_bad_json_error_names_the_file_and_line(store: LocalPromptOverridesStore) -> None:
    path = _write(store, "broken", '{\n  "version": 1,\n  "sections": {,}\n}\n')
    with pytest.raises(OverridesError) as info:
        _render(store, "broken")
    assert str(info.value).startswith(f"{path}:3:")
    assert "invalid JSON" in str(info.value)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ({"version": 1, "sections": {"instructions": {"body": 3}}}, "body"),
        ({"version": 1, "sections": {"instructions": {"body": "x"}}}, "expected_hash"),
        ({"sections": {}}, "version"),
        ({"version": 2, "sections": {}}, "unsupported overrides version 2"),
    ],
    ids=["body-type", "missing-hash", "missing-version", "future-version"],
)
def test_invalid_file_error_names_the_file_and_field(
    store: LocalPromptOverridesStore, content: object, match: str
) -> None:
    path = _write(store, "invalid", json.dumps(content))
    with pytest.raises(OverridesError, match=match) as info:
        store.resolve("app/qa", "answer", "invalid")
    assert str(path) in str(info.value)


def test_unreadable_file_is_an_overrides_error(store: LocalPromptOverridesStore) -> None:
    store.path_for("app/qa", "answer", "dir").mkdir(parents=True)
    with pytest.raises(OverridesError, match="cannot read overrides file"):
        store.resolve("app/qa", "answer", "dir")


BAD_TAGS = ["../x", "..", "a/b", "/etc/passwd", "Latest", "", ".hidden", "latest\n", "x" * 65]


@pytest.mark.parametrize("tag", BAD_TAGS)
def test_invalid_tags_are_rejected(store: LocalPromptOverridesStore, tag: str) -> None:
    with pytest.raises(OverridesError, match="invalid overrides tag"):
        store.path_for("app/qa", "answer", tag)
    with pytest.raises(OverridesError, match="invalid overrides tag"):
        Prompt(TEMPLATE).with_overrides(store, tag)


@pytest.mark.parametrize("key", ["../x", "a/b", "UPPER", ""])
def test_invalid_keys_are_rejected(store: LocalPromptOverridesStore, key: str) -> None:
    with pytest.raises(OverridesError, match="invalid overrides key"):
        store.resolve("app/qa", key, "latest")
    with pytest.raises(OverridesError, match="invalid overrides key"):
        store.store("app/qa", key, "v1", section_key="s", original="", body="")


@pytest.mark.parametrize("ns", ["../x", "a/../b", "a/./b", "/abs", "a//b", "a/"])
def test_invalid_namespaces_are_rejected(store: LocalPromptOverridesStore, ns: str) -> None:
    with pytest.raises(OverridesError, match="invalid overrides namespace"):
        store.resolve(ns, "answer", "latest")


@pytest.mark.parametrize("tag", ["latest", "v2", "exp-1.b_c", "0"])
def test_valid_tags_stay_inside_the_root(store: LocalPromptOverridesStore, tag: str) -> None:
    path = store.path_for("app/qa", "answer", tag)
    assert path.resolve().is_relative_to(store.root.resolve())
    assert path.name == f"{tag}.json"
