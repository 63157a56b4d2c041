from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import weakincentives
from weakincentives import serde
from weakincentives.evals import Dataset, Sample
from weakincentives.evals.store import _fingerprint
from weakincentives.evals.store._fingerprint import (
    Fingerprint,
    diff_fingerprints,
    qualified_name,
)
from weakincentives.experiment import BASELINE, Experiment


def exact_match(output: str, expected: str) -> bool:
    return output == expected


class Judge:
    def __call__(self, output: str, expected: str) -> bool:
        return True


def build(**changes: Any) -> Fingerprint:
    fields: dict[str, Any] = {
        "dataset_sha256": "a" * 64,
        "experiments": [BASELINE, Experiment(name="concise", flags={"style": "short"})],
        "evaluators": [exact_match],
        "target": "agent.run",
        "git_commit": "1" * 40,
    }
    fields.update(changes)
    return Fingerprint.build(**fields)


def test_build_names_things_and_fills_in_the_version() -> None:
    fp = build(evaluators=[exact_match, Judge()], extra={"model": "gpt-x"})
    assert fp.evaluators == (f"{__name__}.exact_match", f"{__name__}.Judge")
    assert fp.target == "agent.run"
    assert fp.package_version == weakincentives.__version__
    assert [e.name for e in fp.experiments] == ["baseline", "concise"]
    assert fp.experiments[1].flags == {"style": "short"}
    assert fp.extra == {"model": "gpt-x"}


def test_a_fingerprint_survives_a_json_round_trip_unchanged() -> None:
    fp = build(experiments=[BASELINE.with_flag("levels", (1, 2))], extra={"k": (3, 4)})
    again: Fingerprint = serde.loads(Fingerprint, serde.dumps(fp))
    assert diff_fingerprints(fp, again) == []
    assert again == fp  # flags and extra are kept in JSON form from the start


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"dataset_sha256": "b" * 64}, ["dataset sha256: aaaaaaaaaaaa… -> bbbbbbbbbbbb…"]),
        ({"experiments": [BASELINE]}, ["experiments: removed 'concise'"]),
        (
            {"experiments": [BASELINE, Experiment(name="concise", flags={"style": "long"})]},
            ['experiment \'concise\': flags {"style": "short"} -> {"style": "long"}'],
        ),
        (
            {
                "experiments": [
                    BASELINE.with_tag("v2"),
                    Experiment(name="concise").with_flag("style", "short"),
                ]
            },
            ["experiment 'baseline': overrides_tag latest -> v2"],
        ),
        (
            {"experiments": [Experiment(name="concise", flags={"style": "short"}), BASELINE]},
            ["experiments: order ['baseline', 'concise'] -> ['concise', 'baseline']"],
        ),
        (
            {"evaluators": [exact_match, len]},
            [
                f"evaluators: ['{__name__}.exact_match'] -> "
                f"['{__name__}.exact_match', 'builtins.len']"
            ],
        ),
        ({"target": "agent.run_v2"}, ["target: agent.run -> agent.run_v2"]),
        ({"git_commit": None}, ["git commit: 111111111111… -> null"]),
        ({"package_version": "9.9"}, [f"package version: {weakincentives.__version__} -> 9.9"]),
        ({"epochs": 3}, ["epochs: 1 -> 3"]),
        ({"extra": {"model": "b"}}, ["extra: added 'model' = \"b\""]),
    ],
)
def test_diff_names_each_change(changes: dict[str, Any], expected: list[str]) -> None:
    assert diff_fingerprints(build(), build(**changes)) == expected


def test_diff_lists_every_change_and_can_ignore_fields() -> None:
    old = build(extra={"model": "a", "judge": "j"})
    new = build(
        dataset_sha256="b" * 64,
        experiments=[
            BASELINE,
            Experiment(name="concise", flags={"style": "short"}),
            Experiment(name="new"),
        ],
        git_commit="2" * 40,
        extra={"model": "b"},
    )
    assert diff_fingerprints(old, new) == [
        "dataset sha256: aaaaaaaaaaaa… -> bbbbbbbbbbbb…",
        "experiments: added 'new'",
        "git commit: 111111111111… -> 222222222222…",
        "extra: removed 'judge'",
        'extra \'model\': "a" -> "b"',
    ]
    assert (
        diff_fingerprints(old, new, ignore={"dataset_sha256", "experiments", "git_commit", "extra"})
        == []
    )
    assert diff_fingerprints(old, old) == []


def test_qualified_names() -> None:
    assert qualified_name("given.name") == "given.name"
    assert qualified_name(exact_match) == f"{__name__}.exact_match"
    assert qualified_name(functools.partial(exact_match, "x")) == f"{__name__}.exact_match"
    assert qualified_name(Judge) == f"{__name__}.Judge"
    assert qualified_name(Judge()) == f"{__name__}.Judge"
    assert qualified_name(Judge().__call__) == f"{__name__}.Judge.__call__"
    assert qualified_name(lambda: None) == f"{__name__}.test_qualified_names.<locals>.<lambda>"


def dataset_sha256(samples: list[Sample[str, str]]) -> str:
    return Dataset(samples=tuple(samples)).sha256


def test_dataset_hash_is_stable_and_sees_every_change() -> None:
    samples = [Sample(id="1", input="2+2", expected="4", metadata={"b": 1, "a": 2})]
    same = [Sample(id="1", input="2+2", expected="4", metadata={"a": 2, "b": 1})]
    assert dataset_sha256(samples) == dataset_sha256(same)  # key order does not matter
    assert len(dataset_sha256(samples)) == 64
    variants = [
        [Sample(id="2", input="2+2", expected="4", metadata={"b": 1, "a": 2})],
        [Sample(id="1", input="2+3", expected="4", metadata={"b": 1, "a": 2})],
        [Sample(id="1", input="2+2", expected="5", metadata={"b": 1, "a": 2})],
        [Sample(id="1", input="2+2", expected="4", metadata={"b": 1})],
        [*samples, Sample(id="3", input="2+2", expected="4")],
        [],
    ]
    hashes = {dataset_sha256(v) for v in variants}
    assert len(hashes) == len(variants)
    assert dataset_sha256(samples) not in hashes


@pytest.fixture
def fresh_git_cache() -> Any:
    _fingerprint._git_commit.cache_clear()
    yield
    _fingerprint._git_commit.cache_clear()


@pytest.mark.usefixtures("fresh_git_cache")
def test_git_commit_is_read_once_when_there_is_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    assert build(git_commit="auto").git_commit is None  # not a checkout yet
    _fingerprint._git_commit.cache_clear()
    subprocess.run(["git", "init", "-q"], check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    assert build(git_commit="auto").git_commit == head.stdout.strip()
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "y"], check=True)
    assert _fingerprint.git_commit() == head.stdout.strip()  # cached for the process


@pytest.mark.usefixtures("fresh_git_cache")
def test_a_missing_git_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert _fingerprint.git_commit() is None
