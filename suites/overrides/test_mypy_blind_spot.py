"""The minimal repro that mypy --strict accepts: the checker ranks the crash above harmless drift.

What mypy and pyright print on the same files is third-party output, shown side by side by
``scripts/compare_type_checkers.py`` rather than asserted here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

REPRO = "minimal_repro"


@pytest.mark.usefixtures("in_fixtures")
def test_the_checker_reports_the_crash_mypy_accepts(overrides: Any) -> None:
    run = overrides(REPRO)
    assert run.exit_code == 1, run.out
    assert "HO101" in run.out


def test_a_crash_is_an_error_and_harmless_drift_a_warning(
    corpus: Any, tmp_path: Path, overrides: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashing = corpus.root / REPRO / "repro.py"
    harmless_dir = tmp_path / "harmless"
    harmless_dir.mkdir()
    # Same classes, but the only call passes `b` positionally: nothing can crash.
    source = crashing.read_text()
    assert "self.func(a, b=b)" in source
    (harmless_dir / "repro.py").write_text(source.replace("self.func(a, b=b)", "self.func(a, b)"))
    monkeypatch.chdir(tmp_path)
    severities = [f["severity"] for f in overrides.json(crashing)]
    severities += [f["severity"] for f in overrides.json(harmless_dir)]
    assert severities == ["error", "warning"]
