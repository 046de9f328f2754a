"""Git plumbing for bisect: read-only queries on the user's repository, and a temporary worktree.

The user's working tree, index and HEAD are never touched: anything checked out lives in a
detached worktree under the temporary directory, removed on success, failure and Ctrl-C, with
hooks disabled. How the removal survives Ctrl-C is in ``docs/bisect.md``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.process import signals_held

NO_HOOKS = ("-c", f"core.hooksPath={os.devnull}")


REMOVE_ATTEMPTS = 3
ANY_STATUS = range(-64, 256)
"""Every exit status, a death by signal (negative) included."""


def git(
    args: Sequence[str], cwd: Path, *, ok: Sequence[int] = (0,), own_session: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``git args`` in ``cwd``; an exit status outside ``ok`` is a :class:`HarnessError`.
    ``own_session``: out of the terminal's process group, so its Ctrl-C does not reach git."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            ["git", *NO_HOOKS, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            env=env,
            start_new_session=own_session,
        )
    except FileNotFoundError:
        if not cwd.is_dir():
            raise HarnessError(f"{cwd} is gone (did the check delete its worktree?)") from None
        raise HarnessError("git is not installed (bisect needs it on PATH)") from None
    if done.returncode not in ok:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise HarnessError(
            f"git {' '.join(args)} failed: {message[-1] if message else done.returncode}"
        )
    return done


@dataclass(frozen=True, slots=True)
class Commit:
    """A commit as the report names it."""

    sha: str
    subject: str
    author: str
    date: str
    """ISO 8601, the author date."""

    @property
    def short(self) -> str:
        return self.sha[:12]


def commit(repo: Path, rev: str) -> Commit:
    """The commit ``rev`` names in ``repo``."""
    out = git(["log", "-1", "--format=%H%x00%s%x00%an <%ae>%x00%aI", rev, "--"], repo).stdout
    sha, subject, author, date = out.rstrip("\n").split("\0")
    return Commit(sha, subject, author, date)


def resolve(repo: Path, rev: str) -> str:
    """The full sha of commit ``rev`` (a clear error for anything that is not one)."""
    done = git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], repo, ok=(0, 1))
    if done.returncode:
        raise HarnessError(f"{rev!r} is not a commit in {repo}")
    return done.stdout.strip()


def toplevel(path: Path) -> Path:
    """The root of the repository holding ``path`` (a bare repository: its own directory)."""
    if not path.is_dir():
        raise HarnessError(f"--repo {path}: no such directory")
    done = git(["rev-parse", "--is-bare-repository", "--absolute-git-dir"], path, ok=(0, 128))
    if done.returncode:
        raise HarnessError(f"--repo {path}: not a git repository")
    bare, git_dir = done.stdout.split("\n")[:2]
    if bare == "true":
        return Path(git_dir)
    done = git(["rev-parse", "--show-toplevel"], path, ok=(0, 128))
    if done.returncode:  # inside a non-bare repository's .git directory
        common = git(["rev-parse", "--git-common-dir"], path).stdout.strip()
        owner = (path / common).resolve().parent
        raise HarnessError(
            f"--repo {path} is inside the .git directory of {owner}; give the working tree"
        )
    return Path(done.stdout.strip())


@contextlib.contextmanager
def temporary_worktree(repo: Path, rev: str) -> Generator[Path, None, None]:
    """A detached worktree of ``repo`` at ``rev`` in a new temporary directory; removed on exit,
    whatever the exit (Ctrl-C during the removal is held back until it is done)."""
    parent = Path(tempfile.mkdtemp(prefix="harness-bisect-"))
    tree = parent / "tree"
    try:
        git(["worktree", "add", "--detach", "--quiet", str(tree), rev], repo)
        yield tree
    finally:
        with signals_held():
            _remove(repo, parent, tree)


def _remove(repo: Path, parent: Path, tree: Path) -> None:
    """Unregister and delete our worktree whatever happens to git; never touches another one."""
    remove = ["worktree", "remove", "--force", "--force", str(tree)]
    for _ in range(REMOVE_ATTEMPTS):
        if git(remove, repo, ok=ANY_STATUS, own_session=True).returncode == 0:
            break
    shutil.rmtree(parent, ignore_errors=True)
    admin = _admin_dir(repo, tree)
    if admin is not None:  # git failed: now that the directory is gone, once more, then by hand
        git(remove, repo, ok=ANY_STATUS, own_session=True)
        if admin.exists():
            shutil.rmtree(admin, ignore_errors=True)


def _admin_dir(repo: Path, tree: Path) -> Path | None:
    """The repository's registration of ``tree`` (``<git dir>/worktrees/<name>``, whose
    ``gitdir`` file names ``tree/.git``), if it still has one."""
    done = git(["rev-parse", "--git-common-dir"], repo, ok=ANY_STATUS)
    worktrees = repo / done.stdout.strip() / "worktrees"  # relative to ``repo`` unless absolute
    if done.returncode or not worktrees.is_dir():
        return None
    for admin in worktrees.iterdir():
        try:
            gitdir = (admin / "gitdir").read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if Path(gitdir) == tree / ".git":
            return admin
    return None
