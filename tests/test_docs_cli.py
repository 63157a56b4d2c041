"""Run every `wink` command shown in the docs against the demo's data.

Every line starting with `wink ` in a ```bash block of a docs page is run with the
installed `wink`, in a directory where the demo (`examples/demo.py`) has written its
dataset and one run; `RUN` in a command stands for that run's directory. Blocks tagged
```bash nocheck (commands that need a Redis server, a real model, or serve until stopped)
are skipped. A command must exit 0, or the code its line declares with `# exit N`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
WINK = Path(sys.executable).with_name("wink")

_FENCE = re.compile(
    r"^```bash(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL
)
_EXIT = re.compile(r"#\s*exit\s+(?P<code>\d+)\s*$")


@dataclass(frozen=True, slots=True)
class Example:
    """One `wink` command of a docs page."""

    page: str
    """The page, relative to docs/."""
    line: int
    """Line of the command in the page."""
    command: str
    """The command as written (continuation lines joined)."""
    exit_code: int
    """The exit code it must end with."""


def extract_examples(page: Path) -> list[Example]:
    text = page.read_text(encoding="utf-8")
    found: list[Example] = []
    for match in _FENCE.finditer(text):
        if "nocheck" in match["info"].split():
            continue
        first = text.count("\n", 0, match.start("code")) + 1
        lines = match["code"].splitlines()
        i = 0
        while i < len(lines):
            start, command = i, lines[i]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1].rstrip() + " " + lines[i].strip()
            i += 1
            if not command.startswith("wink "):
                continue
            code = _EXIT.search(command)
            command = _EXIT.sub("", command).strip()
            found.append(
                Example(
                    page=str(page.relative_to(DOCS)),
                    line=first + start,
                    command=command,
                    exit_code=int(code["code"]) if code else 0,
                )
            )
    return found


EXAMPLES = [example for page in sorted(DOCS.rglob("*.md")) for example in extract_examples(page)]


@dataclass(frozen=True, slots=True)
class Demo:
    """Where the demo ran, and its run."""

    work: Path
    """The working directory (has `runs/` and a link to `examples/`)."""
    run: str
    """The demo run's directory, relative to `work`: what `RUN` stands for."""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """A directory with the demo's dataset and one demo run, and `examples/` linked in."""
    work = tmp_path_factory.mktemp("docs-cli")
    (work / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), "--n", "12", "--concurrency", "4"],
        cwd=work,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = [p for p in (work / "runs").iterdir() if (p / "run.json").is_file()]
    return Demo(work=work, run=f"runs/{run.name}")


def _env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "120", "NO_COLOR": "1", "WINK_DEMO_N": "12"}


def test_the_docs_show_wink_commands() -> None:
    pages = {example.page for example in EXAMPLES}
    assert {"getting-started.md", "query.md"} <= pages
    assert len(EXAMPLES) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{e.page}:{e.line}" for e in EXAMPLES])
def test_docs_wink_command_runs(example: Example, demo: Demo) -> None:
    command = re.sub(r"\bRUN\b", demo.run, example.command)
    argv = [str(WINK), *shlex.split(command)[1:]]
    done = subprocess.run(
        argv, cwd=demo.work, env=_env(), capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == example.exit_code, (
        f"{example.page}:{example.line}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )


def test_extraction_joins_continuations_and_skips_nocheck(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\nwink eval report RUN \\\n  --json\nmake demo\nwink stats power  # exit 2\n```\n"
        "```bash nocheck\nwink worker x:y --redis redis://h\n```\n",
        encoding="utf-8",
    )
    global DOCS
    saved, DOCS = DOCS, tmp_path
    try:
        found = extract_examples(page)
    finally:
        DOCS = saved
    assert [(e.line, e.command, e.exit_code) for e in found] == [
        (2, "wink eval report RUN --json", 0),
        (5, "wink stats power", 2),
    ]
