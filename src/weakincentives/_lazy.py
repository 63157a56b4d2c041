"""Lazy re-exports for package `__init__`s: a name's module is imported on first use.

A package that re-exports a hundred names would otherwise import every module behind them
when any one is asked for: `import weakincentives.evals` loaded the judge, the mailbox
workers, the statistics and the bundle writer before a run could start. With
`lazy_exports`, `from weakincentives.evals import run_eval` imports the runner and what it
needs, nothing else (PEP 562 module `__getattr__`).

Type checkers read the same names from the package's `if TYPE_CHECKING:` imports; a test
(`tests/test_lazy_imports.py`) checks that those and the table given here agree.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, resolving names from `exports`.

    Args:
        package: The package's `__name__`.
        exports: Module (absolute name) -> the names re-exported from it. A name equal to
            the last part of its module's name and not defined in it stands for the
            module itself (`{"weakincentives.evals.stats": ("stats",)}`).

    Returns:
        The package's `__getattr__` (caches each value it resolves in the package) and
        `__dir__`.
    """
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module_name = where.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(module_name)
        if module_name.rpartition(".")[2] == name and not hasattr(module, name):
            value: Any = module
        else:
            value = getattr(module, name)
        setattr(sys.modules[package], name, value)  # next time: a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
