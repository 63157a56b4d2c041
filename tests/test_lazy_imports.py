"""Heavy dependencies load on first use, not on import (issue #6, W3 memory and startup).

numpy (about 15 MiB), rich, starlette and the viewer are imported by the code that needs
them: `import weakincentives.evals`, a local run with a run store, and `wink` starting
(`import weakincentives.cli`) must not pull them in. Each check runs in a fresh
interpreter and reads `sys.modules` at the end.
"""

from __future__ import annotations

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
