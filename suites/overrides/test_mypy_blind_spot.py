"""Why the override checker exists: the type checkers beside it miss or blur the crash.

- mypy accepts a renamed parameter in an override in every mode, ``--strict`` included, although
  a keyword call through the base crashes (issue 3's minimal repro, vLLM PR #17483's MLA builders).
- pyright reports the rename, but identically whether a call in the project crashes or nothing
  calls it by keyword: it cannot tell the definite crash from harmless drift.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPRO = "minimal_repro"


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
def test_mypy_strict_reports_nothing(corpus: Any, tmp_path: Path) -> None:
    mypy = [sys.executable, "-m", "mypy", "--strict", "--config-file", os.devnull]
    packages = ["-p", REPRO, "-p", "mla_drift"]
    result = _run([*mypy, "--cache-dir", str(tmp_path), *packages], cwd=corpus.root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found"), result.stdout


@pytest.mark.usefixtures("in_fixtures")
def test_the_checker_reports_the_crash_mypy_accepts(overrides: Any) -> None:
    run = overrides(REPRO)
    assert run.exit_code == 1, run.out
    assert "HO101" in run.out


def _pyright_diagnostics(source: Path, tmp_path: Path) -> list[tuple[str, str]]:
    tmp_path.mkdir()
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({"typeCheckingMode": "standard"}))
    shutil.copy(source, tmp_path / source.name)
    pyright = Path(sys.executable).with_name("pyright")
    result = _run([str(pyright), "--outputjson", source.name], cwd=tmp_path)
    report = json.loads(result.stdout)
    return [(d["rule"], d["severity"]) for d in report["generalDiagnostics"]]


@pytest.mark.slow
def test_pyright_cannot_tell_a_crash_from_harmless_drift(
    corpus: Any, tmp_path: Path, overrides: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashing = corpus.root / REPRO / "repro.py"
    harmless_dir = tmp_path / "harmless"
    harmless_dir.mkdir()
    harmless = harmless_dir / "repro.py"
    # Same classes, but the only call passes `b` positionally: nothing can crash.
    harmless.write_text(crashing.read_text().replace("self.func(a, b=b)", "self.func(a, b)"))

    pyright_crash = _pyright_diagnostics(crashing, tmp_path / "crash")
    pyright_harmless = _pyright_diagnostics(harmless, tmp_path / "harmless-run")
    assert pyright_crash == pyright_harmless == [("reportIncompatibleMethodOverride", "error")]

    monkeypatch.chdir(tmp_path)
    ours = [f["severity"] for f in overrides.json(crashing)] + [
        f["severity"] for f in overrides.json(harmless_dir)
    ]
    assert ours == ["error", "warning"]
