"""The bisection on throwaway repositories: few check runs, skips, flakes, aborts, a real check."""

from __future__ import annotations

import math
import shlex
import sys
from pathlib import Path

import pytest

from harness.bisect import Verdict, bisect, command_check, named_check
from harness.errors import HarnessError

from .repos import git, make_repo, rename_history, snapshot

N = 45
RENAME_AT = 29
CHECK = command_check(["sh", "-c", "! grep -q block_table_tensor base.py"])
"""Trivial stand-in for the override check: bad once base.py uses the new keyword."""


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("history") / "repo"
    return path, rename_history(path, N, RENAME_AT)


def test_finds_the_rename_in_few_check_runs(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    report = bisect(repo, shas[0], shas[-1], CHECK)
    assert report.status == "found" and report.confirmed
    assert report.first_bad is not None and report.first_bad.sha == shas[RENAME_AT - 1]
    assert report.first_bad.subject == f"commit {RENAME_AT}"
    assert report.first_bad.author == "Ada Tester <ada@example.com>"
    assert report.first_bad.date == "2025-05-13T12:00:00+00:00"
    assert report.parent is not None and report.parent.sha == shas[RENAME_AT - 2]
    assert report.num_commits == N - 1
    assert report.check_runs <= math.ceil(math.log2(N)) + 2
    assert [s.verdict for s in report.steps if s.commit.sha == report.first_bad.sha] in (
        [],
        [Verdict.BAD],
    )
    data = report.to_dict()
    assert data["first_bad"] == shas[RENAME_AT - 1] and data["skipped"] == []
    assert {"sha", "verdict", "seconds"} <= set(data["steps"][0])


def _skipping(broken: range) -> list[str]:
    """Exit 125 ("does not build") on commits whose log.txt holds a number in ``broken``."""
    numbers = " ".join(str(i) for i in broken)
    script = (
        f'n=$(cat log.txt); for b in {numbers}; do [ "$n" = "$b" ] && exit 125; done; '
        "! grep -q block_table_tensor base.py"
    )
    return ["sh", "-c", script]


def test_unbuildable_commits_are_skipped(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    broken = range(20, 27)  # unbuildable, all before the rename
    report = bisect(repo, shas[0], shas[-1], command_check(_skipping(broken)))
    assert report.status == "found" and report.first_bad is not None
    assert report.first_bad.sha == shas[RENAME_AT - 1]
    assert report.skipped and {c.subject for c in report.skipped} <= {f"commit {i}" for i in broken}
    assert all(s.verdict is Verdict.SKIP for s in report.steps if s.commit in report.skipped)


def test_a_culprit_among_skipped_commits_is_reported_as_ambiguous(
    history: tuple[Path, list[str]],
) -> None:
    repo, shas = history
    report = bisect(repo, shas[0], shas[-1], command_check(_skipping(range(27, 31))))
    assert report.status == "ambiguous" and report.first_bad is None
    assert shas[RENAME_AT - 1] in {c.sha for c in report.candidates}


def test_retries_tell_a_flaky_check_from_a_bad_commit(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """The check fails the first time it runs on each good commit, then passes; bad always fails."""
    repo, shas = history
    state = tmp_path / "state"
    state.mkdir()
    script = (
        "grep -q block_table_tensor base.py && exit 1; "
        f'f={shlex.quote(str(state))}/$(cat log.txt); [ -e "$f" ] && exit 0; touch "$f"; exit 1'
    )
    flaky = command_check(["sh", "-c", script])
    report = bisect(repo, shas[0], shas[-1], flaky, retries=1)
    assert report.status == "found" and report.confirmed
    assert report.first_bad is not None and report.first_bad.sha == shas[RENAME_AT - 1]
    assert any(s.flaky and s.verdict is Verdict.GOOD for s in report.steps)
    assert all(len(s.runs) == 2 for s in report.steps if s.verdict is Verdict.BAD)

    for f in state.iterdir():
        f.unlink()
    without = bisect(repo, shas[0], shas[-1], flaky, retries=0)
    assert without.first_bad != report.first_bad  # without retries the flake misleads it


def test_a_timeout_is_a_skip(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    slow = command_check(["sh", "-c", "sleep 5; exit 0"])
    report = bisect(repo, shas[RENAME_AT - 3], shas[RENAME_AT + 2], slow, timeout=0.3)
    assert report.status == "ambiguous"
    assert all(s.verdict is Verdict.SKIP and "timed out" in s.runs[0].note for s in report.steps)


def test_exit_128_aborts_and_a_missing_command_is_not_bad(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    report = bisect(repo, shas[0], shas[-1], command_check(["sh", "-c", "exit 130"]))
    assert report.status == "aborted" and len(report.steps) == 1
    report = bisect(repo, shas[0], shas[-1], command_check(["sh", "-c", "no-such-command-here"]))
    assert report.status == "aborted" and "cannot run" in report.abort_reason


def test_the_users_dirty_tree_stays_byte_identical(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shas = rename_history(repo, 12, 7)
    (repo / "sub.py").write_text("# edited, not committed\n")
    (repo / "untracked.txt").write_text("mine\n")
    (repo / "log.txt").write_text("staged\n")
    git(repo, "add", "log.txt")
    before = snapshot(repo)
    report = bisect(repo, shas[0], shas[-1], CHECK)
    assert report.first_bad is not None and report.first_bad.sha == shas[6]
    assert snapshot(repo) == before
    assert git(repo, "worktree", "list").count("\n") == 1


def test_the_real_overrides_check(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shas = rename_history(repo, 10, 6)
    report = bisect(repo, shas[0], shas[-1], named_check("overrides"))
    assert report.status == "found" and report.confirmed
    assert report.first_bad is not None and report.first_bad.sha == shas[5]
    assert report.culprit_run is not None and "HO101" in report.culprit_run.note
    assert report.parent_run is not None and report.parent_run.verdict is Verdict.GOOD


@pytest.mark.parametrize(
    ("good", "bad", "error"),
    [
        ("HEAD", "HEAD", "the same commit"),
        ("HEAD", "HEAD~3", "is not an ancestor"),
        ("nope", "HEAD", "'nope' is not a commit"),
    ],
)
def test_bad_revisions_are_clear_errors(
    history: tuple[Path, list[str]], good: str, bad: str, error: str
) -> None:
    with pytest.raises(HarnessError, match=error):
        bisect(history[0], good, bad, CHECK)


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="not a git repository"):
        bisect(tmp_path, "a", "b", CHECK)
    with pytest.raises(HarnessError, match="unknown check 'lint'"):
        named_check("lint")


def test_pytest_check_selects_by_expression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def files(i: int) -> dict[str, str]:
        value = 2 if i < 4 else 3
        return {
            "mod.py": f"VALUE = {value}\n",
            "test_mod.py": "from mod import VALUE\n\n\n"
            "def test_value():\n    assert VALUE == 2\n\n\ndef test_other():\n    pass\n",
        }

    repo = tmp_path / "repo"
    shas = make_repo(repo, 6, files)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the check's pytest starts faster
    report = bisect(repo, shas[0], shas[-1], named_check("pytest:test_value"))
    assert report.first_bad is not None and report.first_bad.sha == shas[3], report.format()
    assert sys.executable in named_check("pytest:test_mod.py::test_value").argv


def test_a_merged_side_branch_is_bisected_too(tmp_path: Path) -> None:
    """Non-linear history: the rename lands on a side branch that is merged later."""
    repo = tmp_path / "repo"
    shas = rename_history(repo, 4, 99)  # main: commits 1-4, no rename yet
    git(repo, "checkout", "-q", "-b", "side", shas[1])
    (repo / "base.py").write_text(
        (repo / "base.py").read_text().replace("block_table", "block_table_tensor")
    )
    git(repo, "commit", "-qam", "side: rename")
    culprit = git(repo, "rev-parse", "HEAD").strip()
    (repo / "side.txt").write_text("more\n")
    git(repo, "add", "side.txt")
    git(repo, "commit", "-qm", "side: more")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    (repo / "log.txt").write_text("after\n")
    git(repo, "commit", "-qam", "after the merge")
    report = bisect(repo, shas[0], "HEAD", CHECK)
    assert report.status == "found" and report.confirmed
    assert report.first_bad is not None and report.first_bad.sha == culprit
