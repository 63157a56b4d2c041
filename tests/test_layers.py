"""DESIGN.md section 1: layers import only downwards, and `_private` modules stay private.

Every module under src/weakincentives is parsed with `ast`; imports under
`if TYPE_CHECKING:` are exempt (they never run).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "weakincentives"

LAYERS: dict[str, int] = {
    "_lazy": 1,  # the lazy re-export helper of package `__init__`s; imports nothing of ours
    "_ids": 1,  # batched random uuid4s (request and session ids); imports nothing of ours
    "_frozen": 1,  # `quick_init` of hot frozen dataclasses; imports nothing of ours
    "_redaction_values": 1,  # how `Redactor.finds_in` reads values (readers, numeric types)
    "_redaction_text": 1,  # the guard-word regex and span replacement of `redaction`
    "_redaction_reading": 1,  # the per-class readers of `Redactor.finds_in` (compiled lazily)
    "errors": 1,
    "clock": 1,
    "serde": 1,
    "experiment": 1,
    "redaction": 1,
    "prompt": 2,
    "adapters": 2,
    "runtime": 2,
    "evals": 3,
    "contrib": 4,
    "debug": 4,
    "cli": 4,
}
"""Top-level component of `weakincentives` -> its layer (DESIGN.md section 1)."""

ROOT_LAYER = 5
"""The `weakincentives` package itself re-exports from layer 2, so it sits above all."""


@dataclass(frozen=True, slots=True)
class Import:
    """One runtime import of a weakincentives module."""

    source: str
    """Module that imports."""
    target: str
    """Absolute name of the module (or package) imported from."""
    line: int
    """Line of the import statement."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def all_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def module_exists(name: str) -> bool:
    base = SRC.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under `if TYPE_CHECKING:` (its `else:` branch still runs)."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def _resolve_from(source: str, package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    # A package's own name is its anchor for `from . import x`; a module's is its parent.
    anchor = source.split(".")
    if not package:
        anchor = anchor[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, node.module] if node.module else anchor)


def imports_of(path: Path, *, type_only: bool = False) -> list[Import]:
    """Imports of weakincentives modules made by the module at `path`.

    Runtime imports only, unless `type_only` is set: then imports under `if TYPE_CHECKING:`
    count too (an import cycle is a cycle even when one side only imports for types).
    """
    source = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    nodes = list(ast.walk(tree)) if type_only else _runtime_nodes(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            found.extend(Import(source, alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(source, is_package(path), node)
            for alias in node.names:
                # `from pkg import sub` imports the submodule `pkg.sub` when it exists.
                sub = f"{base}.{alias.name}"
                target = sub if module_exists(sub) else base
                found.append(Import(source, target, node.lineno))
    return [i for i in found if i.target.split(".")[0] == "weakincentives"]


def layer_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return ROOT_LAYER
    if parts[1] not in LAYERS:
        pytest.fail(
            f"{module}: top-level component {parts[1]!r} has no layer; add it to LAYERS in "
            "tests/test_layers.py and to DESIGN.md section 1",
        )
    return LAYERS[parts[1]]


def private_owner(module: str) -> str | None:
    """The package that owns the first `_private` component of `module`, if any."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def layer_violations(imports: list[Import]) -> list[str]:
    return [
        f"{i.source}:{i.line} (layer {layer_of(i.source)}) imports {i.target} "
        f"(layer {layer_of(i.target)})"
        for i in imports
        if layer_of(i.target) > layer_of(i.source)
    ]


def privacy_violations(imports: list[Import]) -> list[str]:
    out = []
    for i in imports:
        owner = private_owner(i.target)
        if owner is None:
            continue
        if i.source != owner and not i.source.startswith(owner + "."):
            out.append(
                f"{i.source}:{i.line} imports private {i.target}; import it from {owner} instead",
            )
    return out


def import_graph(modules: list[Path]) -> dict[str, set[str]]:
    """Module -> the weakincentives modules it imports, type-only imports included.

    A package's `__init__` is the node its name stands for. Importing a submodule also runs
    its parents' `__init__`s, but that is Python's doing, not a dependency the module
    declares, so it is not an edge (the usual reading, as in import-linter).
    """
    graph: dict[str, set[str]] = {}
    for path in modules:
        source = module_name(path)
        targets = {i.target for i in imports_of(path, type_only=True)}
        graph[source] = {t for t in targets if t != source}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component of more than one module, sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


MODULES = all_modules()


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_layers_import_only_downwards(path: Path) -> None:
    assert layer_violations(imports_of(path)) == []


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_private_modules_are_not_imported_from_outside_their_package(path: Path) -> None:
    assert privacy_violations(imports_of(path)) == []


def test_no_import_cycles() -> None:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    assert import_cycles(import_graph(MODULES)) == []


EVALS_PARTS: dict[str, frozenset[str]] = {
    "_values": frozenset(),
    "_records": frozenset({"_values"}),  # and re-exports `_values`: other parts import both here
    "stats": frozenset(),
    "dataset": frozenset({"_records"}),
    "scoring": frozenset({"_records"}),
    "store": frozenset({"_records"}),
    "report": frozenset({"_records", "stats", "store"}),
    "runner": frozenset({"_records", "stats", "dataset", "scoring", "store", "report"}),
    "loop": frozenset({"_records", "stats", "dataset", "scoring", "store", "report", "runner"}),
    "analysis": frozenset({"report"}),  # the public `evals.analysis` path: re-exports only
}
"""Part of `weakincentives.evals` -> the other parts it may import (its package docstring)."""


def evals_part(module: str) -> str | None:
    """`dataset` for `weakincentives.evals.dataset._dataset`; None outside a part."""
    parts = module.split(".")
    if parts[:2] != ["weakincentives", "evals"] or len(parts) < 3:
        return None
    return parts[2]


def evals_boundary_violations(imports: list[Import]) -> list[str]:
    out = []
    for i in imports:
        source, target = evals_part(i.source), evals_part(i.target)
        if source is None:
            continue
        if source not in EVALS_PARTS:
            out.append(f"{i.source}: {source!r} is not in EVALS_PARTS (tests/test_layers.py)")
        elif i.target == "weakincentives.evals":
            out.append(f"{i.source}:{i.line} imports the whole of weakincentives.evals")
        elif target is not None and target != source and target not in EVALS_PARTS[source]:
            out.append(f"{i.source}:{i.line} ({source}) may not import {i.target} ({target})")
    return out


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_evals_parts_import_only_what_their_docstring_allows(path: Path) -> None:
    assert evals_boundary_violations(imports_of(path, type_only=True)) == []


def test_every_evals_part_says_what_it_may_import() -> None:
    on_disk = {p.name.removesuffix(".py") for p in (PACKAGE / "evals").iterdir()}
    on_disk -= {"__init__", "__pycache__"}
    assert on_disk == set(EVALS_PARTS)
    for part in EVALS_PARTS:
        init = PACKAGE / "evals" / part / "__init__.py"
        if init.is_file():
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert doc, f"evals/{part}/__init__.py needs a docstring"
            assert "may import" in " ".join(doc.split()), f"evals/{part}: say what it may import"


MAX_MODULE_LINES = 600
"""STYLE.md: aim under 500 lines; past this a module must be split."""


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_modules_stay_readable_in_one_sitting(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{module_name(path)} has {lines} lines: split it"


def test_every_package_is_walked() -> None:
    names = {module_name(p) for p in MODULES}
    assert {"weakincentives.errors", "weakincentives.prompt._template"} <= names


# -- the checker itself: each rule must be able to fail -----------------------------------


def _write(tmp: Path, rel: str, text: str) -> Path:
    path = tmp / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def fake_src(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    for rel in (
        "weakincentives/__init__.py",
        "weakincentives/errors.py",
        "weakincentives/prompt/__init__.py",
        "weakincentives/prompt/_template.py",
        "weakincentives/runtime/__init__.py",
        "weakincentives/evals/__init__.py",
    ):
        _write(tmp_path, rel, "")
    return tmp_path


@pytest.mark.parametrize(
    ("rel", "text", "expected"),
    [
        ("weakincentives/errors.py", "from weakincentives.prompt import x\n", 1),
        ("weakincentives/errors.py", "import weakincentives.evals\n", 1),
        ("weakincentives/errors.py", "def f():\n    from weakincentives import evals\n", 1),
        ("weakincentives/errors.py", "from weakincentives import Session\n", 1),
        ("weakincentives/runtime/x.py", "from weakincentives.evals import y\n", 1),
        ("weakincentives/runtime/x.py", "from weakincentives.prompt import y\n", 0),
        ("weakincentives/runtime/x.py", "from weakincentives import errors\n", 0),
        ("weakincentives/evals/x.py", "from ..prompt import y\n", 0),
        ("weakincentives/errors.py", "from typing import TYPE_CHECKING\nimport json\n", 0),
        (
            "weakincentives/errors.py",
            "if TYPE_CHECKING:\n    from weakincentives.evals import y\n",
            0,
        ),
        (
            "weakincentives/errors.py",
            "if typing.TYPE_CHECKING:\n    pass\nelse:\n    from weakincentives.evals import y\n",
            1,
        ),
    ],
)
def test_layer_checker_flags_upward_imports(
    fake_src: Path, rel: str, text: str, expected: int
) -> None:
    assert len(layer_violations(imports_of(_write(fake_src, rel, text)))) == expected


@pytest.mark.parametrize(
    ("rel", "text", "expected"),
    [
        ("weakincentives/runtime/x.py", "from weakincentives.prompt._template import y\n", 1),
        ("weakincentives/runtime/x.py", "from weakincentives.prompt import _template\n", 1),
        ("weakincentives/prompt/x.py", "from weakincentives.prompt._template import y\n", 0),
        ("weakincentives/prompt/x.py", "from ._template import y\n", 0),
        ("weakincentives/prompt/__init__.py", "from ._template import y\n", 0),
        ("weakincentives/prompt/sub/x.py", "from .._template import y\n", 0),
    ],
)
def test_privacy_checker_flags_foreign_private_imports(
    fake_src: Path, rel: str, text: str, expected: int
) -> None:
    assert len(privacy_violations(imports_of(_write(fake_src, rel, text)))) == expected


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"a.py": "from . import b\n", "b.py": "import json\n"}, []),
        (
            {"a.py": "from . import b\n", "b.py": "from .a import x\n"},
            [["weakincentives.runtime.a", "weakincentives.runtime.b"]],
        ),
        (
            {
                "a.py": "from .b import x\n",
                "b.py": (
                    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import y\n"
                ),
                "c.py": "from weakincentives.runtime.a import z\n",
            },
            [["weakincentives.runtime.a", "weakincentives.runtime.b", "weakincentives.runtime.c"]],
        ),
    ],
)
def test_cycle_checker_finds_a_planted_cycle(
    fake_src: Path, files: dict[str, str], expected: list[list[str]]
) -> None:
    paths = [
        _write(fake_src, f"weakincentives/runtime/{name}", text) for name, text in files.items()
    ]
    assert import_cycles(import_graph(paths)) == expected


@pytest.mark.parametrize(
    ("rel", "text", "expected"),
    [
        ("weakincentives/evals/store/x.py", "from ..scoring import y\n", 1),
        ("weakincentives/evals/store/x.py", "from .._records import y\n", 0),
        ("weakincentives/evals/runner/x.py", "from ..scoring import y\n", 0),
        ("weakincentives/evals/report/x.py", "from weakincentives.evals import y\n", 1),
        ("weakincentives/evals/scoring/x.py", "from weakincentives.evals.runner import y\n", 1),
        ("weakincentives/evals/newpart/x.py", "import json\n", 0),
    ],
)
def test_evals_boundary_checker_flags_forbidden_imports(
    fake_src: Path, rel: str, text: str, expected: int
) -> None:
    assert (
        len(evals_boundary_violations(imports_of(_write(fake_src, rel, text), type_only=True)))
        == expected
    )


def test_unknown_top_level_component_must_be_assigned_a_layer() -> None:
    with pytest.raises(pytest.fail.Exception, match="has no layer"):
        layer_of("weakincentives.newthing")
