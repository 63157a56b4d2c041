"""The `wink` reference page, generated from the command definitions (never hand-copied).

`make docs` calls `reference_markdown()` from a MkDocs hook (`docs/hooks.py`) to fill
`docs/reference/cli.md`; `tests/cli/test_reference.py` checks that every command and option
of the live `wink` app is on the page. Typer builds click commands; they are read by their
attributes (`commands`, `params`, `opts`) so the code does not depend on which click
package typer was built with.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer

__all__ = ["CommandDoc", "commands", "reference_markdown"]


@dataclass(frozen=True, slots=True)
class CommandDoc:
    """One `wink` command as the reference shows it."""

    path: str
    """The words that run it, `"wink eval run"`."""
    command: Any
    """The click command typer built."""
    context: Any
    """A click context for it (usage lines need one)."""

    @property
    def options(self) -> list[str]:
        """Every option spelling (`--dataset`, `--no-cache`) and argument name (`TARGET`)."""
        out: list[str] = []
        for param in self.command.params:
            if param.hidden:
                continue
            if param.param_type_name == "argument":
                out.append(param.display_name_raw)
            else:
                out.extend([*param.opts, *param.secondary_opts])
        return out


def commands(app: typer.Typer | None = None) -> Iterator[CommandDoc]:
    """Every command of `app` (default: the `wink` app), groups before their members."""
    if app is None:
        from weakincentives.cli import app as wink_app

        app = wink_app
    root = typer.main.get_command(app)
    yield from _walk(root, "wink", root.context_class(root, info_name="wink"))


def _walk(command: Any, path: str, context: Any) -> Iterator[CommandDoc]:
    yield CommandDoc(path=path, command=command, context=context)
    subcommands = getattr(command, "commands", None)
    if not subcommands:
        return
    for name in sorted(subcommands):
        sub = subcommands[name]
        yield from _walk(
            sub, f"{path} {name}", sub.context_class(sub, info_name=name, parent=context)
        )


def reference_markdown(app: typer.Typer | None = None) -> str:
    """The whole reference page body: one section per command, with a table of options."""
    parts: list[str] = []
    for doc in commands(app):
        level = "#" * min(doc.path.count(" ") + 1, 4)
        parts.append(f"#{level} `{doc.path}`\n")
        help_text = (doc.command.help or "").strip()
        if help_text:
            parts.append(_clean(help_text) + "\n")
        usage = doc.command.get_usage(doc.context).strip()
        parts.append(f"```text\n{usage}\n```\n")
        rows = [_row(param, doc.context) for param in doc.command.params if not param.hidden]
        if rows:
            parts.append("| option | what it does |")
            parts.append("| --- | --- |")
            parts.extend(rows)
            parts.append("")
        subcommands = getattr(doc.command, "commands", None)
        if subcommands:
            listed = ", ".join(f"`{doc.path} {name}`" for name in sorted(subcommands))
            parts.append(f"Commands: {listed}.\n")
    return "\n".join(parts)


def _row(param: Any, context: Any) -> str:
    # click's own help record: the spelling with its value ("--dataset <path>") and the
    # help text with "[default: ...]" / "[required]", exactly as `--help` prints them.
    names, help_text = param.get_help_record(context)
    return f"| `{_cell(names)}` | {_cell(_escape(_clean(help_text)))} |"


def _clean(text: str) -> str:
    # Typer help may carry rich markup ([bold]...[/bold]); the page wants plain text.
    return " ".join(text.replace("[bold]", "").replace("[/bold]", "").split())


def _escape(text: str) -> str:
    # Outside code, "[:TAG][,FLAG=VALUE]" would read as a Markdown reference link.
    return text.replace("[", "\\[").replace("]", "\\]")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
