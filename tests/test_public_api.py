"""Public import paths never break: every name a public module exported stays exported.

`tests/public_api.json` records each public module's `__all__` as of the evals layout
change. New names may be added freely; removing or moving one fails here, so a change of
the public API is always deliberate (update the file, and say so in the CHANGELOG).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

RECORDED: dict[str, list[str]] = json.loads(
    (Path(__file__).parent / "public_api.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("module_name", sorted(RECORDED))
def test_recorded_public_names_still_import_from_the_same_module(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = set(getattr(module, "__all__", ()))
    missing = [name for name in RECORDED[module_name] if name not in exported]
    assert missing == [], f"{module_name} no longer exports {missing}"
    assert [name for name in RECORDED[module_name] if not hasattr(module, name)] == []


def test_the_record_covers_the_main_public_modules() -> None:
    assert {"weakincentives", "weakincentives.evals", "weakincentives.runtime"} <= set(RECORDED)
    assert "EvalReport" in RECORDED["weakincentives.evals"]
