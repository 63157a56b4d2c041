"""Every code block of the spec (`../shared/spec/*.md`) runs, as `ADAPTATIONS.md` says.

The blocks are extracted again on every run: a block added to (or changed in) the spec
fails `test_every_block_is_handled` until `tests/spec/adaptations.py` handles it.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spec import standins
from tests.spec.adaptations import DOCUMENT, HANDLINGS, render
from tests.spec.blocks import (
    Env,
    Handling,
    SpecBlock,
    SpecMissingError,
    all_blocks,
    apply_edits,
    block_module,
    extract_blocks,
    run_code,
    spec_dir,
)
from weakincentives.adapters import FunctionAdapter

BLOCKS: dict[str, SpecBlock] = {b.key: b for b in all_blocks()}
HANDLED: dict[str, Handling] = {h.key: h for h in HANDLINGS}
PYTHON = [key for key, block in BLOCKS.items() if block.is_python]


def test_every_block_is_handled_and_nothing_else() -> None:
    unknown = sorted(set(BLOCKS) - set(HANDLED))
    stale = sorted(set(HANDLED) - set(BLOCKS))
    assert not unknown, f"spec blocks with no entry in tests/spec/adaptations.py: {unknown}"
    assert not stale, f"entries for blocks the spec no longer has: {stale}"
    assert len(HANDLINGS) == len(HANDLED), "a block is handled twice"


@pytest.mark.parametrize("key", sorted(BLOCKS))
def test_block_is_handled_as_it_is_now(key: str) -> None:
    block, handling = BLOCKS[key], HANDLED.get(key)
    assert handling is not None, f"{key} is not in tests/spec/adaptations.py"
    assert handling.sha == block.sha, (
        f"{key} changed (sha {block.sha}, handled as {handling.sha}): check its handling"
    )
    assert (handling.kind == "not python") is (not block.is_python), key
    if handling.kind != "as written":
        assert handling.why, f"{key}: a block not run as written says why"


def test_the_count_of_blocks_run_is_the_count_in_the_documents() -> None:
    in_documents = sum(
        1
        for path in sorted(spec_dir().glob("*.md"))
        for block in extract_blocks(path.read_text(encoding="utf-8"), path.name)
        if block.is_python
    )
    handled_python = [h for h in HANDLINGS if h.kind != "not python"]
    counts = f"spec Python blocks: {in_documents} in the documents, {len(handled_python)} run"
    print(counts)
    assert len(PYTHON) == len(handled_python) == in_documents, counts
    assert in_documents >= 60, counts  # the spec as of this suite: 60 Python blocks


def test_adaptations_document_is_up_to_date() -> None:
    assert DOCUMENT.read_text(encoding="utf-8") == render(), (
        "tests/spec/ADAPTATIONS.md is stale: run `python -m tests.spec.adaptations`"
    )


def test_a_missing_spec_fails_loudly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WINK_SPEC_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(SpecMissingError, match="does not skip"):
        spec_dir()


def test_edits_must_match_exactly_once() -> None:
    block = SpecBlock(doc="x.md", n=1, line=1, info="python", code="a = 1\na = 1\n")
    with pytest.raises(AssertionError, match="matches 2 times"):
        apply_edits(block, (("a = 1", "a = 2"),))
    with pytest.raises(AssertionError, match="matches 0 times"):
        apply_edits(block, (("b = 1", "b = 2"),))


def test_text_blocks_count_as_python_only_when_they_parse() -> None:
    text = "```text\nx = 1\n```\n\n```text\nnot python at all\n```\n\n```mermaid\nx = 1\n```\n"
    assert [b.is_python for b in extract_blocks(text, "t.md")] == [True, False, False]


# -- running the blocks -------------------------------------------------------------------


@pytest.fixture
def env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Env]:
    monkeypatch.chdir(tmp_path)
    printed: list[str] = []

    def stdout() -> str:
        printed.append(capsys.readouterr().out)
        return "".join(printed)

    def openai_adapter(model_name: str | None = None, **kwargs: Any) -> FunctionAdapter:
        name = str(kwargs.get("model") or model_name or "spec-model")
        return FunctionAdapter(standins.spec_model, model_name=name)

    module = importlib.import_module("weakincentives.adapters.openai")
    monkeypatch.setattr(module, "OpenAIAdapter", openai_adapter)
    state = Env(tmp=tmp_path, stdout=stdout)
    try:
        yield state
    finally:
        for close in reversed(state.closers):
            close()


def run_handled(key: str, namespace: dict[str, Any], env: Env) -> None:
    """Run block `key` into `namespace`: its setup, its `after` blocks, then its code."""
    block, handling = BLOCKS[key], HANDLED[key]
    if handling.setup is not None:
        namespace.update(handling.setup(env))
    for n in handling.after:
        run_handled(f"{block.doc}#{n}", namespace, env)
    code = apply_edits(block, handling.edits)
    run_code(block, code, namespace, as_function=handling.as_function)


@pytest.mark.parametrize("key", list(BLOCKS))  # documents in name order, blocks in order
def test_spec_block(key: str, env: Env) -> None:
    block, handling = BLOCKS[key], HANDLED[key]
    if handling.kind == "not python":
        if handling.check is not None:
            handling.check(env, {})
        return
    with block_module(block) as module:
        namespace = module.__dict__
        run_handled(key, namespace, env)
        if handling.check is not None:
            handling.check(env, namespace)


def test_a_block_module_is_importable_while_it_runs() -> None:
    block = SpecBlock(doc="x.md", n=1, line=3, info="python", code="import sys\nme = __name__\n")
    with block_module(block) as module:
        run_code(block, block.code, module.__dict__)
        assert sys.modules[module.__name__] is module
        assert isinstance(module, types.ModuleType) and module.me == module.__name__
    assert module.__name__ not in sys.modules
