"""Extract the code blocks of the spec documents and run one as its table entry says.

The spec lives beside the repository, at `<repo>/../shared/spec` (`WINK_SPEC_DIR`
overrides it). A missing spec is an error, never a skip: the suite exists to prove the
spec's code runs.

Every fenced block of every `*.md` document is extracted. A block is *Python* when its
language is `python` (tagged `nocheck` or not) or when it is tagged `text` but holds
Python (`guide-evals.md` writes two Python examples under `text`); the others (Mermaid
diagrams, shell commands, JSONL data, an ASCII drawing) are accounted for in the table
too, so a new block of any kind fails the suite until it is handled.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[2]
"""The repository root."""

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


class SpecMissingError(RuntimeError):
    """The spec directory is not where the suite looks for it."""


def spec_dir() -> Path:
    """The spec directory: `$WINK_SPEC_DIR`, else `<repo>/../shared/spec`.

    Raises:
        SpecMissingError: the directory does not exist or holds no documents.
    """
    configured = os.environ.get("WINK_SPEC_DIR")
    path = Path(configured) if configured else ROOT.parent / "shared" / "spec"
    if not path.is_dir() or not any(path.glob("*.md")):
        raise SpecMissingError(
            f"the spec documents were not found at {path}: check out `shared/` beside the "
            f"repository (or set WINK_SPEC_DIR); the spec suite does not skip"
        )
    return path


@dataclass(frozen=True, slots=True)
class SpecBlock:
    """One fenced code block of a spec document."""

    doc: str
    """Document file name (`EVALS.md`)."""
    n: int
    """Position of the block among the document's fenced blocks (1-based)."""
    line: int
    """Line of the block's first code line in the document (1-based)."""
    info: str
    """The fence's info string (`python nocheck`)."""
    code: str
    """The block's text."""

    @property
    def language(self) -> str:
        """First word of the info string ('' when there is none)."""
        words = self.info.split()
        return words[0] if words else ""

    @property
    def sha(self) -> str:
        """First 12 hex digits of the SHA-256 of the code: a changed block is a new block."""
        return hashlib.sha256(self.code.encode()).hexdigest()[:12]

    @property
    def is_python(self) -> bool:
        """Whether the block holds Python (see the module docstring)."""
        if self.language == "python":
            return True
        if self.language != "text":
            return False
        try:
            ast.parse(self.code)
        except SyntaxError:
            return False
        return True

    @property
    def key(self) -> str:
        """`doc#n`, the block's name in the table and in test ids."""
        return f"{self.doc}#{self.n}"


def extract_blocks(text: str, doc: str) -> list[SpecBlock]:
    """Every fenced block of a document, in order."""
    return [
        SpecBlock(
            doc=doc,
            n=i,
            line=text.count("\n", 0, m.start("code")) + 1,
            info=m["info"].strip(),
            code=m["code"],
        )
        for i, m in enumerate(_FENCE.finditer(text), 1)
    ]


def all_blocks(directory: Path | None = None) -> list[SpecBlock]:
    """Every fenced block of every document of the spec, documents in name order."""
    directory = directory or spec_dir()
    blocks: list[SpecBlock] = []
    for path in sorted(directory.glob("*.md")):
        blocks.extend(extract_blocks(path.read_text(encoding="utf-8"), path.name))
    return blocks


# -- how a block is handled -------------------------------------------------------------------

Kind = Literal["as written", "with context", "adapted", "not python"]
"""How a block runs:

- `as written`: the block's code, unchanged, in a fresh namespace;
- `with context`: unchanged code; names the block uses but does not define come from
  earlier blocks of the same document (`after`) and from declared stand-ins (`setup`);
- `adapted`: declared textual edits (`edits`), each of which must match exactly once;
- `not python`: a diagram, shell commands or data; `check` (if any) still tests it.
"""


@dataclass(frozen=True, slots=True)
class Handling:
    """How the suite runs one spec block, and why."""

    key: str
    """`doc#n` of the block."""
    sha: str
    """`SpecBlock.sha` of the block as handled: a changed block fails until re-handled."""
    kind: Kind
    """See `Kind`."""
    why: str = ""
    """Why the block is not run as written (or what it is, when not Python)."""
    setup: Callable[[Env], dict[str, Any]] | None = None
    """Stand-ins for names the block uses without defining them."""
    after: tuple[int, ...] = ()
    """Earlier blocks of the same document run first, in the same namespace."""
    edits: tuple[tuple[str, str], ...] = ()
    """`(old, new)` replacements applied to the code; each `old` occurs exactly once."""
    check: Callable[[Env, dict[str, Any]], None] | None = None
    """Assertions on the namespace after the block ran (what the block promises)."""
    as_function: bool = False
    """Run the code as the body of a function (for a block that `return`s at top level)."""


@dataclass
class Env:
    """What a running block may use: a temp directory (also the cwd) and the stand-ins."""

    tmp: Path
    """A fresh directory, the current directory while the block runs."""
    closers: list[Callable[[], object]] = field(default_factory=list)
    """Called after the block (stop threads, close mailboxes), last first."""
    stdout: Callable[[], str] = lambda: ""
    """What the block printed so far."""


def apply_edits(block: SpecBlock, edits: tuple[tuple[str, str], ...]) -> str:
    """The block's code with each declared edit applied (each must match exactly once)."""
    code = block.code
    for old, new in edits:
        count = code.count(old)
        if count != 1:
            raise AssertionError(
                f"{block.key}: the declared edit {old!r} matches {count} times (expected "
                f"once): the block changed; update tests/spec/adaptations.py"
            )
        code = code.replace(old, new)
    return code


@contextmanager
def block_module(block: SpecBlock) -> Iterator[types.ModuleType]:
    """A real module for the block (dataclasses and pydantic resolve its names there)."""
    name = "spec_block_" + re.sub(r"\W", "_", block.key)
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        yield module
    finally:
        sys.modules.pop(name, None)


def run_code(
    block: SpecBlock, code: str, namespace: dict[str, Any], *, as_function: bool = False
) -> None:
    """Execute `code` (the block's, maybe edited) so tracebacks name the document's lines."""
    if as_function:
        body = "".join(f"    {line}" if line.strip() else line for line in code.splitlines(True))
        code = f"def _spec_block() -> None:\n{body}_spec_block()\n"
        source = "\n" * (block.line - 2) + code
    else:
        source = "\n" * (block.line - 1) + code
    exec(compile(source, f"spec/{block.doc}", "exec"), namespace)
