"""``harness bisect``: the JSON report, usage errors, and Ctrl-C leaving nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.cli import main

from .repos import git, rename_history


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("cli") / "repo"
    return path, rename_history(path, 16, 11)


def test_json_report(repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    path, shas = repo
    args = ["bisect", "--repo", str(path), "--good", shas[0], "--bad", shas[-1], "--json"]
    assert main([*args, "--", "sh", "-c", "! grep -q block_table_tensor base.py"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["first_bad"] == shas[10] and report["skipped"] == []
    assert report["culprit"]["subject"] == "commit 11" and report["parent"]["sha"] == shas[9]
    assert all({"sha", "verdict", "seconds"} <= set(s) for s in report["steps"])
    assert "more after it" in captured.err  # progress: steps left


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ([], "give exactly one check"),
        (["--check", "overrides", "--", "true"], "give exactly one check"),
        (["--check", "lint"], "unknown check 'lint'; available: overrides, pytest:EXPR"),
        (["--retries", "-1", "--", "true"], "--retries must be 0 or more"),
    ],
)
def test_usage_errors_exit_2(
    repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str], extra: list[str], error: str
) -> None:
    path, shas = repo
    assert main(["bisect", "--repo", str(path), "--good", shas[0], "--bad", shas[-1], *extra]) == 2
    assert error in capsys.readouterr().err


def _bisect_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("harness-bisect-*")}


def _alive(token: str) -> bool:
    """Whether the check's shell (not the harness process, whose arguments hold it too) runs."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
            if text.startswith(b"sh\0") and token.encode() in text:
                return True
        except OSError:
            continue
    return False


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc to find the check's process")
def test_ctrl_c_mid_run_leaves_no_worktree_and_no_check_running(
    repo: tuple[Path, list[str]],
) -> None:
    path, shas = repo
    token = f"harness-bisect-test-{os.getpid()}"
    before = _bisect_dirs()
    exe = Path(sys.executable).with_name("harness")
    process = subprocess.Popen(
        [
            str(exe),
            "bisect",
            "--repo",
            str(path),
            "--good",
            shas[0],
            "--bad",
            shas[-1],
            "--",
            "sh",
            "-c",
            f"sleep 60; echo {token}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _alive(token) and time.monotonic() < deadline:  # wait for step 1's check to run
        time.sleep(0.05)
    assert _alive(token), "the check never started"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert "harness: interrupted" in err
    assert git(path, "worktree", "list").count("\n") == 1
    assert _bisect_dirs() <= before
    time.sleep(0.2)
    assert not _alive(token), "the check's process group was not killed"
