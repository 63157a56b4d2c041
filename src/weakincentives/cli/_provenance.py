"""The header `wink eval report` prints above a run's report: provenance and run info.

Standard library and `evals` only: `wink eval report` and `wink eval list` import it
without the modules that plan a run.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from weakincentives.evals import RunStore
from weakincentives.evals.store import MANIFEST_FILE, RESULTS_FILE
from weakincentives.redaction import default_redactor

__all__ = ["header_lines", "provenance_lines", "run_info_of", "run_provenance"]


def run_provenance(path: Path, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The provenance in the manifest of the run at `path`, whose report has `config`.

    For a run directory, `EvalReport.load` has read the manifest as the report's
    `config`: the provenance is taken from there (the manifest is not read twice).
    None for a saved report file, a run written before provenance was recorded, or a
    manifest that cannot be read (the report itself says why).
    """
    if not (path / MANIFEST_FILE).is_file():
        return None
    if (path / RESULTS_FILE).is_file():
        provenance = config.get("provenance")
        return dict(provenance) if isinstance(provenance, Mapping) and provenance else None
    try:  # a directory with a saved report beside the manifest
        handle = RunStore(path.parent).open(path)
    except Exception:  # the report's own loading reports what is wrong
        return None
    return dict(handle.manifest.provenance) or None


def _model(info: Any) -> str:
    if not isinstance(info, dict):
        return "none recorded"
    params = info.get("parameters") or {}
    shown = ", ".join(f"{k}={v}" for k, v in params.items() if v not in (None, {}, []))
    where = f" at {info['base_url']}" if info.get("base_url") else ""
    return f"{info.get('provider')}:{info.get('model')}{where}" + (f" ({shown})" if shown else "")


def provenance_lines(provenance: dict[str, Any]) -> list[str]:
    """Plain lines: agent and judge models, versions, git, host, command and dataset.

    Examples:
        >>> provenance_lines({"agent": {"provider": "openai", "model": "m",
        ...     "parameters": {"temperature": 0.0}}, "python_version": "3.11.9"})[:2]
        ['agent:    openai:m (temperature=0.0)', 'judges:   none']
    """
    judges = provenance.get("judges") or []
    git = provenance.get("git_commit")
    dirty = " (uncommitted changes)" if provenance.get("git_dirty") else ""
    dataset = provenance.get("dataset") or {}
    sha = dataset.get("sha256") or ""
    command = provenance.get("command") or []
    lines = [
        f"agent:    {_model(provenance.get('agent'))}",
        f"judges:   {'; '.join(_model(j) for j in judges) or 'none'}",
        f"package:  weakincentives {provenance.get('package_version', '?')}, "
        f"Python {provenance.get('python_version', '?')}",
        f"git:      {git[:12] + dirty if git else 'not a checkout'}",
        f"host:     {provenance.get('host', '?')}",
        f"dataset:  {dataset.get('path') or '(in memory)'} sha256 {sha[:12]}",
        f"command:  {shlex.join(command) if command else '?'}",
    ]
    redactor = default_redactor()
    return [redactor.text(line) for line in lines]


def header_lines(info: Mapping[str, Any]) -> list[str]:
    """The report header's lines about a run (its `run_info`): dataset, selection, model..."""
    lines = []
    dataset = info.get("dataset")
    if isinstance(dataset, Mapping):
        sha = str(dataset.get("sha256") or "")[:12]
        lines.append(
            f"Dataset: {dataset.get('location')} ({dataset.get('format')}"
            + (f", sha256 {sha}" if sha else "")
            + ")"
        )
    for key, label in (("selection", "Selection"), ("model", "Model")):
        if info.get(key):
            lines.append(f"{label}: {info[key]}")
    tags = info.get("tags")
    if isinstance(tags, list) and tags:
        lines.append(f"Tags: {', '.join(map(str, tags))}")
    if info.get("note"):
        lines.append(f"Note: {info['note']}")
    return lines


_INFO_KEYS = ("model", "dataset", "selection", "tags", "note")


def run_info_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """The `run_info` of a report's config: a fresh run's, or a stored run's manifest."""
    inner = config.get("config")
    source = inner if isinstance(inner, Mapping) and "fingerprint" in config else config
    return {key: source[key] for key in _INFO_KEYS if key in source}
