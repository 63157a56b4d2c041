"""MkDocs hooks: fill the CLI reference from the `wink` command definitions."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Replace the marker on the CLI reference page with the generated reference."""
    if MARKER not in markdown:
        return markdown
    from weakincentives.cli._reference import reference_markdown

    return markdown.replace(MARKER, reference_markdown())
