"""Each bisect test gets its own temporary directory (``TMPDIR``, for itself and the processes it
starts), so a test that looks for leftover worktrees sees only its own, under any ``-n``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def own_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``TMPDIR`` is a fresh directory under ``tmp_path`` for the test's whole run."""
    path = tmp_path / "tmpdir"
    path.mkdir()
    monkeypatch.setenv("TMPDIR", str(path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # recomputed from TMPDIR, restored afterwards
    return path
