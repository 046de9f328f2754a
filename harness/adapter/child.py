"""Run a tree's code in a child process: a crash, ``sys.exit`` or ``os._exit`` in it is an error.

:func:`run_in_child` writes a job (JSON) to a temporary directory and runs
``python -m harness.adapter.child JOB RESULT`` with ``VLLM_*`` removed from the environment (so
``vllm.envs`` reads its defaults) and ``TRITON_INTERPRET=1``. The child imports the tree, runs
the job (:mod:`harness.adapter.jobs`) and writes its result. No result file means the child died
(whatever its exit code, 0 included): :class:`ChildDied` says how, with the end of its stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

DEFAULT_TIMEOUT = 900.0


class ChildDied(HarnessError):
    """The child process ended without writing a result."""


def child_environment() -> dict[str, str]:
    """This process's environment without ``VLLM_*`` and with Triton's CPU interpreter on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env["TRITON_INTERPRET"] = "1"
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def run_in_child(job: dict[str, Any], what: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """Run ``job`` in a child process and return its result (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="harness-adapter-") as tmp:
        job_path = Path(tmp) / "job.json"
        result_path = Path(tmp) / "result.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        command = [sys.executable, "-m", "harness.adapter.child", str(job_path), str(result_path)]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=child_environment(),
                timeout=timeout,
                check=False,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            raise ChildDied(f"{what}: the child process ran past {timeout:g} s") from None
        if not result_path.is_file():
            tail = " / ".join(done.stderr.strip().splitlines()[-3:]) or "no output"
            raise ChildDied(
                f"{what}: the child process exited with code {done.returncode} without a "
                f"result (the vLLM tree's code ended it): {tail}"
            )
        result = json.loads(result_path.read_text(encoding="utf-8"))
    if "error" in result:
        raise HarnessError(f"{what}: {result['error']}")
    return result["result"]


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.adapter.child JOB RESULT``."""
    args = sys.argv[1:] if argv is None else argv
    job_path, result_path = Path(args[0]), Path(args[1])
    job = json.loads(job_path.read_text(encoding="utf-8"))
    from harness.adapter.jobs import run_job

    try:
        payload: dict[str, Any] = {"result": run_job(job)}
    except HarnessError as exc:
        payload = {"error": str(exc)}
    except SystemExit as exc:  # the tree's code called sys.exit() outside a guarded step
        payload = {"error": f"the vLLM tree's code called sys.exit({exc.code!r})"}
    result_path.write_text(json.dumps(payload), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
