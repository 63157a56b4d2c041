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
    "errors": 1,
    "clock": 1,
    "serde": 1,
    "experiment": 1,
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


def imports_of(path: Path) -> list[Import]:
    """Runtime imports of weakincentives modules made by the module at `path`."""
    source = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    for node in _runtime_nodes(tree):
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


MODULES = all_modules()


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_layers_import_only_downwards(path: Path) -> None:
    assert layer_violations(imports_of(path)) == []


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_private_modules_are_not_imported_from_outside_their_package(path: Path) -> None:
    assert privacy_violations(imports_of(path)) == []


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


def test_unknown_top_level_component_must_be_assigned_a_layer() -> None:
    with pytest.raises(pytest.fail.Exception, match="has no layer"):
        layer_of("weakincentives.newthing")
