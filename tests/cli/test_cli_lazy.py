"""`wink` imports a command's module only when that command is used (issue 17, point 7).

`wink eval report` must not import what `wink eval run`, `wink debug` or `wink worker`
need; `wink --help` still lists every command with its help, in the same order; an
unknown command is the usual one-line usage error; and a command whose module cannot be
imported is listed as unavailable and fails with one line, never a traceback, while
every other command keeps working.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import pytest
import typer
from typer.testing import CliRunner

from weakincentives.cli import app
from weakincentives.cli._lazy_commands import LazyGroup

WINK = Path(sys.executable).with_name("wink")
ENV = {**os.environ, "COLUMNS": "200"}

COMMANDS = {
    "wink": ["query", "debug", "worker", "eval", "stats"],
    "wink eval": ["run", "report", "compare", "list"],
    "wink stats": ["power"],
}
"""Every group's commands, in the order `--help` lists them (as before they were lazy)."""

MODULES = {
    "query": "weakincentives.cli._query",
    "debug": "weakincentives.cli._debug",
    "worker": "weakincentives.cli._worker",
    "stats power": "weakincentives.cli._stats",
    "eval run": "weakincentives.cli._eval",
    "eval report": "weakincentives.cli._report",
    "eval compare": "weakincentives.cli._report",
    "eval list": "weakincentives.cli._list",
}
"""Where each command is defined."""


def _wink(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(WINK), *args], capture_output=True, text=True, env=env or ENV, timeout=120,
        check=False,
    )  # fmt: skip


def _first_line(text: str | None) -> str:
    return inspect.cleandoc(text or "").splitlines()[0]


# -- help ------------------------------------------------------------------------------


@pytest.mark.parametrize("group", sorted(COMMANDS))
def test_help_lists_every_command_with_its_help_in_order(group: str) -> None:
    words = group.split()[1:]
    result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    listed = [
        line.strip("│ ").split()[0]
        for line in result.output.split("Commands")[1].splitlines()[1:]
        if line.startswith("│")
    ]
    assert listed == COMMANDS[group]
    root = typer.main.get_command(app)
    command = root
    for word in words:
        command = command.commands[word]  # type: ignore[attr-defined]
    for name in COMMANDS[group]:
        help_text = _first_line(command.commands[name].help)  # type: ignore[attr-defined]
        assert help_text  # every command has a help line
        assert any(name in line and help_text in line for line in result.output.splitlines())


def test_every_command_help_comes_from_its_own_module() -> None:
    root = typer.main.get_command(app)
    for path, module in MODULES.items():
        command = root
        for word in path.split():
            command = command.commands[word]  # type: ignore[attr-defined]
        callback = getattr(command, "callback", None)
        assert callback is not None
        assert inspect.unwrap(callback).__module__ == module, path


# -- what a command imports ------------------------------------------------------------

_LOADED = """
import json, sys
from weakincentives.cli import main
try:
    main()
except SystemExit as exit:
    code = exit.code
watched = ("weakincentives", "asyncio", "pydantic")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in watched)
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def _loaded_by(*args: str) -> set[str]:
    """The modules `wink ARGS` imported (it must succeed)."""
    proc = subprocess.run(
        [sys.executable, "-c", _LOADED, *args], capture_output=True, text=True, env=ENV,
        timeout=120, check=False,
    )  # fmt: skip
    ended = json.loads(proc.stderr.strip().splitlines()[-1])
    assert ended["code"] == 0, proc.stderr
    return set(ended["loaded"])


@pytest.fixture
def stored_run(tmp_path: Path) -> tuple[Path, str]:
    """A run directory under `runs/`, with its manifest: `(runs_dir, run_id)`."""
    from weakincentives.evals import RunStore, Sample, exact_match, run_eval

    runs = tmp_path / "runs"
    samples = [Sample(id=f"s{i}", input=f"q{i}", expected=f"q{i % 2}") for i in range(4)]
    report = run_eval(samples, lambda question: question, exact_match, store=RunStore(runs))
    assert report.run_id is not None
    return runs, report.run_id


@pytest.mark.parametrize("form", ["run id", "run directory"])
def test_eval_report_imports_no_other_command_nor_pydantic(
    stored_run: tuple[Path, str], form: str
) -> None:
    runs, run_id = stored_run
    where = [run_id, "--runs-dir", str(runs)] if form == "run id" else [str(runs / run_id)]
    loaded = _loaded_by("eval", "report", *where)
    assert "weakincentives.cli._report" in loaded
    others = {m for p, m in MODULES.items() if p not in {"eval report", "eval compare"}}
    heavy = {"weakincentives.debug", "weakincentives.evals.runner", "asyncio", "pydantic"}
    assert loaded & (others | heavy) == set()


def test_version_imports_no_command() -> None:
    assert _loaded_by("--version") & set(MODULES.values()) == set()


# -- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "error: No such command 'nope'.\n"),
        (["evl"], "error: No such command 'evl'. Did you mean 'eval'?\n"),
        (["eval", "reprt"], "error: No such command 'reprt'. Did you mean 'report'?\n"),
    ],
)
def test_an_unknown_command_is_a_one_line_usage_error(args: list[str], message: str) -> None:
    result = _wink(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.stderr


_BROKEN = """
import sys


class Broken:
    # The module of `wink debug` fails to import, as with a missing dependency.
    def find_spec(self, name, path=None, target=None):
        if name == "weakincentives.cli._debug":
            raise ImportError("No module named 'starlette'")
        return None


sys.meta_path.insert(0, Broken())
"""


@pytest.fixture
def broken_debug(tmp_path: Path) -> dict[str, str]:
    """The environment of a `wink` whose `debug` module cannot be imported."""
    (tmp_path / "sitecustomize.py").write_text(_BROKEN)
    return {**ENV, "PYTHONPATH": str(tmp_path)}


def test_a_command_that_cannot_be_imported_fails_in_one_line(
    broken_debug: dict[str, str],
) -> None:
    result = _wink("debug", "runs", "--no-open", env=broken_debug)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "error: wink debug is unavailable: cannot import weakincentives.cli._debug: "
        "ImportError: No module named 'starlette'\n"
    )


def test_the_other_commands_and_help_still_work(broken_debug: dict[str, str]) -> None:
    listed = _wink("--help", env=broken_debug)
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    line = next(line for line in listed.stdout.splitlines() if line.startswith("│ debug "))
    assert "Unavailable" in line
    assert "query" in listed.stdout
    assert "worker" in listed.stdout
    power = _wink("stats", "power", "--baseline-rate", "0.7", "--effect", "0.1", env=broken_debug)
    assert power.returncode == 0, power.stderr


# -- LazyGroup itself ------------------------------------------------------------------


@pytest.fixture
def command_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A package of command modules: two good, one that raises, one without the command."""
    package = tmp_path / "lazy_cmds"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "greet.py").write_text(
        textwrap.dedent(
            '''
            import typer

            def hello(name: str) -> None:
                """Say hello."""
                typer.echo(f"hello {name}")

            def bye() -> None:
                """Say goodbye."""
                typer.echo("bye")

            def register(app: typer.Typer) -> None:
                app.command("hello")(hello)
                app.command("bye")(bye)
            '''
        )
    )
    (package / "raises.py").write_text("raise RuntimeError('broken on import')\n")
    (package / "empty.py").write_text("def register(app):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("lazy_cmds")]:
        monkeypatch.delitem(sys.modules, name)
    return "lazy_cmds"


def _demo_app(package: str) -> typer.Typer:
    class Commands(LazyGroup):
        lazy_commands: ClassVar = {
            "hello": f"{package}.greet",
            "bye": f"{package}.greet",
            "raises": f"{package}.raises",
            "missing": f"{package}.empty",
            "absent": f"{package}.absent",
        }

    demo = typer.Typer(cls=Commands, add_completion=False)

    @demo.callback()
    def _root() -> None:
        """Demo."""

    return demo


def test_lazy_group_imports_a_module_on_first_use(command_modules: str) -> None:
    demo = _demo_app(command_modules)
    group = typer.main.get_command(demo)
    assert list(group.commands) == ["hello", "bye", "raises", "missing", "absent"]  # type: ignore[attr-defined]
    assert f"{command_modules}.greet" not in sys.modules  # listing names imports nothing
    result = CliRunner().invoke(demo, ["hello", "you"])
    assert (result.exit_code, result.output) == (0, "hello you\n")
    assert f"{command_modules}.raises" not in sys.modules


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("raises", "cannot import lazy_cmds.raises: RuntimeError: broken on import"),
        ("missing", "lazy_cmds.empty does not define the command 'missing'"),
        ("absent", "cannot import lazy_cmds.absent: ModuleNotFoundError: No module named"),
    ],
)
def test_lazy_group_reports_a_command_it_cannot_load(
    command_modules: str, command: str, reason: str
) -> None:
    demo = _demo_app(command_modules)
    result = CliRunner().invoke(demo, [command, "--anything", "x"])
    assert result.exit_code == 2
    assert f"is unavailable: {reason}" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    listed = CliRunner().invoke(demo, ["--help"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    line = next(line for line in listed.output.splitlines() if line.startswith(f"│ {command} "))
    assert "Unavailable" in line
    ok = CliRunner().invoke(demo, ["bye"])
    assert (ok.exit_code, ok.output) == (0, "bye\n")
