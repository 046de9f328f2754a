"""Source lines name files relative to the working directory of the moment they are shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.memory.allocation import SourceLine


def test_a_source_line_is_relative_to_the_current_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "pkg" / "mod.py")
    monkeypatch.chdir(tmp_path.parent)  # elsewhere first: the path is shown from there
    assert str(SourceLine(path, 3)) == os.path.join(tmp_path.name, "pkg", "mod.py") + ":3"
    monkeypatch.chdir(tmp_path)  # a later chdir (pytester does one) changes what is shown
    assert str(SourceLine(path, 3)) == os.path.join("pkg", "mod.py") + ":3"
