"""A child in its own session: waited for unreaped, its group killed whole, started safely."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from harness import process as process_module
from harness.process import describe_status, session, signals_held, wait_unreaped

SLEEPER = [sys.executable, "-c", "import time; time.sleep(3600)"]


def test_describe_status() -> None:
    assert describe_status(0) == "exited with status 0"
    assert describe_status(3) == "exited with status 3"
    assert describe_status(-9) == "was killed by signal 9 (SIGKILL)"
    assert describe_status(-200) == "was killed by signal 200"


def test_a_timeout_returns_false_ticks_and_the_group_is_killed_at_the_end() -> None:
    ticks: list[None] = []
    with session(SLEEPER) as process:
        assert not wait_unreaped(process, 0.2, lambda: ticks.append(None))
        assert process.returncode is None  # neither reaped nor killed by the wait
    assert process.returncode == -signal.SIGKILL and ticks


def test_an_exit_is_waited_for_and_reaped_at_the_end() -> None:
    with session([sys.executable, "-c", "raise SystemExit(4)"]) as process:
        assert wait_unreaped(process, None)
    assert process.returncode == 4


def test_a_command_that_cannot_start_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError), session([str(tmp_path / "nothing-here")]):
        pass


@pytest.fixture
def interrupted_while_starting(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """``session``'s ``Popen`` sends this process a SIGINT once the child has started, before
    it returns; the children started are listed."""
    popen = process_module.subprocess.Popen
    started: list[subprocess.Popen[bytes]] = []

    def interrupted(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        child = popen(*args, **kwargs)
        started.append(child)
        os.kill(os.getpid(), signal.SIGINT)  # arrives before Popen returns
        return child

    monkeypatch.setattr(process_module.subprocess, "Popen", interrupted)
    return started


@contextlib.contextmanager
def sigint_handled_by(handler: Any) -> Generator[None, None, None]:
    """SIGINT goes to ``handler`` inside the block."""
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_while_it_starts_is_delivered_once_it_runs_and_it_is_killed(
    interrupted_while_starting: list[subprocess.Popen[bytes]],
) -> None:
    """A Ctrl-C that arrived inside ``Popen`` left the child running: nobody held it yet."""
    # SIGINT as a terminal's shell leaves it; a suite run as a background job of a shell
    # without job control inherits it ignored (the next test).
    with (
        sigint_handled_by(signal.default_int_handler),
        pytest.raises(KeyboardInterrupt),
        session(SLEEPER),
    ):
        raise AssertionError("the block ran although Ctrl-C came first")
    (child,) = interrupted_while_starting
    assert child.returncode == -signal.SIGKILL


def test_a_sigint_held_while_it_starts_is_ignored_where_sigint_is_ignored(
    interrupted_while_starting: list[subprocess.Popen[bytes]],
) -> None:
    """Held signals go to the handlers in force before: a process that ignores SIGINT (``nohup
    cmd &`` in a script) goes on, and the child is killed when the block ends."""
    ran = False
    with sigint_handled_by(signal.SIG_IGN), session(SLEEPER):
        ran = True
    (child,) = interrupted_while_starting
    assert ran and child.returncode == -signal.SIGKILL


def test_signals_held_are_delivered_to_the_previous_handlers_at_the_end() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: seen.append(signum))
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            assert seen == []
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
