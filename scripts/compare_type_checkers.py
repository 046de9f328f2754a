"""What mypy and pyright say about the minimal repro, beside ``harness overrides``.

The repro (``suites/overrides/fixtures/minimal_repro``) crashes at run time with a TypeError. This
prints what ``mypy --strict`` reports on it, and what pyright reports on it and on a harmless copy
(the only call passes the argument positionally), next to the checker's severities. It prints and
never asserts: third-party output is not ours to test. Usage::

    .venv/bin/python scripts/compare_type_checkers.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "suites" / "overrides" / "fixtures"
REPRO = FIXTURES / "minimal_repro" / "repro.py"


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def mypy_strict(tmp: Path) -> str:
    cmd = [sys.executable, "-m", "mypy", "--strict", "--config-file", os.devnull]
    done = _run([*cmd, "--cache-dir", str(tmp / "mypy"), "-p", "minimal_repro"], FIXTURES)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()


def pyright(source: str, tmp: Path) -> list[tuple[str, str]] | str:
    exe = Path(sys.executable).with_name("pyright")
    if not exe.exists():
        return "pyright not installed"
    tmp.mkdir()
    (tmp / "pyrightconfig.json").write_text(json.dumps({"typeCheckingMode": "standard"}))
    (tmp / "repro.py").write_text(source)
    report = json.loads(_run([str(exe), "--outputjson", "repro.py"], tmp).stdout)
    return [(d["rule"], d["severity"]) for d in report["generalDiagnostics"]]


def ours(source: str, tmp: Path) -> list[str]:
    tmp.mkdir()
    (tmp / "repro.py").write_text(source)
    cmd = [sys.executable, "-I", "-m", "harness.overrides", "--isolated", "--no-cache"]
    done = _run([*cmd, "--format", "json", "repro.py"], tmp)
    return [f["severity"] for f in json.loads(done.stdout)]


def main() -> None:
    crashing = REPRO.read_text()
    harmless = crashing.replace("self.func(a, b=b)", "self.func(a, b)")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        print(f"mypy --strict on the crashing repro: {mypy_strict(tmp)}")
        print(f"pyright, crashing: {pyright(crashing, tmp / 'p1')}")
        print(f"pyright, harmless: {pyright(harmless, tmp / 'p2')}")
        print(f"harness overrides, crashing: {ours(crashing, tmp / 'o1')}")
        print(f"harness overrides, harmless: {ours(harmless, tmp / 'o2')}")


if __name__ == "__main__":
    main()
