"""What a bisect step runs in the worktree, and how its result becomes a verdict.

The checks: a command (``harness bisect ... -- CMD ARGS...``, judged by ``git bisect run``'s
contract in :mod:`harness.bisect.verdict`), ``overrides`` (the override checker), ``pytest:EXPR``
and ``regressions`` (the worktree's own ``harness regressions verify``). What each judges good,
bad or skip is listed in ``docs/bisect.md``. A check past the timeout is a skip; a command that
cannot be started is judged as 126/127.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from harness.bisect.verdict import EXIT_GOOD, Verdict, verdict_of
from harness.errors import HarnessError
from harness.extras import missing_extra
from harness.process import session, wait_unreaped

UNPARSABLE = "HO401"
"""The checker's finding for a file it cannot parse."""
OUTPUT_TAIL = 6000
"""Characters of a check's output kept for the report."""

Interpret = Callable[[int, str], tuple[Verdict, str]]
"""(exit status, stdout) -> (verdict, one-line note)."""


@dataclass(frozen=True)
class BisectCheck:
    """A check: the command to run in the worktree and how to read its result."""

    name: str
    argv: tuple[str, ...]
    interpret: Interpret
    python_path: bool = False
    """Put the worktree first on ``PYTHONPATH`` (checks that import the bisected code)."""
    render: Callable[[str], str] | None = None
    """Turns stdout into what the report shows (e.g. JSON findings into lines)."""
    reads_output: bool = False
    """``interpret`` parses the whole stdout (else only the tail the report shows is read)."""
    cannot_run_codes: tuple[int, ...] = ()
    """Exit statuses that may mean "the command cannot run" rather than bad (126, 127 for a
    command, as ``git bisect run`` treats them): confirmed on the good commit before trusted."""
    doubts: Callable[[str], frozenset[str]] | None = None
    """What a run could not judge, from its stdout (the overrides check: unparsable files); a skip
    whose doubts all hold at both ends is judged good (``docs/bisect.md``)."""
    cannot_run_text: str = ""
    """Output that may mean the same (``python -m pytest`` without pytest exits 1 and says
    ``No module named pytest``), confirmed on the good commit the same way."""


@dataclass(frozen=True, slots=True)
class CheckRun:
    """One run of the check on one commit."""

    verdict: Verdict
    returncode: int | None
    """None when the check could not start or timed out."""
    note: str
    output: str
    """The tail of stdout and stderr together."""
    seconds: float
    started: bool = True
    """False when the command could not be executed at all (not found, not executable)."""
    doubts: frozenset[str] = frozenset()
    """What the check could not judge in this run (see :attr:`BisectCheck.doubts`)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict.value,
            "returncode": self.returncode,
            "note": self.note,
            "seconds": round(self.seconds, 3),
        }


def _contract(returncode: int, output: str) -> tuple[Verdict, str]:
    del output
    verdict = verdict_of(returncode)
    if verdict is Verdict.ABORT:
        return verdict, f"exit status {returncode}: 128 and above (or a signal) abort a bisection"
    return verdict, f"exit status {returncode}"


def _overrides(returncode: int, output: str) -> tuple[Verdict, str]:
    if returncode not in (0, 1):
        return Verdict.SKIP, f"the checker could not run (exit status {returncode})"
    try:
        findings = json.loads(output)
    except ValueError:
        return Verdict.SKIP, "the checker's output is not JSON"
    errors = [f for f in findings if f.get("severity") == "error"]
    if errors:
        first = errors[0]
        return Verdict.BAD, (
            f"{len(errors)} error finding(s); first: {first['path']}:{first['line']} "
            f"{first['code']} {first['message']}"
        )
    unparsable = [f for f in findings if f.get("code") == UNPARSABLE]
    if unparsable:
        return Verdict.SKIP, f"{len(unparsable)} unparsable file(s), e.g. {unparsable[0]['path']}"
    return Verdict.GOOD, f"no error finding ({len(findings)} warning(s))"


def _unparsable(output: str) -> frozenset[str]:
    """The files the checker could not parse (an error finding's own file may be among them)."""
    try:
        findings = json.loads(output)
    except ValueError:
        return frozenset()
    return frozenset(str(f.get("path")) for f in findings if f.get("code") == UNPARSABLE)


def _render_findings(output: str) -> str:
    """The checker's JSON findings as one line each (errors with their call site), or as is."""
    try:
        findings = json.loads(output)
    except ValueError:
        return output
    lines: list[str] = []
    for f in findings:
        lines.append(f"{f['path']}:{f['line']}: {f['code']} {f['severity']}: {f['message']}")
        evidence = f.get("evidence")
        if evidence:
            lines.append(f"    call: {evidence['path']}:{evidence['line']}: {evidence['text']}")
    return "\n".join(lines) or "no findings"


def _pytest(returncode: int, output: str) -> tuple[Verdict, str]:
    del output
    if returncode == EXIT_GOOD:
        return Verdict.GOOD, "tests passed"
    if returncode == 1:
        return Verdict.BAD, "tests failed"
    if returncode < 0:
        return Verdict.ABORT, f"pytest was killed by signal {-returncode}"
    return Verdict.SKIP, f"pytest could not run the tests (exit status {returncode})"


def _regressions(returncode: int, output: str) -> tuple[Verdict, str]:
    del output
    if returncode == 0:
        return Verdict.GOOD, "every catalog entry behaves"
    if returncode == 1:
        return Verdict.BAD, "a catalog entry misbehaves"
    return Verdict.SKIP, f"verification could not run (exit status {returncode})"


NAMED_CHECKS = ("overrides", "pytest:EXPR", "regressions")
REGRESSIONS_NEED = ("torch", "numpy")
"""What ``harness regressions verify`` imports that the base install leaves out."""

_RUN_ISOLATED = """\
import importlib.util, os, runpy, sys
init = sys.argv.pop(1)
spec = importlib.util.find_spec("harness")
if spec is None or os.path.realpath(spec.origin or "") != init:
    sys.path.insert(0, os.path.dirname(os.path.dirname(init)))
runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)
"""
"""``python -I -c`` this, our ``harness/__init__.py`` and a module: that module of this harness,
with neither the working directory nor ``PYTHONPATH`` on ``sys.path`` (and this harness found
also where it is importable only through ``PYTHONPATH``)."""


def isolated_module(module: str) -> tuple[str, ...]:
    """The command that runs ``python -m module`` of this harness, isolated from the working
    directory (``-I``): code in the tree it runs in is never imported."""
    import harness

    init = os.path.realpath(harness.__file__ or "")
    return (sys.executable, "-I", "-c", _RUN_ISOLATED, init, module)


def named_check(spec: str) -> BisectCheck:
    """The check called ``spec`` (one of :data:`NAMED_CHECKS`)."""
    python = sys.executable
    argv: tuple[str, ...]
    if spec == "overrides":
        argv = (*isolated_module("harness.overrides"), "--format", "json", "--no-cache", ".")
        return BisectCheck(
            spec, argv, _overrides, render=_render_findings, reads_output=True, doubts=_unparsable
        )
    if spec == "regressions":
        for module in REGRESSIONS_NEED:
            if importlib.util.find_spec(module) is None:
                missing = ModuleNotFoundError(f"No module named {module!r}", name=module)
                raise HarnessError(missing_extra(missing) or f"--check regressions needs {module}")
        argv = (python, "-m", "harness.cli", "regressions", "verify")
        return BisectCheck(spec, argv, _regressions, python_path=True)
    if spec.startswith("pytest:") and spec[len("pytest:") :].strip():
        expr = spec[len("pytest:") :].strip()
        select = [expr] if any(s in expr for s in ("::", "/", ".py")) else ["-k", expr]
        argv = (python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *select)
        without = "No module named pytest"  # what ``python -m pytest`` says without pytest
        return BisectCheck(spec, argv, _pytest, python_path=True, cannot_run_text=without)
    raise HarnessError(f"unknown check {spec!r}; available: {', '.join(NAMED_CHECKS)}")


def command_check(argv: Sequence[str]) -> BisectCheck:
    """A user's command, judged by ``git bisect run``'s exit-code contract."""
    if not argv:
        raise HarnessError("give a check: --check NAME or -- CMD ARGS...")
    return BisectCheck(" ".join(argv), tuple(argv), _contract, cannot_run_codes=(126, 127))


def run_check(check: BisectCheck, tree: Path, timeout: float | None) -> CheckRun:
    """Run ``check`` in ``tree``. Its output goes to unnamed temporary files, so a child it
    leaves running cannot hold the step open; its process group (what it left behind too) is
    killed when it exits, on timeout and on Ctrl-C."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if check.python_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            with session(check.argv, cwd=tree, env=env, stdout=out, stderr=err) as process:
                exited = wait_unreaped(process, timeout)
        except OSError as exc:  # a command: judged as its 126/127 (the driver); else abort
            note = f"cannot run {check.argv[0]}: {exc.strerror or exc}"
            verdict = Verdict.BAD if check.cannot_run_codes else Verdict.ABORT
            seconds = time.perf_counter() - started
            return CheckRun(verdict, None, note, "", seconds, started=False)
        stdout = _read(out, None if check.reads_output else OUTPUT_TAIL)
        stderr = _read(err, OUTPUT_TAIL)
    seconds = time.perf_counter() - started
    if not exited:
        note = f"timed out after {timeout:g} s"
        return CheckRun(Verdict.SKIP, None, note, _tail(stdout, stderr), seconds)
    verdict, note = check.interpret(process.returncode, stdout)
    output = _tail(check.render(stdout) if check.render else stdout, stderr)
    doubts = frozenset[str]() if check.doubts is None else check.doubts(stdout)
    return CheckRun(verdict, process.returncode, note, output, seconds, doubts=doubts)


def _read(file: IO[bytes], tail: int | None) -> str:
    """What was written to ``file``: all of it, or about its last ``tail`` characters."""
    size = file.seek(0, os.SEEK_END)
    file.seek(0 if tail is None else max(0, size - 4 * tail))  # UTF-8: at most 4 bytes each
    return file.read().decode("utf-8", errors="replace")


def _tail(stdout: str, stderr: str) -> str:
    return (stdout + (f"\n[stderr]\n{stderr}" if stderr.strip() else ""))[-OUTPUT_TAIL:]
