"""Throwaway git repositories for the bisect tests, built commit by commit in a temporary dir."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

ENV = {
    "GIT_AUTHOR_NAME": "Ada Tester",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada Tester",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_AUTHOR_DATE": "2025-05-13T12:00:00+00:00",
    "GIT_COMMITTER_DATE": "2025-05-13T12:00:00+00:00",
}


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity; returns stdout."""
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def make_repo(path: Path, num_commits: int, files: Callable[[int], dict[str, str]]) -> list[str]:
    """A linear history on ``main``: commit ``i`` (1-based, subject ``commit i``) sets the files
    ``files(i)`` names (others stay). One ``git fast-import`` run; the tree is then checked out.
    Returns the shas, oldest first."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    stream: list[str] = []
    for i in range(1, num_commits + 1):
        message = f"commit {i}\n"
        stream += [
            "commit refs/heads/main",
            f"mark :{i}",
            "author Ada Tester <ada@example.com> 1747137600 +0000",
            "committer Ada Tester <ada@example.com> 1747137600 +0000",
            f"data {len(message.encode())}",
            message.rstrip("\n"),
        ]
        for name, text in files(i).items():
            stream += ["M 100644 inline " + name, f"data {len(text.encode())}", text]
    subprocess.run(
        ["git", "fast-import", "--quiet"],
        cwd=path,
        input="\n".join(stream) + "\n",
        text=True,
        check=True,
        env={**os.environ, **ENV},
    )
    git(path, "checkout", "-q", "-f", "main")
    return git(path, "rev-list", "--reverse", "main").split()


BASE = """\
class Builder:
    def build(self):
        return self._build_decode({kw}=[1], seq_lens=[2])

    def _build_decode(self, {kw}, seq_lens):
        return {kw}, seq_lens
"""
SUB = """\
from base import Builder


class AiterBuilder(Builder):
    def _build_decode(self, block_table, seq_lens):
        return block_table, seq_lens
"""


def rename_history(path: Path, num_commits: int, rename_at: int) -> list[str]:
    """``base.py`` renames ``block_table`` to ``block_table_tensor`` in commit ``rename_at``
    (and calls it by keyword); ``sub.py`` keeps the old name throughout: vLLM PR #17483 in small.
    Every commit also touches ``log.txt``."""

    def files(i: int) -> dict[str, str]:
        kw = "block_table_tensor" if i >= rename_at else "block_table"
        return {"base.py": BASE.format(kw=kw), "sub.py": SUB, "log.txt": f"{i}\n"}

    return make_repo(path, num_commits, files)


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (``.git`` included, linked-worktree admin dirs excluded)."""
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and ".git/worktrees" not in p.as_posix()
    }
