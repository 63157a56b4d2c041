"""`wink` converts text and path values as typer does, without importing pydantic (issue 17).

typer converts every parameter value through a pydantic adapter; `plain_params` gives
each parameter a converter that does the same for `str` and `Path` values and builds
typer's own only for anything else. Each case here is checked against typer's own
converter, on every parameter of every `wink` command.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer._coercion import build_runtime_param
from typer.testing import CliRunner

from weakincentives.cli import app
from weakincentives.cli._plain_params import plain_params


def _commands(command: Any, path: str) -> Iterator[tuple[str, Any]]:
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        yield path, command
        return
    yield path, command
    for name in subcommands:
        yield from _commands(subcommands[name], f"{path} {name}")


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        value = call()
    except Exception as exc:  # the same error, with the same message
        return "error", (type(exc), str(getattr(exc, "message", exc)))
    return "value", (type(value), value)


VALUES: tuple[Any, ...] = ("runs", "", "a/b/", "-", "ünïcode", Path("runs"), 3, ("a", "b"))


def _cases(tmp_path: Path) -> tuple[Any, ...]:
    (tmp_path / "file.txt").write_text("x")
    return (*VALUES, str(tmp_path), str(tmp_path / "file.txt"), tmp_path / "missing")


def test_every_parameter_converts_as_typer_does(tmp_path: Path) -> None:
    root = typer.main.get_command(app)
    checked = 0
    for path, command in _commands(root, "wink"):
        ctx = command.context_class(command, info_name=path.split()[-1])
        params = [*command.params, command.get_help_option(ctx)]
        for param in params:
            if param is None or not hasattr(param, "type_descriptor"):
                continue
            plain = param.get_runtime_param()
            assert type(plain).__name__ == "_PlainParam", (path, param.name)
            standard = build_runtime_param(param.type_descriptor)
            for value in (None, *_cases(tmp_path)):
                ours = _outcome(functools.partial(plain.coerce, value, param=param, ctx=ctx))
                typers = _outcome(functools.partial(standard.coerce, value, param=param, ctx=ctx))
                assert ours == typers, (path, param.name, value)
                checked += 1
    assert checked > 500  # every command's parameters, not a few


def test_a_failed_path_check_gives_typers_own_message(tmp_path: Path) -> None:
    def show(where: Annotated[Path, typer.Option(exists=True, dir_okay=False)]) -> None:
        typer.echo(f"{where!r}")

    def build(plain: bool) -> Any:
        demo = typer.Typer(add_completion=False)
        demo.command()(show)
        command = typer.main.get_command(demo)
        if plain:
            plain_params(command)
        return command

    def run(plain: bool, value: str) -> tuple[str, Any]:
        args = ["--where", value]
        return _outcome(lambda: build(plain).main(args, "show", standalone_mode=False))

    cases = [str(tmp_path / "missing/"), str(tmp_path), str(tmp_path / "f.txt")]
    (tmp_path / "f.txt").write_text("x")
    for value in cases:
        assert run(True, value) == run(False, value), value
    kind, (error, message) = run(True, cases[0])
    assert (kind, error.__name__) == ("error", "BadParameter")
    assert message == f"file {cases[0]!r} does not exist."  # as typed, with its slash
    assert run(True, cases[2]) == ("value", (type(None), None))


def test_the_converter_is_built_only_for_values_it_must_convert(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    built: list[Any] = []
    import typer._coercion as coercion

    original = coercion.build_runtime_param

    def counting(descriptor: Any) -> Any:
        built.append(descriptor)
        return original(descriptor)

    monkeypatch.setattr("weakincentives.cli._plain_params.build_runtime_param", counting)
    result = CliRunner().invoke(app, ["eval", "report", str(tmp_path / "nothing-here")])
    assert result.exit_code == 2  # no such run: every value was converted first
    assert built == []
    power = CliRunner().invoke(app, ["stats", "power", "--baseline-rate", "0.7", "--effect", "0.1"])
    assert power.exit_code == 0, power.output
    assert built  # floats go to typer's converter
    assert os.environ.get("PYDANTIC_DISABLE_PLUGINS") is None  # typer put it back


def test_a_parameter_with_a_parser_keeps_typers_conversion() -> None:
    def shout(word: Annotated[str, typer.Option(parser=str.upper)]) -> None:
        typer.echo(word)

    demo = typer.Typer(add_completion=False)
    demo.command()(shout)
    command = typer.main.get_command(demo)
    plain_params(command)
    assert command.main(["--word", "hi"], "shout", standalone_mode=False) is None
    ctx = command.context_class(command, info_name="shout")
    param: Any = command.params[0]
    assert param.get_runtime_param().coerce("hi", param=param, ctx=ctx) == "HI"
