"""How `wink` reports errors: one line on stderr, never wrapped, never a traceback.

Every command prints its errors through `error_console()` / `fail()`: a console that
does not wrap (`soft_wrap=True`), so a message holding a long path reads the same at
any terminal width and when piped (tests compare it byte for byte), and that prints
the message as text, not as rich markup (a `[` in a path is a `[`). `WinkGroup` does
the same for the command line's own usage errors (a bad option value), which typer
would otherwise draw in a box as wide as the terminal.

The exit codes every command shares are named here (see the README's table).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EXIT_BELOW_THRESHOLD",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "INTERRUPTED",
    "STARTING",
    "WinkGroup",
    "error_console",
    "fail",
    "interrupts_as_keyboard_interrupt",
    "print_error",
]

EXIT_BELOW_THRESHOLD = 1
"""A pass rate is below `--fail-under` (or a worker's loop failed)."""
EXIT_USAGE = 2
"""A usage or configuration error: bad option, target, dataset or run."""
EXIT_INCOMPLETE = 3
"""The run ended without every result: a run timeout, lost requests, a fail-fast stop,
an empty dataset."""
EXIT_INTERRUPTED = 130
"""Interrupted by Ctrl-C (SIGINT)."""
EXIT_TERMINATED = 143
"""Stopped by SIGTERM."""

INTERRUPTED = "stopped before the command finished."
"""What a Ctrl-C that a command does not handle itself prints (after `interrupted:`)."""
STARTING = "wink was starting; nothing was done."
"""What a Ctrl-C before any command ran prints (after `interrupted:`), also while a
command's module is imported (`weakincentives.cli.main` has its own copy: it prints it
before this module is imported)."""


def error_console() -> Console:
    """A stderr console that never wraps and never reads markup from printed values."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True, highlight=False)


def print_error(error: object, *, label: str = "error", style: str = "bold red") -> None:
    """Print `label: error` on one line of stderr (the message is not markup)."""
    from rich.text import Text

    error_console().print(Text.assemble((f"{label}:", style), " ", str(error)))


def fail(error: object, code: int = EXIT_USAGE) -> NoReturn:
    """Print `error: <error>` on stderr and exit with `code` (2 by default)."""
    print_error(error)
    raise typer.Exit(code)


@contextmanager
def interrupts_as_keyboard_interrupt() -> Iterator[list[int]]:
    """Handle SIGTERM like Ctrl-C inside the block; yield the signals received.

    SIGTERM goes where SIGINT would: to the handler in place when it arrives (under
    `run_eval`, asyncio's, which cancels the run so that it is recorded as interrupted
    and raises `KeyboardInterrupt` once it is), else as a `KeyboardInterrupt` raised
    right there. The caller tells the two apart by the yielded list (`signal.SIGTERM`
    in it: exit 143, not 130). Off the main thread (signals cannot be handled there)
    nothing changes.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        on_sigint = signal.getsignal(signal.SIGINT)
        if callable(on_sigint) and on_sigint is not signal.default_int_handler:
            on_sigint(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


class WinkGroup(TyperGroup):
    """The `wink` command group: usage errors as two plain lines, not a boxed panel.

    typer draws a usage error (an unknown option, a value out of range) in a rich panel
    as wide as the terminal, so piped output is cut at 80 columns. This prints
    `error: <message>` and the help hint instead, each on one line. A Ctrl-C that a
    command does not handle itself (typer would exit 130 without a word) is one line too.
    """

    def invoke(self, ctx: Any) -> Any:
        """Run the command; an unhandled Ctrl-C is one line and exit 130."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            print_error(INTERRUPTED, label="interrupted", style="yellow")
            raise typer.Exit(EXIT_INTERRUPTED) from None

    def main(  # type: ignore[override]  # click's overloads; same parameters
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; in standalone mode, exit with the command's code."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except _CLICK_ERROR as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":
                exc.show()  # prints the help
            else:
                _show_usage_error(exc)
            sys.exit(exc.exit_code)
        except RuntimeError as exc:
            if type(exc).__name__ != "Abort":  # click's Abort (EOF at a prompt)
                raise
            print_error("aborted", label="interrupted", style="yellow")
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(code if isinstance(code, int) else 0)


# typer ships its own copy of click (`typer._click`) in recent versions and imports the
# `click` package in older ones: take the base of usage errors from what typer raises.
_CLICK_ERROR: type[Any] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)


def _show_usage_error(exc: Any) -> None:
    print_error(exc.format_message())
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        hint = f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help."
        error_console().print(hint, markup=False)
