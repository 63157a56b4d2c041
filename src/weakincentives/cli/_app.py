"""The `wink` application: the typer app and its command groups.

Each command lives in its own module with a `register(app)` function: `_eval` (`wink
eval run`), `_report` (`wink eval report|compare`), `_list` (`wink eval list`), `_stats`
(`wink stats power`), `_query` (`wink query`), `_debug` (`wink debug`), `_worker` (`wink
worker`). The groups here name them without importing them (`_lazy_commands`): a command
imports its module when it runs, so `wink eval report` starts without what `wink eval
run` or `wink debug` need. `_console` prints errors the one way every command shares:
one line on stderr, never wrapped.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import typer

from ._lazy_commands import LazyGroup

__all__ = ["app"]


class _WinkCommands(LazyGroup):
    """`wink`: the command groups and commands, in the order `wink --help` lists them."""

    lazy_commands: ClassVar = {
        "query": "weakincentives.cli._query",
        "debug": "weakincentives.cli._debug",
        "worker": "weakincentives.cli._worker",
        "eval": None,  # `_EvalCommands`, below
        "stats": "weakincentives.cli._stats",
    }


class _EvalCommands(LazyGroup):
    """`wink eval`: its commands, in the order `wink eval --help` lists them."""

    lazy_commands: ClassVar = {
        "run": "weakincentives.cli._eval",
        "report": "weakincentives.cli._report",
        "compare": "weakincentives.cli._report",
        "list": "weakincentives.cli._list",
    }


app = typer.Typer(
    name="wink",
    cls=_WinkCommands,
    help="weakincentives: evaluate the agent you ship.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(
    typer.Typer(
        name="eval",
        cls=_EvalCommands,
        help="Run evaluations and read their results.",
        no_args_is_help=True,
    )
)


def _print_version(value: bool) -> None:
    if value:
        # The distribution's version (the root package sits above the CLI in the layers);
        # imported here: `importlib.metadata` costs every other command ~60 ms at start-up.
        import importlib.metadata

        typer.echo(f"wink (weakincentives) {importlib.metadata.version('weakincentives')}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """weakincentives: evaluate the agent you ship."""
