"""The package stays in rooms a reader can hold: short module docstrings, no very long files.

A module docstring says what the module is for in at most 15 lines (design reasoning lives in
the area docs under ``docs/``). A rule module's docstring is exempt: it is that rule's
documentation, printed by ``harness overrides --explain`` in fixed sections, as ruff documents
its rules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "harness"
MAX_DOCSTRING_LINES = 15
MAX_FILE_LINES = 700
MODULES = sorted(PACKAGE.rglob("*.py"))


def _is_rule_doc(path: Path) -> bool:
    return path.parent.name == "rules" and path.name.startswith("ho")


def test_the_package_has_modules() -> None:
    assert len(MODULES) > 100


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_module_docstring_is_short(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    if doc is None or _is_rule_doc(path):
        return
    lines = len(doc.strip().splitlines())
    assert lines <= MAX_DOCSTRING_LINES, f"{path.name}: module docstring has {lines} lines"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_file_is_not_too_long(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_FILE_LINES, f"{path.name}: {lines} lines"
