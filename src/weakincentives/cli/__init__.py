"""The `wink` command line.

Each command lives in its own module with a `register(app)` function: `_eval` (`wink
eval run`), `_report` (`wink eval report|compare`), `_list` (`wink eval list`), `_stats`
(`wink stats power`), `_query` (`wink query`), `_debug` (`wink debug`), `_worker` (`wink
worker`). `_console` prints errors the one way every command shares: one line on
stderr, never wrapped. `_app` assembles them into `app`, the typer application, which
imports a command's module only when that command is used (`_lazy_commands`).

This module stays light on purpose: the console script imports it before anything else,
and `main()` imports the application itself, so that a Ctrl-C during start-up (most of
the first second goes to imports) ends like any other interrupt, with one line on
stderr and exit 130, instead of a traceback from inside an import.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from weakincentives.cli._app import app

__all__ = ["app", "main"]

_EXIT_INTERRUPTED = 130  # `_console.EXIT_INTERRUPTED`; that module imports typer
_STARTING = "interrupted: wink was starting; nothing was done.\n"  # `_console.STARTING`


def main() -> None:
    """Entry point of the `wink` console script."""
    try:
        from weakincentives.cli._app import app

        # Once a command runs, click turns a Ctrl-C into its own exit (130, one line);
        # an interrupt that gets here came while typer was still building the commands.
        app()
    except KeyboardInterrupt:
        sys.stderr.write(_STARTING)
        sys.stderr.flush()
        raise SystemExit(_EXIT_INTERRUPTED) from None


def __getattr__(name: str) -> Any:
    if name == "app":
        from weakincentives.cli._app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
