"""The temporary worktree: removed whatever happens, and the user's hooks never run."""

from __future__ import annotations

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
