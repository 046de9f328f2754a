"""A child in its own session: waited for unreaped, its group killed whole."""

from __future__ import annotations

import sys

from harness.process import describe_status, kill_group, spawn, wait_unreaped


def test_describe_status() -> None:
    assert describe_status(0) == "exited with status 0"
    assert describe_status(3) == "exited with status 3"
    assert describe_status(-9) == "was killed by signal 9 (SIGKILL)"
    assert describe_status(-200) == "was killed by signal 200"


def test_a_timeout_returns_false_ticks_and_the_group_is_killed() -> None:
    process = spawn([sys.executable, "-c", "import time; time.sleep(3600)"])
    ticks: list[None] = []
    try:
        assert not wait_unreaped(process, 0.2, lambda: ticks.append(None))
        assert process.returncode is None  # neither reaped nor killed by the wait
    finally:
        kill_group(process)
    assert process.returncode == -9 and ticks


def test_an_exit_is_waited_for_and_reaped_by_the_kill() -> None:
    process = spawn([sys.executable, "-c", "raise SystemExit(4)"])
    assert wait_unreaped(process, None)
    kill_group(process)
    assert process.returncode == 4
