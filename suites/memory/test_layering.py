"""Layering: ``harness.memory`` only counts; it imports nothing that runs the engine or sits above.

Checked on the source (every ``import`` anywhere in a file, ``TYPE_CHECKING`` blocks included).
"""

from __future__ import annotations

import ast
from pathlib import Path

import harness.memory

FORBIDDEN = (
    "harness.reference",
    "harness.simulation",
    "harness.regressions",
    "harness.eval",
    "harness.hunt",
    "harness.fidelity",
    "harness.bisect",
)


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
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


def test_memory_imports_nothing_above_it() -> None:
    package = Path(harness.memory.__file__).parent
    offenders = [
        f"{path.relative_to(package.parent.parent)}:{line}: {module}"
        for path in sorted(package.rglob("*.py"))
        for line, module in _imported_modules(ast.parse(path.read_text(), str(path)))
        if _forbidden(module)
    ]
    assert not offenders, "harness.memory imports from above it:\n" + "\n".join(offenders)


def test_the_check_sees_every_spelling() -> None:
    source = """
import harness.regressions
from harness.regressions.flashinfer_oom import X
from harness import regressions
def f():
    from harness.regressions import get_regression
from harness.reference.engine import Engine
"""
    modules = [m for _, m in _imported_modules(ast.parse(source)) if _forbidden(m)]
    assert len({line for line, m in _imported_modules(ast.parse(source)) if _forbidden(m)}) == 5
    assert "harness.regressions.flashinfer_oom" in modules
