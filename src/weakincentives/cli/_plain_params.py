"""Command-line text and paths taken as typer takes them, without importing pydantic.

typer (0.2x) converts every parameter value through a pydantic `TypeAdapter`, built for
each parameter when a command runs: importing pydantic and building the adapters is
about 0.15 s of CPU, a quarter of `wink eval report` on 10,000 results. For the two
kinds of parameter that most commands have, the conversion is known and needs no
pydantic:

- `str`: typer's adapter returns a `str` value as it is;
- `pathlib.Path`: typer's adapter turns a `str` into `Path(value)` (what pydantic's
  path validation does) and then runs typer's own checks (`coerce_cli_path`: `exists`,
  `file_okay`, `readable`...), which are called here the same way.

`plain_params(command)` gives every parameter of a command (its `--help` too) a
converter that does exactly that for those values, returns None for a missing value as
typer does (typer builds its adapter even then), and hands every other case (another
type, a `parser=`, a value that is not a `str` or `Path`, a check that fails, so that
the message is typer's own) to typer's converter, built as typer builds it. This uses typer's
coercion internals (`RuntimeParam`, `build_runtime_param`, `coerce_cli_path`, a
parameter's `type_descriptor` and `_runtime_param`): with a typer that lacks them,
`plain_params` changes nothing. `tests/cli/test_cli_plain_params.py` checks that every
converted parameter gives what typer's own converter gives.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["plain_params"]

try:
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:  # pragma: no cover  # a typer without these: its own coercion throughout
    _AVAILABLE = False
else:
    _AVAILABLE = True

    @dataclass(frozen=True)
    class _PlainParam(RuntimeParam):
        """typer's conversion of one parameter, built only for values it must convert.

        typer returns None (or `()`) for a missing value without converting it; a `str`
        value of a `str` parameter and a `str` or `Path` value of a `Path` parameter are
        converted here as typer converts them; anything else goes to typer's converter.
        """

        descriptor: Any
        """The parameter's typer type descriptor (for typer's own converter)."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            plain = self.parameter_info.parser is None and self.descriptor.file_annotation is None
            if plain and self.annotation is str and type(value) is str:
                return value
            if plain and self._plain_path and isinstance(value, str | Path):
                path = value if isinstance(value, Path) else Path(value)
                try:
                    return coerce_cli_path(
                        path, self.parameter_info, path_type=Path, param=param, ctx=ctx
                    )
                except Exception:  # a failed check: typer's converter gives its own message
                    return self._typer.coerce(value, param=param, ctx=ctx)
            return self._typer.coerce(value, param=param, ctx=ctx)

        @property
        def _plain_path(self) -> bool:
            return self.annotation is Path and self.parameter_info.path_type is None

        @functools.cached_property
        def _typer(self) -> Any:
            return build_runtime_param(self.descriptor)


def plain_params(command: Any) -> None:
    """Give the parameters of `command` (and of its subcommands) the converter above.

    Parameters whose converter typer has already built are left as they are, and so is
    everything with a typer without the internals this relies on.
    """
    if not _AVAILABLE:  # pragma: no cover
        return
    for param in getattr(command, "params", ()):
        _plain(param)
    # The `--help` option is made when the command is parsed (and then kept): typer
    # converts its value too, None when it is not given.
    made = getattr(command, "get_help_option", None)
    if made is not None:

        def get_help_option(ctx: Any) -> Any:
            option = made(ctx)
            if option is not None:
                _plain(option)
            return option

        command.get_help_option = get_help_option
    subcommands = getattr(command, "commands", None)
    if isinstance(subcommands, dict):
        for sub in subcommands.values():
            plain_params(sub)


def _plain(param: Any) -> None:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or getattr(param, "_runtime_param", True) is not None:
        return
    param._runtime_param = _PlainParam(
        parameter_info=descriptor.parameter_info,
        annotation=descriptor.annotation,
        descriptor=descriptor,
    )
