"""``harness overrides --since REF``: only the findings HEAD adds, REF's tree never checked out."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness import cli
from harness.overrides import since

BASE = """\
class AttentionMetadataBuilder:
    def build(self, common_prefix_len, common_attn_metadata):
        raise NotImplementedError

    def build_for_cudagraph_capture(self, common_attn_metadata):
        raise NotImplementedError
"""
OLD_DRIFT = """\
from pkg.base import AttentionMetadataBuilder


class FlashInferMetadataBuilder(AttentionMetadataBuilder):
    def build(self, prefix_len, common_attn_metadata):
        return prefix_len
"""
NEW_DRIFT = """\
from pkg.base import AttentionMetadataBuilder


class TritonMetadataBuilder(AttentionMetadataBuilder):
    def build_for_cudagraph_capture(self, metadata):
        return metadata
"""
GIT = ("git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci")

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is not installed",
)


def _git(repo: Path, *argv: str) -> str:
    return subprocess.run(
        [*GIT, "-C", str(repo), *argv], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """REF (tag `ref`) has one drift; HEAD moves it down 3 lines and adds another."""
    root = tmp_path / "repo"
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text(BASE)
    (pkg / "flashinfer.py").write_text(OLD_DRIFT)
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(root)], check=True)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "ref")
    _git(root, "tag", "ref")
    (pkg / "flashinfer.py").write_text("# moved\n\n\n" + OLD_DRIFT)  # a line move: not new
    (pkg / "triton.py").write_text(NEW_DRIFT)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "head")
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return root


def test_only_the_added_finding_is_reported_with_todays_exit_codes(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["overrides", "--fail-on", "warning", "pkg"]) == 1
    everything = capsys.readouterr().out
    assert "FlashInferMetadataBuilder" in everything and "TritonMetadataBuilder" in everything

    status_before = _git(repo, "status", "--porcelain")
    assert cli.main(["overrides", "--fail-on", "warning", "--since", "ref", "pkg"]) == 1
    out, err = capsys.readouterr()
    assert "TritonMetadataBuilder" in out
    assert "FlashInferMetadataBuilder" not in out  # at REF already, though its lines moved
    assert "--since ref (" in err and "1 finding(s) added, 1 already at ref not shown" in err
    assert cli.main(["overrides", "--since", "ref", "pkg"]) == 0  # a warning: exit 0 as today
    capsys.readouterr()
    # The checkout is untouched: same status, same HEAD, no worktree added.
    assert _git(repo, "status", "--porcelain") == status_before
    assert _git(repo, "worktree", "list").count("\n") == 0
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"


def test_since_head_reports_nothing_and_ref_findings_are_cached_by_tree_hash(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli.main(["overrides", "--fail-on", "warning", "--since", "HEAD", "pkg"]) == 0
    assert capsys.readouterr().out.count("MetadataBuilder") == 0
    tree = _git(repo, "rev-parse", "HEAD^{tree}")
    cached = list(
        (Path(os.environ["XDG_CACHE_HOME"]) / "harness" / "since" / "overrides").glob(f"{tree}-*")
    )
    assert len(cached) == 1

    def no_export(*args: object) -> None:
        raise AssertionError("REF's tree was exported again")

    monkeypatch.setattr(since, "export", no_export)
    assert cli.main(["overrides", "--fail-on", "warning", "--since", "HEAD", "pkg"]) == 0


def test_the_since_cache_keeps_the_most_recently_used_entries_and_drops_the_old_format(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each REF tree adds an entry: without pruning the cache grew with every ``--since``."""
    directory = Path(os.environ["XDG_CACHE_HOME"]) / "harness" / "since"
    entries = directory / "overrides"
    entries.mkdir(parents=True)
    old = [entries / f"{n:040x}-{n:016x}.bin" for n in range(1, 71)]  # 70 older REF trees
    for age, path in enumerate(old):
        path.write_bytes(b"stale")
        os.utime(path, (1_000_000 - age, 1_000_000 - age))  # old[0] the most recent
    legacy = directory / f"{'ab' * 20}-{'cd' * 8}.json"  # written before the framed format
    foreign = [entries / "notes.txt", directory / "keep-me.json"]
    for path in [legacy, *foreign]:
        path.write_text("{}")

    assert cli.main(["overrides", "--since", "ref", "pkg"]) == 0
    capsys.readouterr()
    tree = _git(repo, "rev-parse", "ref^{tree}")
    (new,) = entries.glob(f"{tree}-*.bin")
    kept = set(entries.glob("*.bin"))
    assert kept == {new, *old[: since._KEEP - 1]}  # the newest, and the 63 most recent others
    assert not legacy.exists() and all(path.exists() for path in foreign)

    os.utime(new, (1, 1))  # now the oldest: a cache hit marks it used again
    monkeypatch.setattr(since, "export", lambda *args: pytest.fail("REF exported again"))
    assert cli.main(["overrides", "--since", "ref", "pkg"]) == 0
    assert new.stat().st_mtime > 1_000_000


def test_a_path_new_since_ref_has_no_ref_findings(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "newpkg").mkdir()
    (repo / "newpkg" / "__init__.py").write_text("")
    (repo / "newpkg" / "base.py").write_text(BASE)
    (repo / "newpkg" / "triton.py").write_text(NEW_DRIFT.replace("pkg.base", "newpkg.base"))
    assert cli.main(["overrides", "--fail-on", "warning", "--since", "ref", "newpkg"]) == 1
    assert "TritonMetadataBuilder" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "no-such-ref", "pkg"], "--since no-such-ref: no such commit in "),
        (["--since", "ref", "--changed", "pkg/triton.py"], "--since needs a whole-tree run"),
        (["--since=-x", "pkg"], "--since -x: not a git revision"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    repo: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert cli.main(["overrides", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_outside_a_repository_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "m.py").write_text(BASE)
    monkeypatch.chdir(tmp_path / "plain")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert cli.main(["overrides", "--since", "main", "."]) == 2
    assert "--since needs a git repository" in capsys.readouterr().err


@pytest.mark.parametrize("commit", [False, True], ids=["staged", "committed"])
def test_a_file_moved_with_git_mv_keeps_its_findings_at_ref(
    repo: Path, capsys: pytest.CaptureFixture[str], commit: bool
) -> None:
    """README: moved code is not new (issue 27, bug 5: a `git mv` made it "added")."""
    _git(repo, "mv", "pkg/flashinfer.py", "pkg/fi.py")
    if commit:
        _git(repo, "commit", "-qm", "move")
    assert cli.main(["overrides", "--fail-on", "warning", "--since", "ref", "pkg"]) == 1
    out, err = capsys.readouterr()
    assert "TritonMetadataBuilder" in out and "FlashInferMetadataBuilder" not in out
    assert "1 finding(s) added, 1 already at ref not shown" in err
    _git(repo, "rm", "-q", "pkg/triton.py")  # the only new finding gone: nothing is added
    assert cli.main(["overrides", "--fail-on", "warning", "--since", "ref", "pkg"]) == 0
    assert "FlashInferMetadataBuilder" not in capsys.readouterr().out


def test_a_moved_file_level_finding_is_not_new(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "pkg" / "broken.py").write_text("def broken(:\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "broken")
    _git(repo, "tag", "ref2")
    _git(repo, "mv", "pkg/broken.py", "pkg/still_broken.py")
    assert cli.main(["overrides", "--fail-on", "warning", "--since", "ref2", "pkg"]) == 0
    out, err = capsys.readouterr()
    assert "still_broken.py" not in out and "0 finding(s) added" in err


def test_a_blocked_since_run_shows_the_error_and_counts_the_warnings(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28, item 4: the added error first, the added warning as a one-line count."""
    (repo / "pkg" / "repro.py").write_text(
        "class A:\n    def f(self, a, b):\n        return a\n\n"
        "    def g(self):\n        return self.f(1, b=2)\n\n\n"
        "class B(A):\n    def f(self, a, bb):\n        return a\n"
    )
    assert cli.main(["overrides", "--since", "ref", "pkg"]) == 1
    out = capsys.readouterr().out
    assert "repro.py" in out and "TritonMetadataBuilder" not in out
    assert out.splitlines()[-1].startswith("harness overrides: 1 more finding(s) below")
