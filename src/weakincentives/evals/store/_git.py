"""The git commit of a checkout, read from its files; `git` itself where they are unusual.

A run's fingerprint and provenance name the commit of the code's checkout
(`git rev-parse HEAD`). Spawning git costs a process's first run 2-15 ms (more on a busy
machine), so `head_commit` reads what git would read: it finds the checkout as git does
(the nearest `.git` directory or `gitdir:` file above the directory), follows `HEAD` to a
branch (`refs/heads/...`, a loose ref file or a `packed-refs` line; a linked worktree's
branches live in the repository's common directory) or takes a detached `HEAD` as is.

Whatever this reader does not know for sure is left to `git rev-parse HEAD`: environment
variables that steer git (`GIT_DIR`, `GIT_CEILING_DIRECTORIES`...), a checkout not owned
by this user (git's `safe.directory` check), a search that crosses a file system, a bare
repository or a directory inside `.git`, repository extensions other than the object
format and per-worktree config (the reftable ref store among them), a symbolic ref, an
unborn branch, anything that does not read as a commit id. So the answer is always the
one `git` gives, including None where git is missing or the directory is in no checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["git_head", "head_commit", "read_head"]

_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1 or SHA-256
_STEERING = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_NAMESPACE", "GIT_CONFIG", "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_NOSYSTEM",
)  # fmt: skip
"""Environment variables that change which repository git finds or how it reads it."""
_KNOWN_EXTENSIONS = frozenset({"objectformat", "worktreeconfig"})
"""Repository extensions that leave `HEAD` and loose/packed refs as this reader reads them."""


class _Unsure(Exception):
    """The files do not settle the answer: ask git."""


def head_commit(directory: str | None = None) -> str | None:
    """`git rev-parse HEAD` in `directory` (default: the current one); None without one.

    None when git is not installed or the directory is in no checkout (as git answers).
    The files are read directly where they are plain (see the module's docs); `git` runs
    otherwise.
    """
    if shutil.which("git") is None:
        return None
    try:
        return read_head(directory)
    except _Unsure:
        return git_head(directory)


def git_head(directory: str | None = None) -> str | None:
    """`git rev-parse HEAD` run in `directory`; None when it fails or git is missing."""
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            cwd=directory,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = proc.stdout.strip()
    return commit if proc.returncode == 0 and commit else None


def read_head(directory: str | None = None) -> str | None:
    """HEAD's commit from the checkout's files, None outside a checkout.

    Raises:
        _Unsure: the files alone do not give git's answer (see the module's docs).
    """
    if any(name in os.environ for name in _STEERING):
        raise _Unsure
    try:
        found = _find_git_dir(Path(directory or Path.cwd()).resolve())
        if found is None:
            return None
        worktree, dot_git, git_dir = found
        uid = os.geteuid()
        for path in {worktree, dot_git, git_dir}:
            if path.stat().st_uid != uid:  # git's safe.directory check decides
                raise _Unsure
        common = _common_dir(git_dir)
        _check_format(common)
        head = _read(git_dir / "HEAD")
    except (OSError, ValueError) as exc:  # ValueError: a file that is not UTF-8
        raise _Unsure from exc
    if _COMMIT.fullmatch(head):
        return head  # a detached HEAD
    if not head.startswith("ref: refs/heads/"):
        raise _Unsure
    return _resolve(common, head[len("ref: ") :])


def _find_git_dir(start: Path) -> tuple[Path, Path, Path] | None:
    """`(worktree, .git entry, git directory)` of the checkout holding `start`, or None."""
    current = start
    device = current.stat().st_dev
    while True:
        dot_git = current / ".git"
        if dot_git.is_dir():
            return current, dot_git, dot_git
        if dot_git.is_file():
            text = _read(dot_git)
            if not text.startswith("gitdir: "):
                raise _Unsure
            git_dir = Path(os.path.normpath(current / text[len("gitdir: ") :]))
            return current, dot_git, git_dir
        if dot_git.exists() or _looks_like_git_dir(current):
            raise _Unsure  # a bare repository, inside `.git`, or something odd
        parent = current.parent
        if parent == current:
            return None
        if parent.stat().st_dev != device:
            raise _Unsure  # git stops at a file system's edge unless told otherwise
        current = parent


def _looks_like_git_dir(path: Path) -> bool:
    return (path / "HEAD").exists() and (path / "refs").is_dir()


def _common_dir(git_dir: Path) -> Path:
    """The repository's shared directory (a linked worktree's `commondir`), else `git_dir`."""
    try:
        common = _read(git_dir / "commondir")
    except FileNotFoundError:
        return git_dir
    return Path(os.path.normpath(git_dir / common))


def _check_format(common: Path) -> None:
    """Raise `_Unsure` unless the repository's format is one this reader knows."""
    if (common / "reftable").exists():
        raise _Unsure
    section = ""
    for raw in _read(common / "config").splitlines():
        line = raw.split("#", 1)[0].split(";", 1)[0].strip().lower()
        if line.startswith("["):
            if not line.endswith("]"):
                raise _Unsure  # `[section] key = value` on one line
            section = line
        elif section == "[core]" and line.replace(" ", "").startswith("repositoryformatversion="):
            if line.rpartition("=")[2].strip() not in ("0", "1"):
                raise _Unsure
        elif section == "[extensions]" and line:
            if line.partition("=")[0].strip() not in _KNOWN_EXTENSIONS:
                raise _Unsure
        elif section.startswith("[extensions"):
            raise _Unsure  # a subsection form git may read differently


def _resolve(common: Path, ref: str) -> str:
    """The commit a branch points to: its loose ref file, else its `packed-refs` line."""
    try:
        value = _read(common.joinpath(*ref.split("/")))
    except FileNotFoundError:
        value = _packed(common, ref)
    except (OSError, ValueError) as exc:  # e.g. a directory where the ref file would be
        raise _Unsure from exc
    if not _COMMIT.fullmatch(value):
        raise _Unsure  # a symbolic ref, or a broken one: git says what it makes of it
    return value


def _packed(common: Path, ref: str) -> str:
    try:
        with (common / "packed-refs").open(encoding="utf-8") as f:
            for line in f:
                commit, _, name = line.rstrip("\n").partition(" ")
                if name == ref:
                    return commit
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    raise _Unsure  # an unborn branch (git answers None) or a ref stored elsewhere


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip()
