"""Run single definitions of a vLLM tree without executing the module around them.

For code in modules too heavy to import (pydantic configs, the model runner, ``vllm/utils.py``):
:func:`extract_definitions` executes only the named top-level classes, functions and assignments
of a file, with the file's standard-library imports; :func:`exec_attribute_assignments` runs the
``self.<attr> = ...`` statements of one method on a stand-in object. It is vLLM's own code, in
vLLM's order: annotations are never evaluated, and decorators are dropped (they may name what the
namespace lacks) except ``staticmethod``, ``classmethod`` and ``property`` on methods.
"""

from __future__ import annotations
import __future__

import ast
import contextlib
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.vllm_tree.tree import parse_source

_BUILTIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property"})
_FLAGS = __future__.annotations.compiler_flag


def _is_stdlib_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return all(a.name.split(".")[0] in sys.stdlib_module_names for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] in sys.stdlib_module_names
    return False


def _assigned(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return {node.target.id} if isinstance(node.target, ast.Name) else set()
    return set()


def _strip_decorators(node: ast.ClassDef | ast.FunctionDef) -> None:
    node.decorator_list = []
    for method in node.body if isinstance(node, ast.ClassDef) else []:
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            method.decorator_list = [
                d
                for d in method.decorator_list
                if isinstance(d, ast.Name) and d.id in _BUILTIN_DECORATORS
            ]


def extract_definitions(
    path: Path, names: Iterable[str], namespace: dict[str, Any], *, required: bool = True
) -> list[str]:
    """Execute the top-level definitions of ``path`` called ``names`` into ``namespace``;
    returns the names ``path`` does not define (an error when ``required``)."""
    wanted = set(names)
    kept: list[ast.stmt] = []
    for node in parse_source(path).body:
        if _is_stdlib_import(node):
            with contextlib.suppress(ImportError):  # a name of a later Python's standard library
                exec(
                    compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace
                )
        elif isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in wanted:
            _strip_decorators(node)
            kept.append(node)
            wanted.discard(node.name)
        elif _assigned(node) & wanted:
            kept.append(node)
            wanted -= _assigned(node)
    if wanted and required:
        raise HarnessError(f"{path} defines none of: {', '.join(sorted(wanted))}")
    code = compile(ast.Module(body=kept, type_ignores=[]), str(path), "exec", flags=_FLAGS)
    exec(code, namespace)
    return sorted(wanted)


def exec_attribute_assignments(
    path: Path, class_name: str, method: str, attributes: Iterable[str], namespace: dict[str, Any]
) -> None:
    """Run the top-level ``self.<attr> = ...`` statements of ``class_name.method`` that assign
    ``attributes``, in ``namespace`` (whose ``self`` is the stand-in; it must already hold what
    they read, e.g. ``max_num_tokens``, ``device``, ``pin_memory``)."""
    wanted = set(attributes)
    classes = [
        n for n in parse_source(path).body if isinstance(n, ast.ClassDef) and n.name == class_name
    ]
    functions = [
        n for c in classes for n in c.body if isinstance(n, ast.FunctionDef) and n.name == method
    ]
    if not functions:
        raise HarnessError(f"{path} has no {class_name}.{method}")
    kept: list[ast.stmt] = []
    for node in functions[0].body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        names = {
            t.attr
            for t in targets
            if isinstance(t, ast.Attribute)
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
        }
        if names & wanted:
            kept.append(node)
            wanted -= names
    if wanted:
        raise HarnessError(
            f"{path} {class_name}.{method} assigns none of: {', '.join(sorted(wanted))}"
        )
    exec(compile(ast.Module(body=kept, type_ignores=[]), str(path), "exec"), namespace)
