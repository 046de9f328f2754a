"""The ``strict-overrides`` pre-commit hook, installed the way another repository installs it.

A throwaway git repository gets a git ``pre-commit`` hook that runs ``pre-commit try-repo`` on a
snapshot of this checkout (its hook definition and its package, uncommitted edits included).
pre-commit builds the hook's environment with ``pip install`` from the package index, so those
tests are in the integration tier, and skip with the reason when the index cannot be reached.
The fast tier runs the hook's command line as pre-commit assembles it (the manifest's entry, the
user's ``args:``, the staged files) in this process.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import cli

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT_FILES = ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml")


BASE = """\
class MLACommonMetadataBuilder:
    def _build_decode(self, block_table, seq_lens):
        return block_table, seq_lens

    def build(self, block_table, seq_lens):
        return self._build_decode(block_table=block_table, seq_lens=seq_lens)
"""
SUBCLASS = """\
from pkg.common import MLACommonMetadataBuilder


class AiterMLAMetadataBuilder(MLACommonMetadataBuilder):
    def _build_decode(self, block_table, seq_lens):
        return block_table, seq_lens
"""
WARNED = """\
from pkg.common import MLACommonMetadataBuilder


class Other(MLACommonMetadataBuilder):
    def build(self, table, seq_lens):  # drift no call of the project proves: a warning
        return table, seq_lens
"""


def _hook_argv(args: list[str], files: list[str]) -> list[str]:
    """What pre-commit runs: the manifest's entry, then the user's args, then the files."""
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    entry = shlex.split(hook["entry"])
    assert entry[0] == "harness"
    return [*entry[1:], *args, *files]


@pytest.mark.parametrize(
    ("args", "expected"),
    [([], "pkg/rocm.py:5:5: HO101"), (["--format", "github"], "::error file=pkg/rocm.py")],
    ids=["text", "github"],
)
def test_the_hooks_command_line_blocks_a_keyword_rename(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    expected: str,
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "common.py").write_text(BASE.replace("block_table", "block_table_tensor"))
    (tmp_path / "pkg" / "rocm.py").write_text(SUBCLASS)
    monkeypatch.chdir(tmp_path)
    assert cli.main(_hook_argv([*args, "--no-cache"], ["pkg/common.py"])) == 1
    assert expected in capsys.readouterr().out


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def _index_unreachable(tmp: Path) -> str | None:
    """Why pip cannot fetch the hook's build requirements here, or ``None`` if it can."""
    out = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(tmp)),
            *("--timeout", "15", "--retries", "1", "setuptools>=68"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if out.returncode == 0:
        return None
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[-1] if lines else f"pip download exited {out.returncode}"


def _init(path: Path) -> None:
    path.mkdir()
    _git("init", "-q", cwd=path)
    _git("config", "user.email", "ci@example.invalid", cwd=path)
    _git("config", "user.name", "ci", cwd=path)
    _git("config", "commit.gpgsign", "false", cwd=path)


@pytest.fixture
def user_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository whose commits run this checkout's hook through ``pre-commit try-repo``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    reason = _index_unreachable(tmp_path / "download")
    if reason is not None:
        pytest.skip(f"package index unreachable (pre-commit pip-installs the hook): {reason}")
    # The hook environment lives here, never in the user's ~/.cache/pre-commit.
    monkeypatch.setenv("PRE_COMMIT_HOME", str(tmp_path / "pre-commit-home"))
    monkeypatch.setenv("PRE_COMMIT_COLOR", "never")
    snapshot = tmp_path / "harness-snapshot"
    _init(snapshot)
    for name in SNAPSHOT_FILES:
        shutil.copy2(ROOT / name, snapshot / name)
    shutil.copytree(
        ROOT / "harness", snapshot / "harness", ignore=shutil.ignore_patterns("__pycache__")
    )
    _git("add", "-A", cwd=snapshot)
    assert _git("commit", "-qm", "snapshot", cwd=snapshot).returncode == 0
    rev = _git("rev-parse", "HEAD", cwd=snapshot).stdout.strip()

    repo = tmp_path / "user-repo"
    _init(repo)
    (repo / "pkg").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "common.py").write_text(BASE)
    (repo / "pkg" / "rocm.py").write_text(SUBCLASS)
    _git("add", "-A", cwd=repo)
    assert _git("commit", "-qm", "initial (no hook yet)", cwd=repo).returncode == 0

    pre_commit = Path(sys.executable).parent / "pre-commit"
    command = [str(pre_commit), "try-repo", str(snapshot), "strict-overrides", "--ref", rev]
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\nexec {shlex.join(command)}\n")
    hook.chmod(0o755)
    # What a user writes to pass `args:` (run by hand in the test; the git hook is try-repo's).
    (repo / ".git" / "with-args.yaml").write_text(
        f"repos:\n  - repo: {snapshot}\n    rev: {rev}\n    hooks:\n"
        "      - id: strict-overrides\n        args: [--format, github]\n"
    )
    return repo


def _commit(repo: Path, path: str, message: str) -> tuple[str, bool]:
    """Stage ``path`` and commit; returns the hook's output and whether HEAD moved."""
    before = _git("rev-parse", "HEAD", cwd=repo).stdout
    _git("add", path, cwd=repo)
    out = _git("commit", "-m", message, cwd=repo)
    return out.stdout + out.stderr, _git("rev-parse", "HEAD", cwd=repo).stdout != before


@pytest.mark.integration
def test_the_hook_passes_a_clean_commit_and_rejects_a_keyword_rename(user_repo: Path) -> None:
    common = user_repo / "pkg" / "common.py"
    common.write_text('"""Metadata builders."""\n\n' + BASE)
    text, committed = _commit(user_repo, "pkg/common.py", "docstring")
    assert committed, text
    assert "strict override checker" in text and "Passed" in text

    # vLLM #17483: the base renames block_table -> block_table_tensor and calls it by keyword;
    # the subclass, in a file this commit does not touch, kept the old name.
    renamed = common.read_text().replace("block_table", "block_table_tensor")
    common.write_text(renamed)
    text, committed = _commit(user_repo, "pkg/common.py", "rename block_table")
    assert not committed, text
    assert "Failed" in text
    assert "HO101" in text and "pkg/rocm.py" in text  # a finding, not a crash of the hook
    assert "Traceback" not in text
    # The rejected change is still there, staged, for the user to fix.
    assert common.read_text() == renamed
    staged = _git("diff", "--cached", "--name-only", cwd=user_repo).stdout.split()
    assert staged == ["pkg/common.py"]

    # The same hook with `args:` from a user's configuration: entry, args, then the files.
    pre_commit = Path(sys.executable).parent / "pre-commit"
    config = user_repo / ".git" / "with-args.yaml"
    out = subprocess.run(
        [str(pre_commit), "run", "--config", str(config), "--files", "pkg/common.py"],
        cwd=user_repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "::error file=pkg/rocm.py" in out.stdout, out.stdout


@pytest.mark.integration
def test_pre_commit_hides_a_passing_hooks_warnings(user_repo: Path) -> None:
    """What the README says: warnings do not block, and pre-commit shows a passing hook's
    output only when asked to (``--verbose``, or ``verbose: true`` in the configuration)."""
    (user_repo / "pkg" / "other.py").write_text(WARNED)
    text, committed = _commit(user_repo, "pkg/other.py", "a warning only")
    assert committed, text
    assert "strict override checker" in text and "Passed" in text
    assert "HO101" not in text and "Other.build" not in text
    pre_commit = Path(sys.executable).parent / "pre-commit"
    shown = subprocess.run(
        [
            *(str(pre_commit), "run", "--config", str(user_repo / ".git" / "with-args.yaml")),
            *("--verbose", "--files", "pkg/other.py"),
        ],
        cwd=user_repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "::warning file=pkg/other.py" in shown.stdout
