"""``harness bisect``: the JSON report, usage errors, and Ctrl-C leaving nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from suites.signal_support import with_sigint

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
        (["--retries", "99999999999999999999", "--", "true"], "--retries must be at most 100"),
        (["--retries", "nan", "--", "true"], "argument --retries: invalid int value: 'nan'"),
        (["--timeout", "nan", "--", "true"], "--timeout must be a positive number of seconds"),
        (["--timeout", "inf", "--", "true"], "--timeout must be a positive number of seconds"),
        (["--timeout", "0", "--", "true"], "--timeout must be a positive number of seconds"),
        (["--timeout", "1e300", "--", "true"], "--timeout must be at most"),
        (["--timeout", "soon", "--", "true"], "argument --timeout: invalid float value: 'soon'"),
    ],
)
def test_usage_errors_exit_2(
    repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str], extra: list[str], error: str
) -> None:
    path, shas = repo
    argv = ["bisect", "--repo", str(path), "--good", shas[0], "--bad", shas[-1], *extra]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert error in err and "Traceback" not in err
    assert not [line for line in err.splitlines() if line.startswith("bisect: ")]  # no work


def test_a_bare_repository_and_its_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    assert (
        main(["bisect", "--repo", str(repo / ".git"), "--good", "a", "--bad", "b", "--", "true"])
        == 2
    )
    err = capsys.readouterr().err
    assert "inside the .git directory" in err and "not a git repository" not in err


def test_regressions_check_without_the_engine_extra_stops_at_once(
    repo: tuple[Path, list[str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A light install (no torch): one line naming the extra to install, exit 2, no step run."""
    import harness.bisect.checks as checks_module

    real = checks_module.importlib.util.find_spec
    monkeypatch.setattr(
        checks_module.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "torch" else real(name, *a),
    )
    path, shas = repo
    argv = ["bisect", "--repo", str(path), "--good", shas[0], "--bad", shas[-1]]
    assert main([*argv, "--check", "regressions"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("harness: error: ")
    assert "torch" in err and "[engine]" in err and "pip install" in err


def test_the_overrides_check_with_harness_found_on_pythonpath_only(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """harness not installed, only on PYTHONPATH (a bare interpreter): the isolated checker
    process still imports this harness, and the culprit is found."""
    path, shas = repo
    base = getattr(sys, "_base_executable", sys.executable)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    probe = subprocess.run(
        [base, "-c", "import harness"],
        env={**env, "PYTHONPATH": ""},
        cwd=tmp_path,
        capture_output=True,
    )
    if probe.returncode == 0:
        pytest.skip(f"{base} imports harness without PYTHONPATH")
    argv = [
        base,
        "-m",
        "harness.cli",
        "bisect",
        "--repo",
        str(path),
        "--good",
        shas[0],
        "--bad",
        shas[-1],
    ]
    done = subprocess.run(
        [*argv, "--check", "overrides", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "found" and report["first_bad"] == shas[10] and not report["skipped"]


def _bisect_dirs(temp: Path) -> list[Path]:
    return list(temp.glob("harness-bisect-*"))


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
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, shas = repo
    token = f"harness-bisect-test-{os.getpid()}"
    temp = tmp_path / "temp"  # its own: a bisect run beside this test cannot be taken for its
    temp.mkdir()
    exe = Path(sys.executable).with_name("harness")
    process = subprocess.Popen(
        [
            *with_sigint(signal.SIG_DFL),  # the suite may run with SIGINT ignored
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
        env={**os.environ, "TMPDIR": str(temp)},
    )
    deadline = time.monotonic() + 60
    while not _alive(token) and time.monotonic() < deadline:  # wait for step 1's check to run
        time.sleep(0.05)
    assert _alive(token), "the check never started"
    assert _bisect_dirs(temp), "the run made no worktree directory where the test looks"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=300)  # a hang guard, not a speed limit
    assert process.returncode == 130, err
    assert "harness: interrupted" in err
    assert git(path, "worktree", "list").count("\n") == 1
    assert not _bisect_dirs(temp)
    time.sleep(0.2)
    assert not _alive(token), "the check's process group was not killed"
