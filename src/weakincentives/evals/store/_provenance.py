"""What produced a run: the provenance its manifest records.

`RunProvenance.collect` asks the target's adapter and every judge's adapter to describe
themselves (`describe_adapter`), and adds the package and Python versions, the git commit
and whether the checkout had uncommitted changes, the host, the command line (secrets
redacted) and the dataset. `RunProvenance.models` is the part that changes what a model
does: it goes into the run's `Fingerprint`, so resuming against another model, base URL
or temperature is refused.

A target names its model by being an `AgentLoop` (its `adapter`), or, for a task
function or a suite, by carrying an `adapter` attribute (`fn.adapter = OpenAIAdapter(...)`).
LLM judges made by `llm_judge`/`pairwise_judge` carry theirs; combinators collect their
children's.
"""

from __future__ import annotations

import _thread
import platform
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

from weakincentives.adapters import describe_adapter, package_version
from weakincentives.redaction import Redactor, default_redactor
from weakincentives.runtime.agent_loop import AgentLoop, FunctionLoop

from .._records import ADAPTERS_ATTR

__all__ = [
    "ADAPTERS_ATTR",
    "RunProvenance",
    "adapters_of",
    "git_dirty",
    "git_dirty_future",
    "models_of",
    "redact_command",
    "target_adapter",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunProvenance:
    """Where a run came from; `run.json` keeps it under `provenance`.

    Examples:
        >>> p = RunProvenance(python_version="3.11.9", package_version="0.1.0")
        >>> p.models()
        {}
    """

    agent: Mapping[str, Any] | None = None
    """The target's adapter (`AdapterInfo.to_dict()`), None when the target names none."""
    judges: tuple[Mapping[str, Any], ...] = ()
    """The adapters the evaluator calls (LLM judges), in the order they were found."""
    package_version: str = ""
    """Installed version of weakincentives."""
    python_version: str = ""
    """`platform.python_version()`."""
    git_commit: str | None = None
    """`git rev-parse HEAD` of the working directory, None outside a checkout."""
    git_dirty: bool | None = None
    """Whether tracked files had uncommitted changes (None outside a checkout).

    The local runner asks git for it in the background while the run starts, and records
    it in `run.json` during the run (once git has answered and the run is still going
    50 ms later) and when the run finishes: a run that died within that window records
    None."""
    host: str = ""
    """Host name of the machine that created the run."""
    command: tuple[str, ...] = ()
    """The command line (`sys.argv`), secrets redacted."""
    dataset: Mapping[str, Any] = field(default_factory=dict)
    """The dataset: `sha256`, and `path` when it came from a file (other keys may join)."""

    def models(self) -> dict[str, Any]:
        """What changes what the models do: `AdapterInfo.behaviour()` of agent and judges."""
        out: dict[str, Any] = {}
        if self.agent is not None:
            out["agent"] = _behaviour(self.agent)
        for i, judge in enumerate(self.judges):
            out["judge" if i == 0 else f"judge{i + 1}"] = _behaviour(judge)
        return out

    @classmethod
    def collect(
        cls,
        *,
        target: object,
        evaluator: object,
        dataset_sha256: str | None = None,
        dataset_path: str | None = None,
        command: Sequence[str] | None = None,
        git_commit: str | None = None,
        git_dirty: bool | Literal["auto"] | None = "auto",
        redactor: Redactor | None = None,
    ) -> RunProvenance:
        """Describe a run about to start (see the module docstring).

        Args:
            target: The `AgentLoop`, task function or suite under evaluation.
            evaluator: The evaluator (judges inside it are found).
            dataset_sha256: Content hash of the dataset.
            dataset_path: The dataset's file, when it came from one.
            command: The command line; default `sys.argv`.
            git_commit: The commit, when the caller already knows it.
            git_dirty: The dirty flag, when the caller knows it (or records it later);
                `"auto"` asks git (`git_dirty()`) when there is a commit.
            redactor: Redacts the command and adapter infos (default: `default_redactor()`).
        """
        redactor = redactor or default_redactor()
        agent, judges = _described(target, evaluator, redactor)
        dataset: dict[str, Any] = {"sha256": dataset_sha256}
        if dataset_path is not None:
            dataset["path"] = dataset_path
        return cls(
            agent=agent,
            judges=judges,
            package_version=package_version(),
            python_version=platform.python_version(),
            git_commit=git_commit,
            git_dirty=(
                (_git_dirty() if git_commit is not None else None)
                if git_dirty == "auto"
                else git_dirty
            ),
            host=socket.gethostname(),
            command=redact_command(sys.argv if command is None else command, redactor),
            dataset=dataset,
        )


def models_of(target: object, evaluator: object) -> dict[str, Any]:
    """`RunProvenance.collect(target=target, evaluator=evaluator).models()`, and only that.

    What a run's `Fingerprint` needs before its first sample starts; the rest of the
    provenance (the host, the command line...) can wait. The redactor is compiled only
    when there is an adapter to describe.
    """
    if target_adapter(target) is None and not adapters_of(evaluator):
        return {}  # no model: nothing to describe (nor to redact)
    agent, judges = _described(target, evaluator, default_redactor())
    return RunProvenance(agent=agent, judges=judges).models()


def _described(
    target: object, evaluator: object, redactor: Redactor
) -> tuple[Mapping[str, Any] | None, tuple[Mapping[str, Any], ...]]:
    """The target's adapter and the evaluator's, as they describe themselves (redacted)."""
    adapter = target_adapter(target)
    agent = None if adapter is None else redactor.data(describe_adapter(adapter).to_dict())
    return agent, tuple(
        redactor.data(describe_adapter(a).to_dict()) for a in adapters_of(evaluator)
    )


def _behaviour(info: Mapping[str, Any]) -> dict[str, Any]:
    return {k: info.get(k) for k in ("provider", "model", "base_url", "parameters")}


def target_adapter(target: object) -> object | None:
    """The adapter a target runs on: an `AgentLoop`'s, or a declared `adapter` attribute."""
    if isinstance(target, FunctionLoop):
        target = target.fn
    elif isinstance(target, AgentLoop):
        return target.adapter
    adapter = getattr(target, "adapter", None)
    return adapter if callable(getattr(adapter, "evaluate", None)) else None


def adapters_of(evaluator: object) -> tuple[object, ...]:
    """The adapters an evaluator calls, without repeats (`ADAPTERS_ATTR`)."""
    found = getattr(evaluator, ADAPTERS_ATTR, ())
    out: list[object] = []
    for adapter in found if isinstance(found, Iterable) else ():
        if not any(adapter is seen for seen in out):
            out.append(adapter)
    return tuple(out)


_SECRET_OPTION = re.compile(r"key|token|secret|passw|credential|auth", re.IGNORECASE)


def redact_command(argv: Sequence[str], redactor: Redactor | None = None) -> tuple[str, ...]:
    """`argv` with secrets redacted, the value after a secret-looking option too.

    Examples:
        >>> redact_command(["wink", "--api-key", "abc123", "--n", "3"], default_redactor({}))
        ('wink', '--api-key', '[REDACTED]', '--n', '3')
    """
    redactor = redactor or default_redactor()
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and not arg.startswith("-"):
            out.append(redactor.replacement)
            hide_next = False
            continue
        hide_next = False
        if arg.startswith("-") and _SECRET_OPTION.search(arg):
            name, sep, _ = arg.partition("=")
            if sep:
                out.append(f"{name}={redactor.replacement}")
                continue
            hide_next = True
        out.append(redactor.text(arg))
    return tuple(out)


_STATUS = ("git", "status", "--porcelain", "--untracked-files=no")
_STATUS_TIMEOUT = 10.0  # seconds
_dirty: Future[bool | None] | None = None  # the process's answer, or the one on its way
_dirty_lock = threading.Lock()


def git_dirty() -> bool | None:
    """Whether tracked files in the working directory's checkout have changes (cached).

    `git status` is run once per process (see `git_dirty_future`); None when git is
    missing, fails, or the directory is in no checkout.
    """
    return git_dirty_future().result()


def git_dirty_future() -> Future[bool | None]:
    """`git_dirty()` without waiting: its future (done once git has answered).

    The first call starts `git status` and returns at once; a helper thread waits for
    the answer. The local runner calls it as a run starts and records the answer when it
    comes, so that the milliseconds git takes overlap the run instead of delaying it.
    """
    global _dirty
    with _dirty_lock:
        if _dirty is None:
            _dirty = _ask_git_status()
        return _dirty


def _ask_git_status() -> Future[bool | None]:
    future: Future[bool | None] = Future()
    try:
        proc = subprocess.Popen(
            _STATUS, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
    except (OSError, subprocess.SubprocessError):
        future.set_result(None)
        return future
    # A bare `_thread` thread: `threading.Thread.start` waits for the new thread to run,
    # which costs the caller a GIL hand-over (milliseconds on a busy machine).
    _thread.start_new_thread(_await_git_status, (proc, future))
    return future


def _await_git_status(proc: subprocess.Popen[str], future: Future[bool | None]) -> None:
    answer: bool | None = None
    try:
        out, _ = proc.communicate(timeout=_STATUS_TIMEOUT)
        answer = bool(out.strip()) if proc.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        proc.kill()
        proc.wait()
    finally:
        future.set_result(answer)


_git_dirty = git_dirty  # `RunProvenance.collect` has a parameter of that name
