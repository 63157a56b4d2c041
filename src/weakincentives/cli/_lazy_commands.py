"""Command groups whose commands are imported when they are first used.

`wink eval report` should not pay for importing what `wink eval run`, `wink debug` or
`wink worker` need (the runner, the viewer, the targets' loaders): most of a short
command's time is start-up. A `LazyGroup` names each command and the module that
defines it (a module with `register(app)`, as every command module has); the module is
imported when the command is looked up: to run it, to print its help, or to list it in
the group's `--help` (which so looks up every command and prints the same as an eagerly
built group).

A module that cannot be imported (a missing optional dependency, a broken install) does
not take the other commands down: its commands are listed as unavailable, with the
reason, and running one prints `error: ...` on one line and exits 2, without a
traceback. A Ctrl-C while a command's module is imported ends as one during start-up.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, ClassVar

import typer

from ._console import EXIT_INTERRUPTED, STARTING, WinkGroup, fail
from ._plain_params import plain_params

__all__ = ["LazyGroup"]


class LazyGroup(WinkGroup):
    """A `WinkGroup` whose commands in `lazy_commands` load on first look-up.

    Subclasses set `lazy_commands`: command name -> the module whose `register(app)`
    adds it to a typer app, in the order `--help` lists them; None for a command typer
    built with the group (it keeps its place in the list; commands not named at all come
    first). A module may add several of the commands (all are kept when it is imported
    once).
    """

    lazy_commands: ClassVar[Mapping[str, str | None]] = {}

    def __init__(self, **kwargs: Any) -> None:
        """Build the group as typer does; wrap its commands so the lazy ones load late."""
        super().__init__(**kwargs)
        plain_params(self)
        self.commands = _LazyCommands(self.commands, self.lazy_commands)

    def list_commands(self, ctx: Any) -> list[str]:
        """Every command name, in order, without importing any command's module."""
        return list(self.commands)


class _LazyCommands(MutableMapping[str, Any]):
    """A group's commands: the eager ones, and names whose module is imported on access.

    Iterating (names, `len`, `in`) imports nothing; reading a command imports its module.
    """

    def __init__(self, eager: Mapping[str, Any], lazy: Mapping[str, str | None]) -> None:
        self._commands: dict[str, Any] = dict(eager)
        self._pending: dict[str, str] = {
            name: module for name, module in lazy.items() if module and name not in eager
        }
        listed = [name for name, module in lazy.items() if name in eager or module]
        self._order: list[str] = [*(name for name in eager if name not in lazy), *listed]

    def __getitem__(self, name: str) -> Any:
        if name not in self._commands and name in self._pending:
            self._load(self._pending[name])
        return self._commands[name]

    def __setitem__(self, name: str, command: Any) -> None:
        if name not in self._order:
            self._order.append(name)
        self._pending.pop(name, None)
        self._commands[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self._order:
            raise KeyError(name)
        self._order.remove(name)
        self._pending.pop(name, None)
        self._commands.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._order

    def _load(self, module_name: str) -> None:
        """Import `module_name` and keep the commands it registers that this group names."""
        names = [name for name, module in self._pending.items() if module == module_name]
        try:
            module = importlib.import_module(module_name)
            staging = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
            module.register(staging)
            built = dict(typer.main.get_group(staging).commands)
            for command in built.values():
                plain_params(command)
        except KeyboardInterrupt:
            # Nothing has run yet: as a Ctrl-C while `wink` imports its own modules.
            sys.stderr.write(f"interrupted: {STARTING}\n")
            sys.stderr.flush()
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:  # any failure: reported, never a traceback
            reason = f"cannot import {module_name}: {type(exc).__name__}: {exc}"
            built = {name: _unavailable(name, reason) for name in names}
        for name in names:
            self._pending.pop(name)
            self._commands[name] = built.get(name) or _unavailable(
                name, f"{module_name} does not define the command {name!r}"
            )


def _unavailable(name: str, reason: str) -> Any:
    """A command that says why it cannot run, and exits 2 (whatever its arguments)."""
    staging = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @staging.command(
        name,
        help=f"Unavailable: {reason}.",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
    def unavailable(ctx: typer.Context) -> None:
        fail(f"{ctx.command_path} is unavailable: {reason}")

    return typer.main.get_group(staging).commands[name]
