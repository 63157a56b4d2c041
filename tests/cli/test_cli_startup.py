"""Ctrl-C while `wink` starts: one line and exit 130, never a traceback (issue #15).

The first second of `wink` is spent importing modules, before any command has a
handler of its own; a command then imports more as it needs them (typer alone would end
a Ctrl-C there with exit 130 and no word). To interrupt it at a chosen point, not at a
lucky moment, each test puts a `sitecustomize` on the path that holds the import of one
module: it marks a file, then waits; the test sends SIGINT once the file is there, so the interrupt
lands inside that import every time.

What is not covered, and cannot be: a Ctrl-C while the interpreter itself starts and
imports the two small modules the console script names (`weakincentives`,
`weakincentives.cli`), before `main()` runs; those hold no heavy import.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WINK = Path(sys.executable).with_name("wink")

SITECUSTOMIZE = """
import os, pathlib, sys, time


class PauseAt:
    # Holds the import of one module until SIGINT arrives (it interrupts the sleep).
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["PAUSE_AT"]:
            sys.meta_path.remove(self)
            pathlib.Path(os.environ["PAUSED"]).touch()
            time.sleep(60)
        return None


sys.meta_path.insert(0, PauseAt())
"""

STARTING = "interrupted: wink was starting; nothing was done.\n"
"""Before any command runs (`weakincentives.cli.main`)."""
RUNNING = "interrupted: stopped before the command finished.\n"
"""While a command that does not handle Ctrl-C itself runs (`WinkGroup.invoke`)."""

COMMAND = ("stats", "power", "--baseline-rate", "0.7", "--effect", "0.05")
"""A command that imports more modules while it runs (the statistics, numpy)."""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "said"),
    [
        ("weakincentives.cli._app", {STARTING}),  # the application itself
        ("typer", {STARTING}),  # the command line's own library
        ("weakincentives.cli._lazy_commands", {STARTING}),  # the groups, being built
        ("weakincentives.cli._stats", {STARTING}),  # the command's module, loaded on use
        ("weakincentives.evals", {STARTING, RUNNING}),  # wherever it loads first
        ("weakincentives.evals.stats._power", {STARTING, RUNNING}),
        ("numpy", {RUNNING}),  # loaded by the command only (tests/test_lazy_imports.py)
    ],
)
def test_ctrl_c_while_wink_imports_is_one_line_and_exit_130(
    tmp_path: Path, module: str, said: set[str]
) -> None:
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    paused = tmp_path / "paused"
    env = {
        **os.environ, "PYTHONPATH": str(tmp_path), "PAUSE_AT": module, "PAUSED": str(paused),
        "COLUMNS": "80",
    }  # fmt: skip
    process = subprocess.Popen(
        [str(WINK), *COMMAND], cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not paused.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            out, err = process.communicate()
            pytest.fail(f"wink never imported {module}: rc {process.returncode}\n{out}{err}")
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert "Traceback" not in err
    assert err in said
    assert out == ""
    assert process.returncode == 130
