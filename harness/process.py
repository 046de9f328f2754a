"""A child process in a session of its own: waited for without reaping, then killed whole.

``with session(argv) as process:`` starts it as the leader of a new session (the terminal's
Ctrl-C goes to us, not to it) and, however the block ends, kills its whole process group: what it
left running goes with it. :func:`wait_unreaped` waits for it to exit while leaving it a zombie
where the platform can (``waitid`` with ``WNOWAIT``), so that its group id stays its own until
then. A Ctrl-C or SIGTERM that arrives while it starts is delivered once it runs, so that it is
killed too (:func:`signals_held`); while it runs, a SIGTERM or SIGHUP that would kill us at once
raises ``KeyboardInterrupt`` instead, so that it is killed on the way out. The bisect driver
runs its checks this way, and :mod:`harness.child` the user code it runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Generator, Sequence
from typing import IO

Tick = Callable[[], None]
"""Called while waiting, about every 50 ms at most."""


@contextlib.contextmanager
def session(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | int | None = None,
) -> Generator[subprocess.Popen[bytes], None, None]:
    """``argv`` running in a new session, its standard input closed (module docstring); an
    ``OSError`` when it cannot be started."""
    process: subprocess.Popen[bytes] | None = None
    with _terminate_as_interrupt():
        try:
            with signals_held():
                process = subprocess.Popen(
                    list(argv),
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=stderr,
                    start_new_session=True,
                )
            yield process
        finally:
            if process is not None:
                with signals_held():  # a second Ctrl-C does not cut the kill short
                    _kill_group(process)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Generator[None, None, None]:
    """Inside the block (main thread), SIGTERM and SIGHUP whose handler is the default one (the
    process would die at once, its child left running) raise ``KeyboardInterrupt`` instead, so
    the session is killed on the way out: what ``timeout`` and CI cancellation send."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    replaced = [
        sig for sig in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(sig) is signal.SIG_DFL
    ]
    for sig in replaced:
        signal.signal(sig, _interrupt)
    try:
        yield
    finally:
        for sig in replaced:
            signal.signal(sig, signal.SIG_DFL)


def _interrupt(signum: int, frame: object) -> None:
    del signum, frame
    raise KeyboardInterrupt


def wait_unreaped(
    process: subprocess.Popen[bytes], timeout: float | None, tick: Tick | None = None
) -> bool:
    """Wait until ``process`` exits (True) or ``timeout`` passes (False), leaving it unreaped
    where the platform can (see the module docstring); ``tick`` runs between polls."""
    deadline = None if timeout is None else time.monotonic() + timeout
    waitid = getattr(os, "waitid", None)

    def exited() -> bool:
        if waitid is None:
            return process.poll() is not None
        return waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    delay = 0.001
    while not exited():
        if tick is not None:
            tick()
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(delay if deadline is None else min(delay, max(deadline - time.monotonic(), 0)))
        delay = min(delay * 2, 0.05)
    return True


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill ``process``'s whole process group, then reap ``process``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def signals_held() -> Generator[None, None, None]:
    """SIGINT and SIGTERM that arrive inside the block are held (in the main thread; elsewhere
    Python delivers no signal) and delivered to the previous handlers when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: received.append(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for signum in dict.fromkeys(received):
            signal.raise_signal(signum)


def describe_status(status: int) -> str:
    """``exited with status N`` or ``was killed by signal N (SIGNAME)``."""
    if status >= 0:
        return f"exited with status {status}"
    try:
        name = f" ({signal.Signals(-status).name})"
    except ValueError:
        name = ""
    return f"was killed by signal {-status}{name}"
