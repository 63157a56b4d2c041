"""The commit a run records, read from the checkout's files, against what `git` reports.

Every layout is made by real `git` in `tmp_path`; each answer is compared with `git
rev-parse HEAD` run in the same directory. The plain layouts must be answered from the
files (no subprocess); the unusual ones must be handed to git.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from weakincentives.evals.store import _fingerprint
from weakincentives.evals.store._git import _Unsure, head_commit, read_head

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

_AUTHOR = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@e",
}  # fmt: skip


@pytest.fixture(autouse=True)
def _git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in [n for n in os.environ if n.startswith("GIT_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user config
    (tmp_path / "home").mkdir()
    _fingerprint._git_commit.cache_clear()
    yield
    _fingerprint._git_commit.cache_clear()


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **_AUTHOR}  # only for the commands that build the layouts
    proc = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return proc.stdout.strip()


def git_says(directory: Path) -> str | None:
    """What `git rev-parse HEAD` prints in `directory`, None when it fails."""
    proc = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def repo(path: Path, commits: int = 2) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    for i in range(commits):
        git(path, "commit", "-q", "--allow-empty", "-m", f"c{i}")
    return path


def plain(tmp: Path) -> Path:
    return repo(tmp / "plain")


def subdirectory(tmp: Path) -> Path:
    sub = repo(tmp / "r") / "src" / "pkg"
    sub.mkdir(parents=True)
    return sub


def detached(tmp: Path) -> Path:
    path = repo(tmp / "r", commits=3)
    git(path, "checkout", "-q", "--detach", "HEAD~1")
    return path


def packed(tmp: Path) -> Path:
    path = repo(tmp / "r")
    git(path, "pack-refs", "--all")
    assert not (path / ".git" / "refs" / "heads" / "main").exists()
    return path


def packed_then_moved(tmp: Path) -> Path:
    # The branch is in packed-refs (old value) and loose (newer value): loose wins.
    path = packed(tmp)
    git(path, "commit", "-q", "--allow-empty", "-m", "after packing")
    return path


def other_branch(tmp: Path) -> Path:
    path = repo(tmp / "r")
    git(path, "checkout", "-q", "-b", "feature/x")
    git(path, "commit", "-q", "--allow-empty", "-m", "on feature")
    return path


def worktree(tmp: Path) -> Path:
    main = repo(tmp / "main")
    git(main, "worktree", "add", "-q", "-b", "side", str(tmp / "linked"))
    git(tmp / "linked", "commit", "-q", "--allow-empty", "-m", "in the worktree")
    return tmp / "linked"


def worktree_detached_packed(tmp: Path) -> Path:
    main = repo(tmp / "main", commits=3)
    git(main, "worktree", "add", "-q", "--detach", str(tmp / "linked"), "HEAD~2")
    git(main, "pack-refs", "--all")
    (tmp / "linked" / "deeper").mkdir()
    return tmp / "linked" / "deeper"


def worktree_main_side(tmp: Path) -> Path:
    main = repo(tmp / "main")
    git(main, "worktree", "add", "-q", "-b", "side", str(tmp / "linked"))
    git(tmp / "linked", "commit", "-q", "--allow-empty", "-m", "in the worktree")
    return main  # the main checkout, beside a linked worktree on another branch


def submodule_style(tmp: Path) -> Path:
    # A `.git` file with a relative `gitdir:` (how submodules and --separate-git-dir look).
    path = tmp / "work"
    path.mkdir()
    git(path, "init", "-q", f"--separate-git-dir={tmp / 'store.git'}")
    (path / ".git").write_text("gitdir: ../store.git\n")
    git(path, "commit", "-q", "--allow-empty", "-m", "x")
    return path


def sha256_repo(tmp: Path) -> Path:
    path = tmp / "r"
    path.mkdir()
    git(path, "init", "-q", "--object-format=sha256")
    git(path, "commit", "-q", "--allow-empty", "-m", "x")
    return path


READ_FROM_FILES: list[Callable[[Path], Path]] = [
    plain, subdirectory, detached, packed, packed_then_moved, other_branch, worktree,
    worktree_detached_packed, worktree_main_side, submodule_style, sha256_repo,
]  # fmt: skip


@pytest.mark.parametrize("layout", READ_FROM_FILES, ids=lambda f: f.__name__)
def test_the_files_give_what_git_reports(
    layout: Callable[[Path], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = layout(tmp_path)
    expected = git_says(directory)
    assert expected is not None and len(expected) in (40, 64)

    def no_git(*args: object, **kwargs: object) -> None:
        raise AssertionError("git was run for a plain layout")

    monkeypatch.setattr(subprocess, "run", no_git)
    assert read_head(str(directory)) == expected
    assert head_commit(str(directory)) == expected
    monkeypatch.chdir(directory)
    assert head_commit() == expected  # the current directory


def unborn(tmp: Path) -> Path:
    path = tmp / "r"
    path.mkdir()
    git(path, "init", "-q")
    return path


def inside_git_dir(tmp: Path) -> Path:
    return repo(tmp / "r") / ".git" / "refs"


def bare(tmp: Path) -> Path:
    path = tmp / "bare.git"
    git(tmp, "init", "-q", "--bare", str(path))
    git(tmp, "clone", "-q", str(path), "clone")
    git(tmp / "clone", "commit", "-q", "--allow-empty", "-m", "x")
    git(tmp / "clone", "push", "-q", "origin", "HEAD:main")
    return path


def symbolic_branch(tmp: Path) -> Path:
    path = repo(tmp / "r")
    git(path, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    git(path, "symbolic-ref", "HEAD", "refs/heads/alias")
    return path


def unknown_extension(tmp: Path) -> Path:
    path = repo(tmp / "r")
    git(path, "config", "core.repositoryformatversion", "1")
    git(path, "config", "extensions.somethingnew", "true")
    return path


def broken_ref(tmp: Path) -> Path:
    path = repo(tmp / "r")
    (path / ".git" / "refs" / "heads" / "main").write_text("not a commit\n")
    return path


ASK_GIT: list[Callable[[Path], Path]] = [
    unborn, inside_git_dir, bare, symbolic_branch, unknown_extension, broken_ref,
]  # fmt: skip


@pytest.mark.parametrize("layout", ASK_GIT, ids=lambda f: f.__name__)
def test_unusual_layouts_are_left_to_git(layout: Callable[[Path], Path], tmp_path: Path) -> None:
    directory = layout(tmp_path)
    with pytest.raises(_Unsure):
        read_head(str(directory))
    assert head_commit(str(directory)) == git_says(directory)


def test_steering_variables_are_left_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = repo(tmp_path / "one"), repo(tmp_path / "two", commits=1)
    monkeypatch.setenv("GIT_DIR", str(two / ".git"))
    with pytest.raises(_Unsure):
        read_head(str(one))
    assert head_commit(str(one)) == git_says(one) == git_says(two)


def test_no_checkout_is_none_as_git_says(tmp_path: Path) -> None:
    outside = tmp_path / "plain" / "dir"
    outside.mkdir(parents=True)
    if git_says(outside) is not None:
        pytest.skip("tmp_path is inside a checkout here")
    assert read_head(str(outside)) is None
    assert head_commit(str(outside)) is None


def test_a_missing_git_gives_none_even_in_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = plain(tmp_path)
    monkeypatch.setenv("PATH", "")
    assert head_commit(str(path)) is None
    assert _fingerprint.git_commit(str(path)) is None


def test_a_checkout_of_another_user_is_left_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = plain(tmp_path)
    if os.geteuid() == 0:  # make it really someone else's: git refuses it (safe.directory)
        for name in [path, *path.rglob("*")]:
            os.chown(name, 54321, 54321)
    else:
        uid = os.geteuid() + 1
        monkeypatch.setattr(os, "geteuid", lambda: uid)
    with pytest.raises(_Unsure):
        read_head(str(path))
    assert head_commit(str(path)) == git_says(path)
