"""Read a vLLM tree's own definitions without executing the module around them.

For config modules too heavy to import (pydantic, transformers): :func:`field_defaults` reads a
config dataclass's literal field defaults from its source, :func:`extract_top_level` executes
only the named top-level classes and functions of a file (an enum such as ``CUDAGraphMode``).
"""

from __future__ import annotations
import __future__

import ast
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

_NO_DEFAULT = object()


def parse_file(path: Path) -> ast.Module:
    """The syntax tree of ``path``; an unreadable or unparsable file is a one-line error."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise HarnessError(f"cannot read {path}: {exc.strerror}") from None
    except SyntaxError as exc:
        raise HarnessError(f"cannot parse {path}: {exc.msg} (line {exc.lineno})") from None


def find_class(paths: Iterable[Path], name: str) -> tuple[Path, ast.ClassDef] | None:
    """The first top-level ``class name`` in ``paths`` (files that do not exist are skipped)."""
    for path in paths:
        if not path.is_file():
            continue
        for node in parse_file(path).body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return path, node
    return None


def _literal_default(value: ast.expr) -> object:
    """A default written as a literal, ``Field(default=...)`` or ``field(default=...)``."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name | ast.Attribute):
        func = value.func.id if isinstance(value.func, ast.Name) else value.func.attr
        if func in ("Field", "field"):
            for keyword in value.keywords:
                if keyword.arg == "default":
                    return _literal_default(keyword.value)
        return _NO_DEFAULT
    try:
        return ast.literal_eval(value)
    except ValueError:
        return _NO_DEFAULT


def field_defaults(node: ast.ClassDef) -> dict[str, object]:
    """The class's annotated fields whose default is a literal (others are left out)."""
    defaults: dict[str, object] = {}
    for statement in node.body:
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and statement.value is not None
        ):
            value = _literal_default(statement.value)
            if value is not _NO_DEFAULT:
                defaults[statement.target.id] = value
    return defaults


def _is_stdlib_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return all(a.name.split(".")[0] in sys.stdlib_module_names for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] in sys.stdlib_module_names
    return False


def extract_top_level(path: Path, names: Iterable[str], namespace: dict[str, Any]) -> list[str]:
    """Execute the top-level classes and functions of ``path`` called ``names`` into
    ``namespace`` (annotations are not evaluated; decorators are dropped); returns the names
    that ``path`` does not define."""
    wanted = set(names)
    kept: list[ast.stmt] = []
    for node in parse_file(path).body:
        if _is_stdlib_import(node):
            kept.append(node)  # what the definitions may use (enum, dataclasses ...)
        elif isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in wanted:
            node.decorator_list = []
            kept.append(node)
            wanted.discard(node.name)
    flags = __future__.annotations.compiler_flag
    code = compile(ast.Module(body=kept, type_ignores=[]), str(path), "exec", flags=flags)
    exec(code, namespace)
    return sorted(wanted)
