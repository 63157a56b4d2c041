"""Run fingerprints: what must not change between a run and its resumption.

A fingerprint names the dataset (by content hash), the experiments (names, overrides tags,
flags), the evaluators and the target (by qualified name), the models they run on (each
adapter's provider, model, base URL and sampling parameters, from `describe()`), the
package version, the git commit of the checkout that holds the target's code (of the
working directory when the target has no source file) and the number of epochs.
`RunStore.resume` compares the stored fingerprint with the current one and refuses,
printing `diff_fingerprints`, when they differ: results computed under another
configuration must not be mixed into a run.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from weakincentives import serde
from weakincentives.experiment import Experiment

from ._git import head_commit

__all__ = [
    "ExperimentFingerprint",
    "Fingerprint",
    "code_directory",
    "diff_fingerprints",
    "git_commit",
    "qualified_name",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentFingerprint:
    """The parts of an `Experiment` that change what a run computes."""

    name: str
    """Experiment name."""
    overrides_tag: str = "latest"
    """Prompt overrides tag."""
    flags: Mapping[str, Any] = field(default_factory=dict)
    """Feature flags, in their JSON form."""

    @classmethod
    def of(cls, experiment: Experiment) -> ExperimentFingerprint:
        """Fingerprint `experiment` (owner and description do not count)."""
        return cls(
            name=experiment.name,
            overrides_tag=experiment.overrides_tag,
            flags=serde.dump(dict(experiment.flags)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Fingerprint:
    """Identity of a run's configuration; see the module docstring.

    Build one with `Fingerprint.build`, which fills in the package version and git commit.

    Examples:
        >>> from weakincentives.experiment import BASELINE
        >>> fp = Fingerprint.build(
        ...     dataset_sha256="ab" * 32, experiments=[BASELINE], evaluators=[len],
        ...     target="my_agent.run", git_commit=None)
        >>> fp.evaluators, fp.target
        (('builtins.len',), 'my_agent.run')
    """

    dataset_sha256: str
    """sha256 of the dataset's content (`Dataset.sha256`)."""
    experiments: tuple[ExperimentFingerprint, ...] = ()
    """The experiments run, in order."""
    evaluators: tuple[str, ...] = ()
    """Qualified names of the evaluators."""
    target: str = ""
    """Qualified name of the agent loop or task function under evaluation."""
    package_version: str = ""
    """`weakincentives.__version__` when the run was created."""
    git_commit: str | None = None
    """`git rev-parse HEAD` of the working directory, when it is a git checkout."""
    epochs: int = 1
    """How many times each sample is run per experiment."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Anything else that must match on resume, JSON form."""
    models: Mapping[str, Any] = field(default_factory=dict)
    """What changes what the models do, by role (`agent`, `judge`, ...): each adapter's
    `AdapterInfo.behaviour()` (see `RunProvenance.models`)."""

    @classmethod
    def build(
        cls,
        *,
        dataset_sha256: str,
        experiments: Iterable[Experiment],
        evaluators: Iterable[object],
        target: object,
        epochs: int = 1,
        extra: Mapping[str, Any] | None = None,
        models: Mapping[str, Any] | None = None,
        package_version: str | None = None,
        git_commit: str | Literal["auto"] | None = "auto",
        code_of: object = None,
    ) -> Fingerprint:
        """Fingerprint a run configuration.

        Args:
            dataset_sha256: Content hash of the dataset (`Dataset.sha256`).
            experiments: Experiments the run covers.
            evaluators: Evaluator callables (or their names).
            target: The agent loop, task function (or its name).
            epochs: Repetitions per sample.
            extra: More values that must match on resume; stored in JSON form.
            models: The models' behaviour by role (`RunProvenance.models()`).
            package_version: Defaults to `weakincentives.__version__`.
            git_commit: `"auto"` runs `git rev-parse HEAD` (once per directory and process)
                in the directory of the file that defines `code_of` (default: `target`),
                or in the working directory when it has none (a name, a builtin), so a
                run resumed from another directory keeps its commit; None for none.
            code_of: The object whose checkout's commit `"auto"` records (when `target`
                is only a name).
        """
        if package_version is None:
            package_version = _package_version()
        return cls(
            dataset_sha256=dataset_sha256,
            experiments=tuple(ExperimentFingerprint.of(e) for e in experiments),
            evaluators=tuple(qualified_name(e) for e in evaluators),
            target=qualified_name(target),
            package_version=package_version,
            git_commit=(
                _git_commit(code_directory(target if code_of is None else code_of))
                if git_commit == "auto"
                else git_commit
            ),
            epochs=epochs,
            extra=serde.dump(dict(extra or {})),
            models=serde.dump(dict(models or {})),
        )


def _package_version() -> str:
    # The root package sits above evals in the layers, so it is not imported from here; it
    # is always loaded before any of its submodules, so its attribute is there to read.
    root = sys.modules.get("weakincentives")
    return str(getattr(root, "__version__", "unknown"))


def qualified_name(obj: object) -> str:
    """`module.QualName` of a function, class or (for other objects) their class.

    A string is returned as is; a `functools.partial` is named after its function.
    """
    if isinstance(obj, str):
        return obj
    if isinstance(obj, functools.partial):
        return qualified_name(obj.func)
    qualname = getattr(obj, "__qualname__", None)
    module = getattr(obj, "__module__", None)
    if not isinstance(qualname, str):
        qualname, module = type(obj).__qualname__, type(obj).__module__
    return f"{module}.{qualname}" if module else qualname


def git_commit(directory: str | None = None) -> str | None:
    """`git rev-parse HEAD` in `directory` (default: the current one), once per process.

    Returns None when git is missing or the directory is not in a checkout.
    """
    return _git_commit(directory)


def code_directory(obj: object) -> str | None:
    """The directory of the source file defining `obj` (or its class), if it has one."""
    if isinstance(obj, str) or obj is None:
        return None
    obj = getattr(obj, "fn", obj)  # a FunctionLoop: the function it wraps
    if isinstance(obj, functools.partial):
        obj = obj.func
    for candidate in (obj, type(obj)):
        try:
            path = inspect.getsourcefile(candidate)  # type: ignore[arg-type]
        except TypeError:  # a builtin, or an instance
            continue
        if path:
            return str(Path(path).resolve().parent)
    return None


@functools.cache
def _git_commit(directory: str | None = None) -> str | None:
    return head_commit(directory)  # the files where they are plain, else `git` (see `_git`)


def diff_fingerprints(
    old: Fingerprint, new: Fingerprint, *, ignore: Collection[str] = ()
) -> list[str]:
    """Human-readable differences from `old` to `new` (empty when they match).

    Args:
        old: The stored fingerprint.
        new: The current one.
        ignore: Field names not to compare (e.g. `{"git_commit"}`).

    Examples:
        >>> a = Fingerprint(dataset_sha256="abc", epochs=1)
        >>> diff_fingerprints(a, Fingerprint(dataset_sha256="def", epochs=3))
        ['dataset sha256: abc -> def', 'epochs: 1 -> 3']
    """
    out: list[str] = []
    for f in fields(Fingerprint):
        if f.name in ignore:
            continue
        before, after = serde.dump(getattr(old, f.name)), serde.dump(getattr(new, f.name))
        if before == after:
            continue
        if f.name == "experiments":
            out.extend(_diff_experiments(before, after))
        elif f.name == "extra":
            out.extend(_diff_mapping("extra", before, after))
        elif f.name == "models":
            out.extend(_diff_models(before, after))
        else:
            out.append(f"{_LABELS.get(f.name, f.name)}: {_short(before)} -> {_short(after)}")
    return out


_LABELS = {
    "dataset_sha256": "dataset sha256",
    "package_version": "package version",
    "git_commit": "git commit",
}


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) >= 40 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"  # a hash: the prefix is enough to tell two apart
    if isinstance(value, str):
        return value if value else "''"
    if isinstance(value, list):
        return "[" + ", ".join(repr(v) for v in value) + "]"
    return _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _diff_experiments(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    old = {e["name"]: e for e in before}
    new = {e["name"]: e for e in after}
    out = [f"experiments: removed {name!r}" for name in old if name not in new]
    out += [f"experiments: added {name!r}" for name in new if name not in old]
    for name in (n for n in old if n in new):
        for key in ("overrides_tag", "flags"):
            if old[name].get(key) != new[name].get(key):
                was, now = _short(old[name].get(key)), _short(new[name].get(key))
                out.append(f"experiment {name!r}: {key} {was} -> {now}")
    if not out and list(old) != list(new):
        out.append(f"experiments: order {list(old)} -> {list(new)}")
    return out


def _diff_mapping(label: str, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key in sorted(before.keys() | after.keys()):
        if key not in after:
            out.append(f"{label}: removed {key!r}")
        elif key not in before:
            out.append(f"{label}: added {key!r} = {_json(after[key])}")
        elif before[key] != after[key]:
            out.append(f"{label} {key!r}: {_json(before[key])} -> {_json(after[key])}")
    return out


def _diff_models(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """`agent model: 'a' -> 'b'`, `judge parameters.temperature: 0.0 -> 0.7`, ..."""
    out: list[str] = []
    for role in sorted(before.keys() | after.keys()):
        if role not in after:
            out.append(f"{role} model: {before[role].get('model')!r} -> none")
        elif role not in before:
            out.append(f"{role} model: none -> {after[role].get('model')!r}")
        else:
            out.extend(_diff_flat(role, _flatten(before[role]), _flatten(after[role])))
    return out


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, Mapping) and item:
            out.update(_flatten(item, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = item
    return out


def _diff_flat(role: str, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [
        f"{role} {key}: {_json(before.get(key))} -> {_json(after.get(key))}"
        for key in sorted(before.keys() | after.keys())
        if before.get(key) != after.get(key)
    ]
