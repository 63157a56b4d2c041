"""Heavy dependencies load on first use, not on import (issue #6, W3 memory and startup).

numpy (about 15 MiB), rich, starlette and the viewer are imported by the code that needs
them: `import weakincentives.evals`, a local run with a run store, and `wink` starting
(`import weakincentives.cli`) must not pull them in. Each check runs in a fresh
interpreter and reads `sys.modules` at the end.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HEAVY = ("numpy", "rich", "starlette", "uvicorn", "anthropic", "google.genai")
"""Third-party packages that must stay unloaded."""

VIEWER = (
    "weakincentives.debug._html_report",
    "weakincentives.debug._viewer",
    "weakincentives.debug._viewer_app",
    "weakincentives.debug._viewer_views",
)
"""The viewer and the HTML report (they bring numpy and starlette)."""

_REPORT = """
import json, sys
print(json.dumps(sorted(name for name in sys.modules if name in set(json.loads(sys.argv[1])))))
"""

_RUN_FUNCTION = """
from weakincentives.evals import RunStore, Sample, exact_match, run_eval

samples = [Sample(id=f"s{i}", input=f"q{i}", expected=f"q{i}") for i in range(5)]
report = run_eval(samples, lambda question: question, exact_match, store=RunStore(RUNS))
assert report.total == 5 and report.pass_rate == 1.0, report
"""

_RUN_AGENT = """
from dataclasses import dataclass

from weakincentives import AgentLoop, FunctionAdapter, MarkdownSection, Prompt, PromptTemplate
from weakincentives.adapters import FunctionReply, ModelRequest
from weakincentives.evals import RunStore, Sample, exact_match, run_eval


@dataclass(frozen=True)
class Question:
    text: str


@dataclass(frozen=True)
class Reply:
    text: str


TEMPLATE = PromptTemplate[Reply](
    ns="lazy", key="echo", output_type=Reply,
    sections=(MarkdownSection("Question", "question", "$text", Question, role="user"),),
)


class Echo(AgentLoop[Question, Reply]):
    def create_prompt(self, request: Question) -> Prompt[Reply]:
        return Prompt(TEMPLATE).bind(request)


def model(request: ModelRequest) -> FunctionReply:
    return FunctionReply(output=Reply(request.last_user_text().rsplit("\\n", 1)[-1]))


samples = [Sample(id=f"s{i}", input=Question(f"q{i}"), expected=Reply(f"q{i}")) for i in range(5)]
report = run_eval(samples, Echo(adapter=FunctionAdapter(model)), exact_match, store=RunStore(RUNS))
assert report.total == 5 and report.pass_rate == 1.0, report
"""


def loaded_after(code: str, watched: tuple[str, ...], tmp_path: Path) -> list[str]:
    """Run `code` in a fresh interpreter; return which `watched` modules it loaded."""
    script = tmp_path / "script.py"
    script.write_text(f"RUNS = {str(tmp_path / 'runs')!r}\n{code}\n{_REPORT}")
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(watched)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    loaded: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import weakincentives.evals", id="import-evals"),
        pytest.param("from weakincentives.evals import stats, EvalReport", id="import-stats"),
        pytest.param(_RUN_FUNCTION, id="run-function-with-store"),
        pytest.param(_RUN_AGENT, id="run-agent-with-store"),
    ],
)
def test_evals_leave_heavy_modules_unloaded(code: str, tmp_path: Path) -> None:
    watched = (*HEAVY, "weakincentives.debug", "weakincentives.cli")
    assert loaded_after(textwrap.dedent(code), watched, tmp_path) == []


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import weakincentives.cli", id="import-cli"),
        pytest.param("from weakincentives.cli import app, main", id="import-app"),
        pytest.param("from weakincentives.debug import DebugBundle", id="debug-bundle"),
        pytest.param(
            "from weakincentives.debug import DEFAULT_HOST, host_warning, is_loopback",
            id="debug-host",
        ),
    ],
)
def test_cli_and_debug_leave_heavy_modules_unloaded(code: str, tmp_path: Path) -> None:
    assert loaded_after(code, (*HEAVY, *VIEWER), tmp_path) == []


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param(
            "from weakincentives.evals import stats\nstats.mean_ci([1.0, 2.0])",
            ["numpy"],
            id="stats-loads-numpy-when-used",
        ),
        pytest.param(
            "from weakincentives.evals import EvalReport\nEvalReport().render()",
            ["rich"],
            id="render-loads-rich",
        ),
        pytest.param(
            "from weakincentives.debug import write_html_report",
            ["weakincentives.debug._html_report"],
            id="debug-loads-the-name-asked-for",
        ),
    ],
)
def test_first_use_loads_the_module(code: str, expected: list[str], tmp_path: Path) -> None:
    # The check above sees modules that are loaded: the names appear once they are used.
    watched = ("numpy", "rich", "weakincentives.debug._html_report")
    assert loaded_after(code, watched, tmp_path) == expected


def test_debug_package_lists_every_lazy_name() -> None:
    import weakincentives.debug as debug

    assert set(dir(debug)) >= set(debug.__all__)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = debug.missing


# -- lazy package `__init__`s (issue 20: import time) ---------------------------------

RUN_PATH_UNUSED = (
    "pydantic",  # the runner writes through pydantic_core; only validation needs pydantic
    "importlib.metadata",
    "importlib.resources",
    "http.server",
    "zipfile",
    "weakincentives.runtime.agent_worker",
    "weakincentives.runtime.lifecycle",
    "weakincentives.runtime.bundle._writer",
    "weakincentives.evals.loop",
    "weakincentives.evals.report._comparison",
)
"""Modules a local run of a task function (with a run store) has no use for."""

STRUCTURED_OUTPUT = ("pydantic", "importlib.metadata", "importlib.resources", "zipfile")
"""What an agent with structured output needs besides: pydantic builds its JSON schema and
parses the output (and pydantic's plugin loader reads the installed metadata)."""


@pytest.mark.parametrize(
    ("code", "watched"),
    [
        pytest.param(_RUN_FUNCTION, RUN_PATH_UNUSED, id="run-function-with-store"),
        pytest.param(
            _RUN_AGENT,
            tuple(m for m in RUN_PATH_UNUSED if m not in STRUCTURED_OUTPUT),
            id="run-agent-with-store",
        ),
    ],
)
def test_a_local_run_imports_only_what_it_uses(
    code: str, watched: tuple[str, ...], tmp_path: Path
) -> None:
    assert loaded_after(textwrap.dedent(code), watched, tmp_path) == []


def test_import_evals_loads_no_submodule_until_a_name_is_used(tmp_path: Path) -> None:
    watched = ("weakincentives.evals.runner", "weakincentives.runtime.agent_loop", "anyio")
    assert loaded_after("import weakincentives.evals", watched, tmp_path) == []
    code = "from weakincentives.evals import run_eval"
    assert loaded_after(code, watched, tmp_path) == sorted(watched)


SRC = Path(__file__).resolve().parents[1] / "src"


def _lazy_packages() -> list[Path]:
    return sorted(
        path
        for path in (SRC / "weakincentives").rglob("__init__.py")
        if "_lazy.lazy_exports(" in path.read_text(encoding="utf-8")
    )


def _type_checking_imports(tree: ast.Module, package: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for sub in node.body:
                assert isinstance(sub, ast.ImportFrom), ast.dump(sub)
                module = sub.module or ""
                if sub.level:
                    base = package.split(".")[: len(package.split(".")) - sub.level + 1]
                    module = ".".join([*base, module] if module else base)
                for alias in sub.names:
                    is_sub = sub.module is None
                    found[alias.name] = f"{module}.{alias.name}" if is_sub else module
    return found


def _lazy_table(tree: ast.Module) -> dict[str, str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            table = ast.literal_eval(node.value.args[1])
            return {name: module for module, names in table.items() for name in names}
    raise AssertionError("no lazy_exports(...) call")


@pytest.mark.parametrize("path", _lazy_packages(), ids=lambda p: p.parent.name)
def test_lazy_table_matches_the_type_checking_imports(path: Path) -> None:
    # Type checkers read the `if TYPE_CHECKING:` imports, Python the table: they must agree,
    # and name every exported name but the ones the package defines itself.
    package = ".".join(path.parent.relative_to(SRC).parts)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    table = _lazy_table(tree)
    assert table == _type_checking_imports(tree, package)
    module = importlib.import_module(package)
    defined = {name for name in module.__all__ if name in vars(module) and name not in table}
    assert set(table) | defined == set(module.__all__)
    assert defined <= {"__version__"}
    assert set(dir(module)) >= set(module.__all__)


def test_a_lazy_package_refuses_an_unknown_name() -> None:
    import weakincentives.evals as evals

    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = evals.missing


def test_package_version_is_the_installed_version() -> None:
    # Read from `__version__` (no importlib.metadata on a run's path): they must agree.
    from importlib import metadata

    from weakincentives.adapters import package_version

    assert package_version() == metadata.version("weakincentives")
    assert package_version("pytest") == metadata.version("pytest")
    assert package_version("no-such-distribution-here") == "unknown"
