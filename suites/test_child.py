"""The child-process runner: every way user code can end is the caller's one error, never ours."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from harness import child
from harness.child import call, mark, run_in_child, thread_failures
from harness.errors import ChildError, HarnessError

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = "suites.child_support"


@pytest.fixture(autouse=True)
def importable_support(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child finds ``suites.child_support`` from any working directory."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )


def gone(pid: int) -> bool:
    """``pid`` has exited (a zombie nobody reaped yet counts as gone), within a generous wait."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        except OSError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            state = "R"
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def test_a_value_comes_back_and_what_the_child_printed_goes_to_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert run_in_child(f"{SUPPORT}:echo", 1, "two", [3.0], {"four": None}) == [
        1,
        "two",
        [3.0],
        {"four": None},
    ]
    out, err = capfd.readouterr()
    assert out == "" and "echo ran" in err


@pytest.mark.parametrize(
    ("function", "args", "how"),
    [
        ("raises", ["boom"], "ValueError: boom ("),
        ("exits", [0], "SystemExit: sys.exit(0) called ("),
        ("exits", [3], "SystemExit: sys.exit(3) called ("),
        ("thread_exits", [], "ended: SystemExit: sys.exit(0) called ("),
        ("interrupts", [], "KeyboardInterrupt:  ("),  # raised by the code: no terminal reaches it
        ("not_json", [], "TypeError: Object of type object is not JSON serializable"),
    ],
)
def test_an_exception_or_an_exit_in_any_thread_is_an_error(
    function: str, args: list[object], how: str
) -> None:
    with pytest.raises(ChildError) as caught:
        run_in_child(f"{SUPPORT}:{function}", *args)
    assert how in caught.value.how
    if function == "raises":
        assert caught.value.last_lines == ("before the error",)
        assert "child_support.py:" in caught.value.how


@pytest.mark.parametrize("function", ["os_exits", "thread_os_exits"])
def test_os_exit_names_the_step_and_the_last_lines(function: str) -> None:
    args = [0] if function == "os_exits" else []
    with pytest.raises(ChildError) as caught:
        run_in_child(f"{SUPPORT}:{function}", *args)
    error = caught.value
    assert error.how == (
        "the process exited with status 0 before returning (os._exit(), or a crash in native code)"
    )
    if function == "os_exits":
        assert error.step == "the step that dies" and error.last_lines == ("last words",)
        assert str(error) == (
            f"{error.how}, while the step that dies ran; its last lines:\n  | last words"
        )


def test_an_empty_mark_says_no_step_of_ours_runs() -> None:
    with pytest.raises(ChildError) as caught:
        run_in_child(f"{SUPPORT}:clears_its_mark_then_exits")
    assert caught.value.step is None and ", while" not in str(caught.value)


def test_a_signal_is_named() -> None:
    with pytest.raises(ChildError) as caught:
        run_in_child(f"{SUPPORT}:kills_itself")
    assert caught.value.how.startswith("the process was killed by signal 9 (SIGKILL)")
    assert caught.value.step == "the step that dies"


def test_a_usage_error_in_the_child_stays_a_usage_error() -> None:
    with pytest.raises(HarnessError, match=r"^no such thing$"):
        run_in_child(f"{SUPPORT}:usage_error", "no such thing")


def test_code_that_breaks_its_output_still_returns() -> None:
    assert run_in_child(f"{SUPPORT}:breaks_its_output") == "returned"


def test_an_out_of_memory_error_in_a_thread_is_a_finding_not_a_failure() -> None:
    assert run_in_child(f"{SUPPORT}:thread_out_of_memory") == "returned"


def test_only_the_process_started_reports_never_a_fork_of_it() -> None:
    """User code that forks without exec: the fork returns into the child's own code too. It
    wrote the result (the child's ``os._exit(3)`` passed), or raced the child's write."""
    with pytest.raises(ChildError, match=r"^the process exited with status 3 before returning"):
        run_in_child(f"{SUPPORT}:forks_and_exits_while_the_fork_returns")
    assert run_in_child(f"{SUPPORT}:forks_and_both_return") == "the child's value"


def test_code_that_changes_directory_returns_with_a_relative_tmpdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", ".")  # TMPDIR=. (gettempdir keeps a bare ".")
    assert run_in_child(f"{SUPPORT}:changes_directory", "/") == "returned"


def test_what_the_child_leaves_running_neither_holds_it_nor_outlives_it(tmp_path: Path) -> None:
    assert run_in_child(f"{SUPPORT}:leaves_a_thread_running") == "returned"
    pid_file = tmp_path / "pid"
    assert run_in_child(f"{SUPPORT}:leaves_a_process_running", str(pid_file)) == "returned"
    assert gone(int(pid_file.read_text())), "a process the child started outlived it"


def test_ctrl_c_kills_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pid_file = tmp_path / "pid"

    def interrupted(*args: object) -> bool:
        while not pid_file.exists() or not pid_file.read_text():
            time.sleep(0.01)
        raise KeyboardInterrupt

    monkeypatch.setattr(child, "wait_unreaped", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_in_child(f"{SUPPORT}:writes_pid_and_waits", str(pid_file))
    assert gone(int(pid_file.read_text())), "the child outlived Ctrl-C"


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_the_child_does_not_outlive_a_parent_that_is_terminated_or_killed(
    tmp_path: Path, own_tmpdir: Path, how: signal.Signals
) -> None:
    """What ``timeout`` and CI cancellation send to ``harness memory simulate --regression ...``:
    the child (user code that hangs) was left running forever."""
    pid_file = tmp_path / "pid"
    code = (
        "from harness.child import run_in_child\n"
        f"run_in_child({SUPPORT + ':writes_pid_and_waits'!r}, {str(pid_file)!r})\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while parent.poll() is None and not (pid_file.exists() and pid_file.read_text()):
            time.sleep(0.01)
        os.kill(parent.pid, how)
    finally:
        parent.wait()
    assert gone(int(pid_file.read_text())), f"the child outlived its parent's {how.name}"
    if how is signal.SIGTERM:  # the parent ended as on Ctrl-C, its scratch directory removed
        assert parent.returncode == -signal.SIGINT
        assert not list(own_tmpdir.glob("harness-child-*"))


def test_call_runs_here_or_in_a_child() -> None:
    assert call(f"{SUPPORT}:echo", 1, in_child=False) == [1]
    assert call(f"{SUPPORT}:echo", 1, in_child=True) == [1]
    with pytest.raises(SystemExit):
        call(f"{SUPPORT}:exits", 0, in_child=False)


def test_mark_does_nothing_outside_a_child(tmp_path: Path) -> None:
    mark("anything")
    assert not list(tmp_path.iterdir())


def _run_in_a_thread(target: object) -> None:
    worker = threading.Thread(target=target)  # type: ignore[arg-type]
    worker.start()
    worker.join()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_thread_failures_are_collected_by_the_innermost_block_only() -> None:
    python_hook = threading.excepthook

    def exits() -> None:
        sys.exit(5)

    with thread_failures() as outer:
        with thread_failures() as inner:
            _run_in_a_thread(exits)
        _run_in_a_thread(lambda: [][0])
    assert len(inner) == 1 and "SystemExit: sys.exit(5) called" in inner[0]
    assert len(outer) == 1 and "IndexError: list index out of range" in outer[0]
    assert threading.excepthook is python_hook


def test_a_child_past_its_time_limit_is_killed_and_is_an_error(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with pytest.raises(ChildError) as caught:
        run_in_child(f"{SUPPORT}:writes_pid_and_waits", str(pid_file), timeout=1.0)
    assert caught.value.how == "the process ran past 1 s and was killed"
    assert gone(int(pid_file.read_text()))


def test_a_child_may_get_its_own_environment_and_an_empty_directory() -> None:
    env = {**os.environ, "HARNESS_TEST_VALUE": "given"}
    cwd, listing, value = run_in_child(
        f"{SUPPORT}:where_and_what", "HARNESS_TEST_VALUE", env=env, isolated=True
    )
    assert value == "given" and cwd != os.getcwd() and listing == []
    here = run_in_child(f"{SUPPORT}:where_and_what", "HARNESS_TEST_VALUE")
    assert here[0] == os.getcwd() and here[2] is None
