"""The `wink` application: the typer app and its command groups.

Each command group lives in its own module with a `register(app)` function:
`_eval` (`wink eval run|report|compare|list`), `_stats` (`wink stats power`), `_query`
(`wink query`), `_debug` (`wink debug`), `_worker` (`wink worker`). `_console` prints
errors the one way every command shares: one line on stderr, never wrapped.
"""

from __future__ import annotations

from typing import Annotated

import typer

from weakincentives.cli import _console, _debug, _eval, _query, _stats, _worker

__all__ = ["app"]

app = typer.Typer(
    name="wink",
    cls=_console.WinkGroup,
    help="weakincentives: evaluate the agent you ship.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
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


for _module in (_eval, _stats, _query, _debug, _worker):
    _module.register(app)
