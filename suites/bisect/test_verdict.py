"""The exit-code contract, checked against ``git bisect run`` itself on a throwaway repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.bisect.verdict import (
    EXIT_BAD_MAX,
    EXIT_BAD_MIN,
    EXIT_GOOD,
    EXIT_SKIP,
    Verdict,
    verdict_of,
)

from .repos import git, make_repo


def test_named_constants() -> None:
    assert (EXIT_GOOD, EXIT_SKIP, EXIT_BAD_MIN, EXIT_BAD_MAX) == (0, 125, 1, 127)


@pytest.fixture(scope="module")
def three_commits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("contract")
    return path, make_repo(path, 3, lambda i: {"f": f"{i}\n"})


def _git_bisect_run(repo: Path, shas: list[str], status: int) -> Verdict:
    """What real ``git bisect run`` makes of ``status`` for the middle commit."""
    git(repo, "bisect", "start", shas[2], shas[0])
    try:
        done = subprocess.run(
            # `status` on the middle commit only: git re-runs 126/127 on the good commit to tell
            # "command not found" from bad, and that run must pass.
            ["git", "bisect", "run", "sh", "-c", f"grep -q 2 f && exit {status}; exit 0"],
            cwd=repo,
            capture_output=True,
            text=True,
        )
    finally:
        git(repo, "bisect", "reset")
    out = done.stdout + done.stderr
    if f"{shas[1]} is the first bad commit" in out:
        return Verdict.BAD
    if f"{shas[2]} is the first bad commit" in out:
        return Verdict.GOOD
    if "only 'skip'ped commits left" in out:
        return Verdict.SKIP
    assert "bisect run failed" in out, out
    return Verdict.ABORT


@pytest.mark.parametrize("status", [0, 1, 2, 124, 125, 126, 127, 128, 129, 255])
def test_verdict_of_matches_git_bisect_run(
    three_commits: tuple[Path, list[str]], status: int
) -> None:
    repo, shas = three_commits
    assert verdict_of(status) is _git_bisect_run(repo, shas, status)


def test_killed_by_a_signal_aborts() -> None:
    assert verdict_of(-9) is Verdict.ABORT
