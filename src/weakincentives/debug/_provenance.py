"""What produced a run, as labelled rows for the viewer's run page and the HTML report.

`provenance_rows(manifest)` reads a run's manifest (`run.json` as JSON data): when it
was made; its `provenance` when recorded (the agent's model, base URL and parameters,
the judges, dataset, command line, git commit and dirty flag, package and Python
versions, host); the fingerprint (dataset hash, target, evaluators, experiments, epochs
and anything else recorded, such as models); and the run's settings. Fields it does not
know are shown too, under their own names, so what a newer manifest records is never
hidden. Values are text; nested values compact JSON.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

__all__ = ["provenance_rows"]

_FINGERPRINT_LABELS = {
    "dataset_sha256": "Dataset sha256",
    "target": "Target",
    "evaluators": "Evaluators",
    "experiments": "Experiments",
    "package_version": "Package version",
    "git_commit": "Git commit",
    "epochs": "Epochs",
}
_SKIP = {
    "format_version", "run_id", "updated_at", "counts", "fingerprint", "config", "status",
    "provenance",
}  # fmt: skip
_KNOWN = {"agent", "judges", "dataset", "command", "git_commit", "git_dirty",
          "package_version", "python_version", "host"}  # fmt: skip


def provenance_rows(manifest: Mapping[str, Any]) -> list[tuple[str, str]]:
    """`(label, text)` rows describing the run of `manifest` (empty values left out)."""
    rows: list[tuple[str, str]] = []
    _add(rows, "Created", manifest.get("created_at"))
    recorded = manifest.get("provenance")
    if isinstance(recorded, Mapping):
        _run_provenance(rows, recorded)
    fingerprint = manifest.get("fingerprint")
    if isinstance(fingerprint, Mapping):
        for key, label in _FINGERPRINT_LABELS.items():
            value = fingerprint.get(key)
            if key == "experiments" and isinstance(value, list):
                value = [_experiment(e) for e in value]
            _add(rows, label, value)
        extra = fingerprint.get("extra")
        if isinstance(extra, Mapping):
            for key, value in extra.items():
                _add(rows, str(key), value)
        for key, value in fingerprint.items():
            # `models` repeats what the recorded provenance's rows already say.
            said = key == "models" and isinstance(recorded, Mapping)
            if key not in _FINGERPRINT_LABELS and key != "extra" and not said:
                _add(rows, str(key), value)
    for key, value in manifest.items():
        if key not in _SKIP and key != "created_at":
            _add(rows, str(key), value)
    config = manifest.get("config")
    if isinstance(config, Mapping):
        for key, value in config.items():
            _add(rows, f"config: {key}", value)
    return rows


def _run_provenance(rows: list[tuple[str, str]], p: Mapping[str, Any]) -> None:
    """The manifest's `provenance` (`RunProvenance`): models first, then where it ran."""
    agent = p.get("agent")
    if isinstance(agent, Mapping):
        _add(rows, "Model", _model(agent))
        _add(rows, "Base URL", agent.get("base_url"))
        _add(rows, "Parameters", agent.get("parameters"))
        _add(
            rows,
            "Adapter",
            " ".join(str(agent.get(k) or "") for k in ("adapter", "version")).strip(),
        )
    judges = p.get("judges")
    if isinstance(judges, list) and judges:
        _add(rows, "Judge", "; ".join(_judge(j) for j in judges if isinstance(j, Mapping)))
    dataset = p.get("dataset")
    if isinstance(dataset, Mapping):
        _add(rows, "Dataset", dataset.get("path"))
        _add(rows, "Dataset sha256", dataset.get("sha256"))
    command = p.get("command")
    if isinstance(command, list) and command:
        _add(rows, "Command line", shlex.join(str(c) for c in command))
    commit = p.get("git_commit")
    if commit:
        _add(rows, "Git commit", f"{commit}{' (dirty)' if p.get('git_dirty') else ''}")
    _add(rows, "Package version", p.get("package_version"))
    _add(rows, "Python", p.get("python_version"))
    _add(rows, "Host", p.get("host"))
    for key, value in p.items():
        if key not in _KNOWN:
            _add(rows, str(key), value)


def _model(info: Mapping[str, Any]) -> str:
    return " ".join(str(info.get(k) or "") for k in ("provider", "model")).strip()


def _judge(info: Mapping[str, Any]) -> str:
    params = info.get("parameters")
    return _model(info) + (f" {_text(params)}" if params else "")


def _experiment(value: Any) -> Any:
    if isinstance(value, Mapping) and "name" in value:
        rest = {k: v for k, v in value.items() if k != "name" and v not in (None, {}, [], "")}
        return value["name"] + (f" {_text(rest)}" if rest else "")
    return value


def _add(rows: list[tuple[str, str]], label: str, value: Any) -> None:
    if value is None or value == "" or value == [] or value == {}:
        return
    if any(known == label for known, _ in rows):  # the provenance said it first
        return
    rows.append((label, _text(value)))


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
