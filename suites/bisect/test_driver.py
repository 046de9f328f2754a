"""The bisection on throwaway repositories: few check runs, skips, flakes, aborts, a real check."""

from __future__ import annotations

import math
import re
import shlex
import sys
from pathlib import Path

import pytest

from harness.bisect import Verdict, bisect, command_check, named_check
from harness.errors import HarnessError

from .repos import BASE, SUB, git, make_repo, rename_history, snapshot

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


@pytest.mark.parametrize("broken_in", ["every commit", "the middle only"])
def test_a_file_unparsable_at_both_ends_cannot_hide_the_culprit(
    tmp_path: Path, broken_in: str
) -> None:
    """A parser's test fixture, unparsable in every commit, made every step a skip and the
    bisection "ambiguous" (issue 27); judged on the rest of the tree, the rename is found. A
    file unparsable in the middle only may hide it: those steps stay skips."""

    def files(i: int) -> dict[str, str]:
        kw = "block_table_tensor" if i >= 6 else "block_table"
        broken = broken_in == "every commit" or 3 <= i <= 8
        fixture = {"fixtures/broken.py": "def broken(:\n"} if broken else {}
        return {"base.py": BASE.format(kw=kw), "sub.py": SUB, **fixture, "log.txt": f"{i}\n"}

    repo = tmp_path / "repo"
    shas = make_repo(repo, 10, files)
    report = bisect(repo, shas[0], shas[-1], named_check("overrides"))
    if broken_in == "every commit":
        assert report.status == "found" and report.confirmed, report.format()
        assert report.first_bad is not None and report.first_bad.sha == shas[5]
        assert not report.skipped and report.parent_run is not None
        assert "as at both ends: judged on the rest" in report.parent_run.note
        assert report.check_runs <= len(report.steps) + 3  # the ends once, the parent if unrun
    else:
        assert report.skipped and report.status != "found", report.format()
        assert all(
            "unparsable" in s.runs[-1].note for s in report.steps if s.commit in report.skipped
        )


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


def test_a_pytest_check_without_pytest_cannot_be_executed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a light install every step failed with "No module named pytest" and the first commit
    was named the culprit; it is "cannot be executed", as a missing command is (issue 27, bug 7).
    """
    light = tmp_path / "python-without-site-packages"
    light.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "$@"\n')
    light.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(light))
    repo = tmp_path / "repo"
    shas = make_repo(repo, 6, lambda i: {"test_mod.py": "def test_value():\n    pass\n"})
    report = bisect(repo, shas[0], shas[-1], named_check("pytest:test_value"))
    assert report.status == "aborted" and report.first_bad is None, report.format()
    assert report.abort_reason.startswith(
        "the check cannot be executed: No module named pytest (at "
    ), report.abort_reason
    assert f"; install what is missing for {light}" in report.abort_reason
    assert len(report.steps) == 1 and report.check_runs == 2


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


SHADOWS = ("ast", "tokenize", "inspect", "dataclasses", "json", "sitecustomize")
"""Standard-library names a tree may hold at its root (each writes a marker when imported)."""


def test_the_overrides_check_never_runs_the_trees_code(tmp_path: Path) -> None:
    """A root-level ``ast.py`` must not shadow the standard library in the checker's process."""
    ran = tmp_path / "ran"
    ran.mkdir()

    def files(i: int) -> dict[str, str]:
        kw = "block_table_tensor" if i >= 6 else "block_table"
        shadows = {f"{name}.py": f"open({str(ran / name)!r}, 'w').close()\n" for name in SHADOWS}
        return {"base.py": BASE.format(kw=kw), "sub.py": SUB, **shadows}

    repo = tmp_path / "repo"
    shas = make_repo(repo, 10, files)
    report = bisect(repo, shas[0], shas[-1], named_check("overrides"))
    assert sorted(p.name for p in ran.iterdir()) == []
    assert report.status == "found" and report.confirmed, report.format()
    assert report.first_bad is not None and report.first_bad.sha == shas[5]
    assert not report.skipped


def _check_script(repo: Path, name: str, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path = repo / name
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("argv", "setup", "reason"),
    [
        (["/nonexistent/cmd"], None, "cannot run /nonexistent/cmd: No such file or directory"),
        (["no-such-command-anywhere"], None, "cannot run no-such-command-anywhere: No such file"),
        (
            ["./my_check.sh"],
            "untracked",
            "./my_check.sh is in the repository but not in its commits",
        ),
        (["./tracked.sh"], "not-executable", "cannot run ./tracked.sh: Permission denied"),
        (["tracked.sh"], "not-executable", "tracked.sh is not on PATH, but the checkout has one"),
    ],
)
def test_a_check_that_cannot_be_executed_aborts_at_once(
    tmp_path: Path, argv: list[str], setup: str | None, reason: str
) -> None:
    repo = tmp_path / "repo"

    def files(i: int) -> dict[str, str]:
        kw = "block_table_tensor" if i >= 11 else "block_table"
        script = {"tracked.sh": "#!/bin/sh\nexit 0\n"} if setup == "not-executable" else {}
        return {"base.py": BASE.format(kw=kw), "sub.py": SUB, **script}  # mode 644

    shas = make_repo(repo, 20, files)
    if setup == "untracked":
        _check_script(repo, "my_check.sh")
    report = bisect(repo, shas[0], shas[-1], command_check(argv))
    assert report.status == "aborted", report.format()
    assert reason in report.abort_reason
    assert len(report.steps) == 1 and report.check_runs <= 2, report.format()


def test_the_users_other_worktrees_are_never_pruned(tmp_path: Path) -> None:
    """A linked worktree whose directory is missing for now (an unmounted drive) keeps its
    admin data: bisect removes its own worktree and nothing else."""
    repo = tmp_path / "repo"
    shas = rename_history(repo, 8, 5)
    other = tmp_path / "drive" / "other"
    git(repo, "worktree", "add", "-q", "--detach", str(other), shas[2])
    other.parent.rename(tmp_path / "unmounted")
    admin = sorted((repo / ".git" / "worktrees").iterdir())
    assert [p.name for p in admin] == ["other"]
    report = bisect(repo, shas[0], shas[-1], CHECK)
    assert report.status == "found"
    assert sorted((repo / ".git" / "worktrees").iterdir()) == admin
    (tmp_path / "unmounted").rename(other.parent)
    assert str(other) in git(repo, "worktree", "list")
    assert "prunable" not in git(repo, "worktree", "list", "--porcelain")


def test_a_bad_end_that_passes_is_not_found(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    report = bisect(repo, shas[0], shas[RENAME_AT - 3], CHECK)  # no rename yet at --bad
    assert report.status == "bad-passes" and not report.confirmed, report.format()
    assert report.to_dict()["status"] == "bad-passes"
    assert "the check passes at --bad" in report.format()


def test_a_bare_repository_is_bisected(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shas = rename_history(repo, 10, 4)
    bare = tmp_path / "repo.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    before = snapshot(bare)
    report = bisect(bare, shas[0], shas[-1], CHECK)
    assert report.status == "found" and report.first_bad is not None
    assert report.first_bad.sha == shas[3]
    assert snapshot(bare) == before and not (bare / "worktrees").exists()
    with pytest.raises(HarnessError, match=r"inside the \.git directory of .*repo; give"):
        bisect(repo / ".git", shas[0], shas[-1], CHECK)


@pytest.mark.parametrize(
    ("timeout", "retries", "error"),
    [
        (math.nan, 0, "--timeout must be a positive number of seconds"),
        (math.inf, 0, "--timeout must be a positive number of seconds"),
        (-1.0, 0, "--timeout must be a positive number of seconds"),
        (1e300, 0, "--timeout must be at most"),
        (None, 10**20, "--retries must be at most 100"),
        (None, -1, "--retries must be 0 or more"),
    ],
)
def test_bad_numbers_are_clear_errors(
    history: tuple[Path, list[str]], timeout: float | None, retries: int, error: str
) -> None:
    repo, shas = history
    with pytest.raises(HarnessError, match=re.escape(error)):
        bisect(repo, shas[0], shas[-1], CHECK, timeout=timeout, retries=retries)


def test_a_check_that_deletes_its_worktree_is_a_clear_error(
    history: tuple[Path, list[str]],
) -> None:
    repo, shas = history
    vandal = command_check(["sh", "-c", 'rm -rf "$PWD"; exit 1'])
    with pytest.raises(HarnessError, match=r"tree is gone \(did the check delete its worktree\?\)"):
        bisect(repo, shas[0], shas[-1], vandal)
    assert git(repo, "worktree", "list").count("\n") == 1
