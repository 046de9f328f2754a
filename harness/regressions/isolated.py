"""Verification of a user's ``--regression MODULE:ATTR`` in a child process of its own.

What the user wrote may end the interpreter: ``sys.exit()`` is caught in the process (a check
error), ``os._exit()`` and a crash in native code are not. So ``harness regressions verify`` runs
each user spec as ``harness regressions verify --in-process --result-file FILE SPEC`` in a child
(about 3 s more per spec, the cost of one interpreter start and its imports) and reads the
results back; a child that ends without them becomes an ``error`` run naming the check that was
running and the child's exit status. A usage error of the child (exit 2) is raised here as the
same one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

from harness.errors import HarnessError
from harness.regressions.entry import CheckOutcome
from harness.regressions.verify import CheckRun, Role, VerifyResult

TRACE = "harness-verify-running: "
"""Prefix of the child's progress lines on standard error: ``<id>\\t<check>\\t<role>``."""
_CHILD = "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))"


def verify_in_child(spec: str) -> VerifyResult:
    """Verify ``spec`` (user code) in a child process; see the module docstring."""
    with tempfile.TemporaryDirectory(prefix="harness-verify-") as scratch:
        result_file = Path(scratch, "result.json")
        argv = [sys.executable, "-c", _CHILD, "regressions", "verify", "--in-process"]
        argv += ["--result-file", str(result_file), "--", spec]
        child = subprocess.run(argv, capture_output=True, text=True, check=False)
        running: tuple[str, str, str] | None = None
        for line in child.stderr.splitlines():
            if line.startswith(TRACE):
                label, check, role = [*line.removeprefix(TRACE).split("\t"), "", ""][:3]
                running = (label, check, role)
            else:
                print(line, file=sys.stderr)
        for line in child.stdout.splitlines():  # what the user's code printed
            print(line, file=sys.stderr)
        if child.returncode == 2 and not result_file.exists():
            errors = [ln for ln in child.stderr.splitlines() if ln.startswith("harness: error: ")]
            if errors:
                raise HarnessError(errors[-1].removeprefix("harness: error: "))
        if result_file.exists():
            (data,) = json.loads(result_file.read_text(encoding="utf-8"))
            return from_dict(cast("dict[str, Any]", data))
    return _died(spec, child.returncode, running)


def _died(spec: str, status: int, running: tuple[str, str, str] | None) -> VerifyResult:
    how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
    if running is None:
        label, check, role = spec, "(before any check)", "variant"
    else:
        label, check, role = running
    error = (
        f"the process {how} while this check ran (os._exit(), or a crash in native code); "
        "the checks after it did not run"
    )
    result = VerifyResult(label, "variant" if role == "variant" else "entry")
    result.runs.append(CheckRun(check, cast("Role", role), None, error, 0.0))
    return result


def from_dict(data: dict[str, Any]) -> VerifyResult:
    """A :class:`VerifyResult` from its :meth:`~VerifyResult.to_dict` form."""
    result = VerifyResult(str(data["id"]), data["kind"], seconds=float(data["seconds"]))
    for run in cast("list[dict[str, Any]]", data["checks"]):
        detail = str(run["detail"])
        outcome = (
            None if run["verdict"] == "error" else CheckOutcome(run["verdict"] == "FAIL", detail)
        )
        error = detail if outcome is None else None
        result.runs.append(
            CheckRun(str(run["check"]), run["variant"], outcome, error, float(run["seconds"]))
        )
    return result


def trace(label: str, check: str, role: str) -> None:
    """The child's progress line: which check of which target starts now."""
    print(f"{TRACE}{label}\t{check}\t{role}", file=sys.stderr, flush=True)
