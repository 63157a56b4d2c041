from __future__ import annotations

import pytest

from weakincentives import serde
from weakincentives.experiment import BASELINE, CONTROL, Experiment


def test_defaults_and_builtin_experiments() -> None:
    exp = Experiment(name="x")
    assert exp.overrides_tag == "latest"
    assert dict(exp.flags) == {}
    assert (BASELINE.name, BASELINE.overrides_tag, dict(BASELINE.flags)) == (
        "baseline",
        "latest",
        {},
    )
    assert (CONTROL.name, CONTROL.overrides_tag, dict(CONTROL.flags)) == ("control", "latest", {})


def test_name_is_required() -> None:
    with pytest.raises(ValueError, match="name"):
        Experiment(name="")


def test_with_flag_and_with_tag_return_copies() -> None:
    base = Experiment(name="treatment")
    changed = base.with_flag("style", "short").with_flag("fast").with_tag("v2")
    assert dict(base.flags) == {}
    assert base.overrides_tag == "latest"
    assert changed.get_flag("style") == "short"
    assert changed.get_flag("fast") is True
    assert changed.overrides_tag == "v2"
    assert changed.name == "treatment"


def test_flag_lookup() -> None:
    exp = Experiment(name="x", flags={"off": False})
    assert exp.has_flag("off")
    assert exp.get_flag("off") is False
    assert not exp.has_flag("missing")
    assert exp.get_flag("missing") is None
    assert exp.get_flag("missing", 3) == 3


def test_flags_are_read_only_and_copied() -> None:
    source = {"a": 1}
    exp = Experiment(name="x", flags=source)
    source["a"] = 2
    assert exp.get_flag("a") == 1
    with pytest.raises(TypeError):
        exp.flags["a"] = 3  # type: ignore[index]  # the point: flags are immutable


def test_equality_and_hash() -> None:
    a = Experiment(name="x", flags={"p": 1, "q": 2})
    b = Experiment(name="x", flags={"q": 2, "p": 1})
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != a.with_flag("p", 9)
    assert a != a.with_tag("v2")
    assert a != Experiment(name="x", flags={"p": 1, "q": 2}, owner="me")
    assert a != "x"


def test_experiments_with_unhashable_flag_values_are_hashable() -> None:
    exp = Experiment(name="x", flags={"tools": ["a", "b"], "cfg": {"k": 1}})
    assert {exp: 1}[Experiment(name="x", flags={"tools": ["a", "b"], "cfg": {"k": 1}})] == 1


def test_serde_round_trip() -> None:
    exp = Experiment(name="x", overrides_tag="v2", flags={"n": [1, 2]}, owner="o", description="d")
    assert serde.loads(Experiment, serde.dumps(exp)) == exp
