"""The documentation site builds in strict mode and documents every public name and command.

The site is built once per test session (MkDocs, `--strict`: a broken link, a missing page or
a reference that does not resolve fails the build), into a temporary directory.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from weakincentives.cli._reference import commands, reference_markdown

ROOT = Path(__file__).resolve().parents[1]

REFERENCED_PACKAGES = (
    "weakincentives.evals",
    "weakincentives.evals.stats",
    "weakincentives.runtime",
    "weakincentives.runtime.mailbox",
    "weakincentives.runtime.session",
    "weakincentives.adapters",
)
"""Every name in these packages' `__all__` must have an entry in the API reference."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def inventory_names(path: Path) -> set[str]:
    """Object names in a Sphinx-style `objects.inv` (four header lines, then zlib)."""
    raw = path.read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = raw.index(b"\n", header_end) + 1
    body = zlib.decompress(raw[header_end:]).decode("utf-8")
    return {line.split(" ", 1)[0] for line in body.splitlines() if line}


def test_every_public_name_has_a_reference_entry(site: Path) -> None:
    names = inventory_names(site / "objects.inv")
    missing = [
        f"{package}.{name}"
        for package in REFERENCED_PACKAGES
        for name in importlib.import_module(package).__all__
        if f"{package}.{name}" not in names
    ]
    assert missing == []


def test_every_command_and_option_is_in_the_cli_reference(site: Path) -> None:
    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", page).replace("&lt;", "<").replace("&gt;", ">")
    found = list(commands())
    assert {"wink eval run", "wink query", "wink worker"} <= {c.path for c in found}
    for command in found:
        assert command.path in text, command.path
        for option in command.options:
            assert option in text, f"{command.path} {option}"


def test_the_cli_reference_is_generated_not_copied() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert "<!-- cli-reference -->" in page
    assert "--dataset" not in page  # the options come from the command definitions
    assert "`--dataset <path>`" in reference_markdown()
