"""Run user code in a child process, so that however it ends is one check's error, never ours.

``run_in_child("package.module:function", *args)`` calls ``function(*args)`` in a fresh
interpreter (``sys.executable``, our working directory and environment; or ``env``, and with
``isolated`` its own empty directory, so that nothing in ours shadows an import) and returns
what it returned; arguments and result are JSON values. What the child prints goes to our standard
error as it comes (our standard output stays the caller's). Any other end is a
:class:`ChildError` saying how it ended, during which step (the last :func:`mark` the child
made) and the child's last lines of output: the function raised or called ``sys.exit()``, an
exception or ``sys.exit()`` ended one of its threads (:func:`thread_failures`), or ``os._exit()``,
a signal or a crash in native code ended the process, or it ran past ``timeout``. A :class:`~harness.errors.HarnessError`
raised in the child is raised here as one (a usage error stays exit 2). The child runs in a
session of its own (:mod:`harness.process`), killed with whatever it started when it ends, when
Ctrl-C or SIGTERM interrupts us, and by itself when we die of SIGKILL. How to run a command's
user code this way: ``docs/architecture.md``.
"""

from __future__ import annotations

import codecs
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

from harness.errors import ChildError, HarnessError, describe_error
from harness.process import describe_status, session, wait_unreaped

LAST_LINES = 8
"""Lines of the child's output a :class:`ChildError` keeps."""
_TAIL_CHARS = 8192
_CALL, _RESULT, _STEP, _OUTPUT = "call.json", "result.json", "step", "output"
_SERVE = """\
import importlib.util, os, sys
init = sys.argv.pop(1)
spec = importlib.util.find_spec("harness")
if spec is None or os.path.realpath(spec.origin or "") != init:
    sys.path.insert(0, os.path.dirname(os.path.dirname(init)))
from harness.child import serve
serve(sys.argv[1])
"""
"""``python -c`` this, our ``harness/__init__.py`` and the scratch directory: this harness serves
the call, also where it is importable only through a path the parent added."""


def run_in_child(
    function: str,
    /,
    *args: Any,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    isolated: bool = False,
) -> Any:
    """``function(*args)`` in a child process (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="harness-child-") as scratch:
        box = Path(scratch).resolve()  # TMPDIR=. is kept relative; the code may chdir
        cwd = box / "cwd" if isolated else None
        if cwd is not None:
            cwd.mkdir()
        call = json.dumps({"function": function, "args": list(args)})
        (box / _CALL).write_text(call, encoding="utf-8")
        import harness

        init = os.path.realpath(harness.__file__ or "")
        with open(box / _OUTPUT, "ab") as output, _Relay(box / _OUTPUT) as relay:
            argv = [sys.executable, "-c", _SERVE, init, str(box)]
            with session(
                argv, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT
            ) as process:
                finished = wait_unreaped(process, timeout, relay.forward)
            relay.forward()
        outcome = _read_json(box / _RESULT)
        step_file = box / _STEP
        step = (step_file.read_text(encoding="utf-8") if step_file.exists() else "") or None
    if not finished:
        how = f"the process ran past {timeout:g} s and was killed"
        raise ChildError(how, step, relay.last_lines())
    if outcome is None:
        status = process.returncode
        how = f"the process {describe_status(status)} before returning"
        if status >= 0:
            how += " (os._exit(), or a crash in native code)"
        raise ChildError(how, step, relay.last_lines())
    if "usage" in outcome:
        raise HarnessError(str(outcome["usage"]))
    if "error" in outcome:
        raise ChildError(str(outcome["error"]), step, relay.last_lines())
    return outcome["value"]


def call(function: str, /, *args: Any, in_child: bool) -> Any:
    """``function(*args)``: in a child process (:func:`run_in_child`) or in this one."""
    return run_in_child(function, *args) if in_child else _resolve(function)(*args)


_step_file: Path | None = None
"""Where :func:`mark` writes, in a child (None in any other process)."""


def mark(step: str) -> None:
    """In a child of :func:`run_in_child`: ``step`` runs now (named if the child dies in it;
    ``""``: none of ours). Does nothing in any other process."""
    if _step_file is not None:
        _step_file.write_text(step, encoding="utf-8")


_collectors: list[list[str]] = []
_python_hook: Callable[[threading.ExceptHookArgs], object] = threading.excepthook


@contextlib.contextmanager
def thread_failures() -> Generator[list[str], None, None]:
    """Inside the block, every exception (``sys.exit()`` included) that ends a thread is
    described in the list yielded (of the innermost block), after Python's own hook ran. An
    out-of-memory error is not a failure: the memory tools record it as their finding."""
    global _python_hook
    failures: list[str] = []
    if not _collectors:
        _python_hook = threading.excepthook
        threading.excepthook = _on_thread_exception
    _collectors.append(failures)
    try:
        yield failures
    finally:
        _collectors.remove(failures)
        if not _collectors:
            threading.excepthook = _python_hook


def _on_thread_exception(args: threading.ExceptHookArgs) -> None:
    exc = args.exc_value
    if _collectors and not (exc is not None and _out_of_memory(exc)):
        what = args.exc_type.__name__ if exc is None else describe_error(exc)
        name = "a thread" if args.thread is None else f"thread {args.thread.name!r}"
        _collectors[-1].append(f"{name} ended: {what}")
    _python_hook(args)


def _out_of_memory(exc: BaseException) -> bool:
    return any(
        c.__name__ == "OutOfMemoryError" and c.__module__.split(".")[0] == "torch"
        for c in type(exc).__mro__
    )


def serve(scratch: str) -> None:
    """The child's side of :func:`run_in_child`: make the call, write how it ended, exit 0 (a
    fork of the child that returns here exits without a word)."""
    global _step_file
    box = Path(scratch)
    _step_file = box / _STEP
    request = json.loads((box / _CALL).read_text(encoding="utf-8"))
    watch = threading.Thread(target=_end_with, args=(os.getppid(),), daemon=True)
    watch.start()
    served = os.getpid()
    outcome: dict[str, Any]
    with thread_failures() as failures:
        try:
            value = _resolve(request["function"])(*request["args"])
            outcome = {"value": value}
            json.dumps(value)  # a value that cannot be sent back is an error here
        except HarnessError as exc:
            outcome = {"usage": str(exc)}
        except BaseException as exc:  # KeyboardInterrupt too: a terminal's Ctrl-C never gets
            outcome = {"error": describe_error(exc)}  # here (a session of its own), only the code's
    if os.getpid() != served:  # a fork the code made without exec, back here: not ours to report
        os._exit(0)
    if failures and "value" in outcome:
        outcome = {"error": failures[0]}
    text = json.dumps(outcome)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the code may have closed or replaced them
            stream.flush()
    (box / f"{_RESULT}.part").write_text(text, encoding="utf-8")
    (box / f"{_RESULT}.part").replace(box / _RESULT)
    os._exit(0)  # threads the user code left running do not hold the child open


def _end_with(parent: int) -> None:
    """In the child: once ``parent`` is gone (even killed with SIGKILL, which it cannot pass on),
    kill the child's whole session, so that nothing it runs is left behind."""
    while os.getppid() == parent:
        time.sleep(0.25)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _resolve(function: str) -> Callable[..., Any]:
    module, _, name = function.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return found


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


class _Relay:
    """What the child writes, passed on to our standard error as it comes; the tail is kept."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tail = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._file: Any = None

    def __enter__(self) -> _Relay:
        self._file = open(self.path, "rb")
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def forward(self) -> None:
        while chunk := self._file.read(1 << 16):
            text = self._decoder.decode(chunk)
            sys.stderr.write(text)
            self.tail = (self.tail + text)[-_TAIL_CHARS:]
        sys.stderr.flush()

    def last_lines(self) -> list[str]:
        """The last :data:`LAST_LINES` non-blank lines (a progress bar's last state only)."""
        lines = [line.rsplit("\r", 1)[-1].rstrip() for line in self.tail.split("\n")]
        return [line for line in lines if line.strip()][-LAST_LINES:]
