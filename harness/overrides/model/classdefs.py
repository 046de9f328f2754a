"""The statements of a class read back from its parsed file: its ``class`` node, its ``def``
statements by name, and the one ``def`` a class runs for a method name."""

from __future__ import annotations

import ast
from collections.abc import Callable

from harness.overrides.facts.blocks import class_functions
from harness.overrides.model.resolve import ClassInfo, Project


def class_node(cls: ClassInfo, tree_of: Callable[[str], ast.Module | None]) -> ast.ClassDef | None:
    """The ``class`` statement of ``cls`` in its parsed file; ``None`` when not found."""
    tree = tree_of(cls.module.file.path)
    if tree is None:
        return None
    line = cls.summary.line
    name = cls.qualname.rpartition(".")[2]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ClassDef)
            and node.name == name
            and (node.lineno == line or any(d.lineno == line for d in node.decorator_list))
        ):
            return node
    return None


def class_defs(
    cls: ClassInfo, tree_of: Callable[[str], ast.Module | None]
) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The ``def`` statements of ``cls``'s body by name, in source order (the last is the one
    the class binds); empty when the class statement is not found."""
    out: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    node = class_node(cls, tree_of)
    for func in class_functions(node) if node is not None else ():
        out.setdefault(func.name, []).append(func)
    return out


def single_def(
    cls: ClassInfo, name: str, tree_of: Callable[[str], ast.Module | None]
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The one ``def`` of ``name`` in ``cls``'s body; ``None`` when there is none or several
    (a property's setter, conditional definitions)."""
    found = class_defs(cls, tree_of).get(name, [])
    return found[0] if len(found) == 1 else None


def read_def(
    project: Project, x: ClassInfo, name: str, tree_of: Callable[[str], ast.Module | None]
) -> tuple[ClassInfo, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The class whose method ``name`` an ``x`` runs (no unread base before it in the MRO)
    and that method's one ``def``; ``None`` when either is not known."""
    definer = project.read_definer(x, name)
    func = None if definer is None else single_def(definer, name, tree_of)
    return None if definer is None or func is None else (definer, func)
