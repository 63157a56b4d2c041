"""A new run's manifest, written once its first samples are under way (`DeferredManifest`).

A fresh process pays once for what `run.json` holds: the fingerprint's git commit and
models, the provenance (the redactor that cleans the command line and the adapters'
descriptions, the serializers, `git status`). `LocalRun` creates the run's directory and
results file before any sample starts (a store that cannot be written fails then) and
writes `run.json` with `DeferredManifest.publish` while the first samples wait on their
calls: never after the first result, which the handle holds back until it is written
(`RunHandle.publish`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

import anyio.lowlevel

from weakincentives import serde

from ..store import (
    Fingerprint,
    RunHandle,
    RunProvenance,
    code_directory,
    git_commit,
    git_dirty_future,
    models_of,
)
from ._git_dirty import GitDirty

__all__ = ["DeferredManifest"]

_UNSET: Any = object()


class DeferredManifest:
    """A new run's fingerprint and provenance, collected as its `run.json` is written.

    Args:
        fingerprint: The run's fingerprint without its models and git commit (built
            before the run, so that what it checks, such as `fingerprint_extra`, fails
            before any sample starts); both are filled in when `run.json` is written.
        target: The target under evaluation (its code's checkout, its adapter).
        evaluator: The evaluator (its judges' adapters).
        dataset_sha256: The dataset's hash, when known up front.
        dataset_path: The file the dataset came from.
    """

    def __init__(
        self,
        fingerprint: Fingerprint,
        *,
        target: object,
        evaluator: object,
        dataset_sha256: str | None = None,
        dataset_path: str | None = None,
    ) -> None:
        self._base = fingerprint
        self._target = target
        self._evaluator = evaluator
        self._dataset = (dataset_sha256, dataset_path)
        self._commit: str | None = _UNSET
        self._fingerprint: Fingerprint | None = None
        self._collected: RunProvenance | None = None
        self._dirty: Future[bool | None] | None = None
        self._included = False  # git's answer is in the provenance written
        self._published = False
        self._git_dirty: GitDirty | None = None
        self.handle: RunHandle | None = None
        """The run (set by `LocalRun.create`)."""

    def git_commit(self) -> str | None:
        """The commit of the checkout holding the target's code (looked up once)."""
        if self._commit is _UNSET:
            self._commit = git_commit(code_directory(self._target))
        return self._commit

    def fingerprint(self) -> Fingerprint:
        """The whole fingerprint (the handle calls it as it writes `run.json`); once."""
        if self._fingerprint is None:
            collected = self._collected  # the handle collects the provenance first
            if collected is None:
                found = models_of(self._target, self._evaluator)
            else:
                found = collected.models()  # the same (see `models_of`)
            models = serde.dump(dict(found))  # as `Fingerprint.build` stores them
            self._fingerprint = dataclasses.replace(
                self._base, git_commit=self.git_commit(), models=models
            )
        return self._fingerprint

    def provenance(self) -> Mapping[str, Any]:
        """The provenance, JSON form (called by the handle as it writes `run.json`)."""
        self._ask_git()  # a result may publish before `publish` does: git starts here
        dirty, answer = self._dirty, None
        if dirty is not None and dirty.done():
            answer, self._included = dirty.result(), True
        sha256, path = self._dataset
        collected = self._collected = RunProvenance.collect(
            target=self._target, evaluator=self._evaluator, dataset_sha256=sha256,
            dataset_path=path, git_commit=self.git_commit(), git_dirty=answer,
        )  # fmt: skip
        provenance: Mapping[str, Any] = serde.dump(collected)
        return provenance

    def publish(self) -> None:
        """Ask git in the background and write `run.json` (once; see the module docs)."""
        handle = self.handle
        if self._published or handle is None:
            return
        self._published = True
        self._ask_git()
        handle.publish()  # collects both, unless a result made the handle publish first
        if self._dirty is not None and not self._included:
            self._git_dirty = GitDirty(handle, self._dirty)

    def _ask_git(self) -> None:
        # `git status` in the background (once per process): it runs while samples wait,
        # and `finish` waits for its answer if it has not come by then.
        if self._dirty is None and self.git_commit() is not None:
            self._dirty = git_dirty_future()

    async def publish_soon(self) -> None:
        """`publish` after one yield.

        Started before a run's worker tasks, it runs once each has taken its first step
        (its first sample waits on its call).
        """
        await anyio.lowlevel.checkpoint()
        self.publish()

    def final(self) -> dict[str, Any]:
        """What `finish` adds to the manifest: git's answer, if not recorded yet (waited for)."""
        return {} if self._git_dirty is None else {"provenance": self._git_dirty.final()}
