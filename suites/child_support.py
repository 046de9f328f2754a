"""Functions that :mod:`suites.test_child` runs in a child process, one way of ending each."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time

from harness.child import mark
from harness.errors import HarnessError


def echo(*args: object) -> list[object]:
    print("echo ran")  # the child's output goes to the parent's standard error
    return [*args]


def raises(message: str) -> None:
    print("before the error")
    raise ValueError(message)


class _BrokenPipe(io.StringIO):
    def flush(self) -> None:
        raise BrokenPipeError("the reader went away")


def breaks_its_output() -> str:
    sys.stdout = sys.stderr = _BrokenPipe()
    return "returned"


def interrupts() -> None:
    raise KeyboardInterrupt


def exits(status: int) -> None:
    sys.exit(status)


def os_exits(status: int) -> None:
    mark("the step that dies")
    print("last words", flush=True)
    os._exit(status)


def clears_its_mark_then_exits() -> None:
    mark("a step that is over")
    mark("")
    os._exit(0)


def kills_itself() -> None:
    mark("the step that dies")
    os.kill(os.getpid(), signal.SIGKILL)


def usage_error(message: str) -> None:
    raise HarnessError(message)


def _in_a_thread(target: object) -> None:
    worker = threading.Thread(target=target)  # type: ignore[arg-type]
    worker.start()
    worker.join()


def thread_exits() -> str:
    def work() -> None:
        sys.exit(0)

    _in_a_thread(work)
    return "returned"


def thread_os_exits() -> str:
    _in_a_thread(lambda: os._exit(0))
    return "returned"


def thread_out_of_memory() -> str:
    out_of_memory = type("OutOfMemoryError", (RuntimeError,), {"__module__": "torch"})

    def work() -> None:
        raise out_of_memory("CUDA out of memory (simulated)")

    _in_a_thread(work)
    return "returned"


def leaves_a_thread_running() -> str:
    threading.Thread(target=time.sleep, args=(3600,)).start()  # not a daemon
    return "returned"


def leaves_a_process_running(pid_file: str) -> str:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(pid_file, "w", encoding="utf-8") as handle:
        handle.write(str(child.pid))
    return "returned"


def not_json() -> object:
    return object()


def writes_pid_and_waits(pid_file: str) -> None:
    with open(pid_file, "w", encoding="utf-8") as handle:
        handle.write(str(os.getpid()))
    time.sleep(3600)


def where_and_what(name: str) -> list[object]:
    """The working directory, what it holds and the environment variable ``name``."""
    return [os.getcwd(), sorted(os.listdir()), os.environ.get(name)]


def forks_and_exits_while_the_fork_returns() -> str:
    pid = os.fork()
    if pid == 0:
        return "the fork's value"  # into serve(), as if it were the child's
    os.waitpid(pid, 0)
    os._exit(3)


def forks_and_both_return() -> str:
    pid = os.fork()
    if pid == 0:
        return "the fork's value"
    os.waitpid(pid, 0)
    return "the child's value"


def changes_directory(path: str) -> str:
    os.chdir(path)
    return "returned"
