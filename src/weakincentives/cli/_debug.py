"""`wink debug TARGET`: browse runs, samples, A/B flips and bundles in a local web viewer.

TARGET is a run directory, a directory of runs (`runs/`) or one debug bundle (`.zip`).
The viewer listens on 127.0.0.1 (this machine only) unless `--host` says otherwise, on
a free port unless `--port` is given, prints its URL and opens it in a browser (unless
`--no-open`). It indexes the runs meanwhile: the page loads at once and shows the runs
once they are indexed (a run that cannot be read stops it with the error). Ctrl-C stops
it. It never changes a run; the one file it writes is the
cache of a run's index, `.viewer-cache.sqlite` in the run directory (best effort).
"""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Annotated

import typer

# `_host` is standard library only: these names load without the viewer (or numpy).
from weakincentives.debug import DEFAULT_HOST, host_warning
from weakincentives.errors import ViewerError

from ._console import error_console, fail

__all__ = ["debug_command", "register"]


def debug_command(
    target: Annotated[
        Path, typer.Argument(help="Run directory, directory of runs, or a debug bundle (.zip).")
    ],
    host: Annotated[
        str, typer.Option(help="Address to listen on; anything but loopback is shared.")
    ] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="Port to listen on (0 picks a free port).")] = 0,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Do not open a browser; just print the URL.")
    ] = False,
) -> None:
    """Browse runs, samples, A/B flips and debug bundles in a local web viewer."""
    from weakincentives.debug import ViewerServer

    err = error_console()
    warning = host_warning(host)
    if warning is not None:
        err.print(f"[yellow]{warning}[/]")
    if not 0 <= port <= 65535:
        fail(f"--port must be between 0 and 65535, not {port}")
    try:
        err.print(f"indexing {target} ...", markup=False)
        server = ViewerServer(target, host=host, port=port, log_level="warning")
        url = server.bind()
    except ViewerError as exc:
        fail(exc)
    # The URL goes to stdout (scripts read it); everything else to stderr.
    typer.echo(f"wink debug: serving {target} at {url}", err=False)
    err.print("press Ctrl-C to stop")
    try:
        if not no_open:
            webbrowser.open(url)
        server.serve_forever()
    except ViewerError as exc:  # the runs could not be read (the page says so too)
        fail(exc)
    finally:
        server.stop()


def register(app: typer.Typer) -> None:
    """Add `wink debug` to `app`."""
    app.command("debug")(debug_command)
