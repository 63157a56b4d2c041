"""The `wink` command line.

Each command group lives in its own module with a `register(app)` function:
`_eval` (`wink eval run|report|compare`), `_stats` (`wink stats power`), `_query`
(`wink query`), `_debug` (`wink debug`), `_worker` (`wink worker`). `_console` prints
errors the one way every command shares: one line on stderr, never wrapped.
"""

from __future__ import annotations

import typer

from weakincentives.cli import _console, _debug, _eval, _query, _stats, _worker

__all__ = ["app", "main"]

app = typer.Typer(
    name="wink",
    cls=_console.WinkGroup,
    help="weakincentives: evaluate the agent you ship.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _module in (_eval, _stats, _query, _debug, _worker):
    _module.register(app)


def main() -> None:
    """Entry point of the `wink` console script."""
    app()
