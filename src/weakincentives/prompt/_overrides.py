"""Prompt overrides: replace section bodies per tag, from JSON files on disk."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from weakincentives import serde
from weakincentives.errors import OverridesError, SerdeError

__all__ = [
    "LocalPromptOverridesStore",
    "PromptOverridesStore",
    "SectionOverride",
    "StaleOverrideWarning",
    "section_hash",
    "validate_identifier",
]

_TAG_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_NS_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}(/[a-z0-9][a-z0-9._-]{0,63})*$")


class StaleOverrideWarning(UserWarning):
    """An override was ignored because its section changed since it was written."""


@dataclass(frozen=True, slots=True)
class SectionOverride:
    """A replacement body for one section."""

    body: str
    """The new section template (may use the same `$placeholders`)."""
    expected_hash: str
    """sha256 of the original section text the override was written against."""


@dataclass(frozen=True, slots=True)
class _OverridesFile:
    version: int
    sections: dict[str, SectionOverride] = field(default_factory=dict)


class PromptOverridesStore(Protocol):
    """Where prompt overrides come from."""

    def resolve(self, ns: str, key: str, tag: str) -> Mapping[str, SectionOverride]:
        """Return the overrides for prompt `ns/key` under `tag` (empty when none)."""
        ...


def section_hash(text: str) -> str:
    """Return the sha256 hex digest an override records for a section's original text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def validate_identifier(kind: str, value: str) -> str:
    """Check an overrides tag, key or namespace; return it unchanged.

    Raises:
        OverridesError: when `value` could escape the store's directory or is malformed.
    """
    pattern = _NS_RE if kind == "namespace" else _TAG_RE
    # fullmatch, not match: `$` would accept a trailing newline ("latest\n").
    if not pattern.fullmatch(value):
        raise OverridesError(
            f"invalid overrides {kind} {value!r}: use lowercase letters, digits, '.', '_' "
            "and '-' (namespaces may also use '/'), starting with a letter or digit",
        )
    return value


class LocalPromptOverridesStore:
    """Overrides in `<root>/<ns>/<key>/<tag>.json`.

    The file holds `{"version": 1, "sections": {"<section key>": {"body": ...,
    "expected_hash": ...}}}`. A missing file means no overrides.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path_for(self, ns: str, key: str, tag: str) -> Path:
        """Return the file that holds `tag`'s overrides for prompt `ns/key`."""
        validate_identifier("namespace", ns)
        validate_identifier("key", key)
        validate_identifier("tag", tag)
        return self.root / ns / key / f"{tag}.json"

    def tags(self) -> frozenset[str]:
        """Every tag some prompt has overrides under (the names of the `<tag>.json` files).

        Runners check an experiment's `overrides_tag` against it before any sample runs,
        so a misspelled tag is an error instead of a silent baseline.
        """
        if not self.root.is_dir():
            return frozenset()
        return frozenset(path.stem for path in self.root.rglob("*.json"))

    def resolve(self, ns: str, key: str, tag: str) -> Mapping[str, SectionOverride]:
        """Read the overrides file for `ns/key/tag`.

        Raises:
            OverridesError: naming the file (and line for bad JSON) when it cannot be used.
        """
        path = self.path_for(ns, key, tag)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise OverridesError(f"{path}: cannot read overrides file: {exc}") from exc
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OverridesError(
                f"{path}:{exc.lineno}:{exc.colno}: invalid JSON in overrides file: {exc.msg}",
            ) from exc
        try:
            parsed: _OverridesFile = serde.load(_OverridesFile, raw)
        except SerdeError as exc:
            raise OverridesError(f"{path}: invalid overrides file: {exc}") from exc
        if parsed.version != 1:
            raise OverridesError(f"{path}: unsupported overrides version {parsed.version}")
        return parsed.sections

    def store(
        self, ns: str, key: str, tag: str, *, section_key: str, original: str, body: str
    ) -> Path:
        """Write (or update) one section override, recording the original text's hash."""
        path = self.path_for(ns, key, tag)
        current = dict(self.resolve(ns, key, tag))
        current[section_key] = SectionOverride(body=body, expected_hash=section_hash(original))
        path.parent.mkdir(parents=True, exist_ok=True)
        data = serde.dumps(_OverridesFile(version=1, sections=current))
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        Path(tmp).replace(path)
        return path
