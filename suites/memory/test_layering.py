"""Layering: ``harness.memory`` sits below the catalog and never imports ``harness.regressions``.

The memory tools take a backend class (``simulate(..., backend=)``, ``detect_scaling(...,
backend=)``); the CLI's ``--regression`` is resolved by a callable ``harness.cli`` hands in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import harness.memory

FORBIDDEN = "harness.regressions"


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """Every module an ``import`` or ``from ... import`` names, anywhere in the file."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and not node.level:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _forbidden(module: str) -> bool:
    return module == FORBIDDEN or module.startswith(FORBIDDEN + ".")


def test_memory_never_imports_the_catalog() -> None:
    package = Path(harness.memory.__file__).parent
    offenders = [
        f"{path.relative_to(package.parent.parent)}:{line}: {module}"
        for path in sorted(package.rglob("*.py"))
        for line, module in _imported_modules(ast.parse(path.read_text(), str(path)))
        if _forbidden(module)
    ]
    assert not offenders, "harness.memory imports the catalog:\n" + "\n".join(offenders)


def test_the_check_sees_every_spelling() -> None:
    source = """
import harness.regressions
from harness.regressions.flashinfer_oom import X
from harness import regressions
def f():
    from harness.regressions import get_regression
"""
    modules = [m for _, m in _imported_modules(ast.parse(source)) if _forbidden(m)]
    assert len({line for line, m in _imported_modules(ast.parse(source)) if _forbidden(m)}) == 4
    assert "harness.regressions.flashinfer_oom" in modules
