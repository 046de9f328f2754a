"""``python -m harness.overrides``: the subcommand alone, same exit-code contract."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.overrides.__main__ import main


def test_runs_the_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.py").write_text(
        "class A:\n    def f(self, a): ...\n    def g(self): self.f(a=1)\nclass B(A):\n    def f(self, b): ...\n"
    )
    assert main([str(tmp_path), "--no-cache", "--format", "github"]) == 1
    assert capsys.readouterr().out.startswith("::error file=")
    assert main([str(tmp_path / "missing")]) == 2
    assert "path does not exist" in capsys.readouterr().err


def test_does_not_import_torch() -> None:
    code = "import sys, harness.overrides.__main__ as m; m.main(['--list-rules']); print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().endswith("False")


def test_python_m_in_the_scanned_tree_never_imports_it(tmp_path: Path) -> None:
    """``python -m`` puts the working directory first on sys.path: a tree's ``ast.py`` (or
    ``dataclasses.py``...) must not shadow the standard library in the checker."""
    ran = tmp_path / "ran"
    ran.mkdir()
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("ast", "tokenize", "inspect", "dataclasses", "json", "enum", "re"):
        (tree / f"{name}.py").write_text(f"open({str(ran / name)!r}, 'w').close()\n")
    (tree / "m.py").write_text(
        "class A:\n    def f(self, a): ...\n    def g(self): self.f(a=1)\nclass B(A):\n    def f(self, b): ...\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "harness.overrides", "--no-cache", "."],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    assert sorted(p.name for p in ran.iterdir()) == []
    assert done.returncode == 1, done.stdout + done.stderr
    assert "HO101" in done.stdout
