"""What a bisect step runs and how its result becomes a verdict."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.bisect.checks import command_check, named_check, run_check
from harness.bisect.verdict import Verdict


def _finding(code: str, severity: str) -> dict[str, object]:
    return {"path": "a.py", "line": 3, "code": code, "severity": severity, "message": "m"}


@pytest.mark.parametrize(
    ("status", "findings", "verdict"),
    [
        (0, [], Verdict.GOOD),
        (0, [_finding("HO201", "warning")], Verdict.GOOD),
        (1, [_finding("HO101", "error"), _finding("HO401", "warning")], Verdict.BAD),
        (0, [_finding("HO401", "warning")], Verdict.SKIP),  # an unparsable tree cannot be judged
        (2, None, Verdict.SKIP),  # the checker itself failed
        (1, "not json", Verdict.SKIP),
    ],
)
def test_overrides_verdicts(status: int, findings: object, verdict: Verdict) -> None:
    check = named_check("overrides")
    stdout = findings if isinstance(findings, str) else json.dumps(findings or [])
    assert check.interpret(status, stdout)[0] is verdict
    assert check.argv[-4:] == ("--format", "json", "--no-cache", ".")


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (0, Verdict.GOOD),
        (1, Verdict.BAD),
        (2, Verdict.SKIP),
        (5, Verdict.SKIP),
        (-9, Verdict.ABORT),
    ],
)
def test_pytest_and_regressions_verdicts(status: int, verdict: Verdict) -> None:
    assert named_check("pytest:x").interpret(status, "")[0] is verdict
    regressions = named_check("regressions")
    assert regressions.python_path and regressions.argv[-2:] == ("regressions", "verify")
    if status >= 0:
        want = {0: Verdict.GOOD, 1: Verdict.BAD}.get(status, Verdict.SKIP)
        assert regressions.interpret(status, "")[0] is want


def test_pytest_expression_or_node_id() -> None:
    assert named_check("pytest:rename and not slow").argv[-2:] == ("-k", "rename and not slow")
    assert named_check("pytest:tests/test_a.py::test_b").argv[-1] == "tests/test_a.py::test_b"
    assert named_check("pytest:tests/test_a.py::test_b").python_path


def test_a_command_that_cannot_start_says_so(tmp_path: Path) -> None:
    run = run_check(command_check(["./no-such-script"]), tmp_path, None)
    assert run.returncode is None and not run.started
    assert run.note == "cannot run ./no-such-script: No such file or directory"


def test_the_overrides_check_is_isolated_from_the_tree() -> None:
    """``-I``: neither the working directory (the tree) nor PYTHONPATH is on its sys.path."""
    argv = named_check("overrides").argv
    assert argv[0] == sys.executable and argv[1] == "-I"


def _gone(pid: int) -> bool:
    """``pid`` has exited (a zombie nobody reaped yet counts), within a generous wait."""
    from suites.test_child import gone

    return gone(pid)


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"sh -c 'echo $$ > {pid_file}; exec sleep 3600' & sleep 3600"  # both outlive 0.3 s
    run = run_check(command_check(["sh", "-c", script]), tmp_path, 0.3)
    assert run.verdict is Verdict.SKIP and "timed out after 0.3 s" in run.note
    # No pid: the shell was killed before it wrote one (a loaded machine), with its group.
    pid = pid_file.read_text().strip() if pid_file.exists() else ""
    assert not pid or _gone(int(pid)), "a child of the check outlived the timeout"


def test_output_is_kept_for_the_report(tmp_path: Path) -> None:
    run = run_check(
        command_check([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"]),
        tmp_path,
        None,
    )
    assert run.verdict is Verdict.BAD and run.returncode == 3 and run.output.startswith("out")


def test_a_background_child_holding_the_output_neither_hangs_nor_outlives_the_check(
    tmp_path: Path,
) -> None:
    """``git bisect run`` does not wait for what a check leaves running; nor do we, and what it
    left is killed before the next checkout (it would write into the next commit's tree): the
    background child would otherwise write its marker after an hour."""
    pid_file, marker = tmp_path / "pid", tmp_path / "survivor"
    child = f"sh -c 'echo $$ > {pid_file}; sleep 3600; touch {marker}'"
    script = f"{child} & until [ -s {pid_file} ]; do sleep 0.01; done; echo out; exit 1"
    run = run_check(command_check(["sh", "-c", script]), tmp_path, None)
    assert run.verdict is Verdict.BAD and run.returncode == 1 and run.output.startswith("out")
    assert _gone(int(pid_file.read_text())), "a child of the check outlived it"
    assert not marker.exists()


def test_a_huge_output_is_not_held_in_memory(tmp_path: Path) -> None:
    """Only the tail a report shows is read back (unless the check parses its output)."""
    import tracemalloc

    script = "head -c 50000000 /dev/zero | tr '\\0' x; echo; echo last line; exit 1"
    tracemalloc.start()
    try:
        run = run_check(command_check(["sh", "-c", script]), tmp_path, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert run.verdict is Verdict.BAD and run.output.rstrip().endswith("last line")
    assert len(run.output) <= 6000 and peak < 5_000_000, peak
