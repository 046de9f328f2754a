"""The temporary worktree: removed whatever happens, and the user's hooks never run."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from harness.bisect.worktree import commit, temporary_worktree, toplevel
from harness.errors import HarnessError

from .repos import git, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    make_repo(path, 3, lambda i: {"f.txt": f"{i}\n"})
    return path


def test_removed_on_error_and_hooks_do_not_run(repo: Path, tmp_path: Path) -> None:
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {tmp_path / 'hook-ran'}\n")
    hook.chmod(0o755)
    with pytest.raises(RuntimeError, match="boom"), temporary_worktree(repo, "HEAD~1") as tree:
        assert (tree / "f.txt").read_text() == "2\n"
        raise RuntimeError("boom")
    assert not tree.exists() and not tree.parent.exists()
    assert git(repo, "worktree", "list").count("\n") == 1
    assert not (tmp_path / "hook-ran").exists()


def test_commit_info_and_toplevel(repo: Path) -> None:
    info = commit(repo, "HEAD")
    assert info.subject == "commit 3" and info.author == "Ada Tester <ada@example.com>"
    assert toplevel(repo / ".git" / "..") == repo.resolve()
    with pytest.raises(HarnessError, match="no such directory"):
        toplevel(repo / "nope")


def _git_killed_on_remove(bin_dir: Path, *, times: int) -> None:
    """A ``git`` first on PATH that dies of SIGINT on its first ``times`` ``worktree remove``
    calls (as when the terminal's Ctrl-C reaches it), and is the real git otherwise."""
    real = shutil.which("git")
    assert real is not None
    bin_dir.mkdir()
    count = bin_dir / "count"
    count.write_text("0")
    script = bin_dir / "git"
    script.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" worktree remove "*)\n'
        f"  n=$(cat {shlex.quote(str(count))}); echo $((n + 1)) > {shlex.quote(str(count))}\n"
        f'  [ "$n" -lt {times} ] && kill -INT $$ ;;\n'
        "esac\n"
        f'exec {shlex.quote(str(real))} "$@"\n'
    )
    script.chmod(0o755)


@pytest.mark.parametrize("times", [1, 1000])
def test_git_killed_during_removal_still_leaves_nothing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, times: int
) -> None:
    bin_dir = tmp_path / "bin"
    _git_killed_on_remove(bin_dir, times=times)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with temporary_worktree(repo, "HEAD~1") as tree:
        assert (tree / "f.txt").read_text() == "2\n"
    assert int((bin_dir / "count").read_text()) >= 1  # git really was killed at least once
    assert not tree.exists() and not tree.parent.exists()
    assert git(repo, "worktree", "list").count("\n") == 1
    assert not (repo / ".git" / "worktrees").exists() or not any(
        (repo / ".git" / "worktrees").iterdir()
    )
