"""Run single definitions of a vLLM tree without executing the module around them.

For code in modules too heavy to import (pydantic configs, the model runner, ``vllm/utils.py``):
:func:`extract_definitions` executes only the named top-level classes, functions and assignments
of a file, with the file's standard-library imports; :func:`exec_attribute_assignments` runs the
``self.<attr> = ...`` statements of one method on a stand-in object. It is vLLM's own code, in
vLLM's order: annotations are never evaluated, and only decorators the standard library gives
(``dataclass``, ``functools.cache``; ``staticmethod``, ``classmethod``, ``property`` on methods)
are kept: others may name what the namespace lacks (``triton.jit``, vLLM's own).
"""

from __future__ import annotations
import __future__

import ast
import contextlib
import sys
import types
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, describe_error
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


def _bound(node: ast.stmt) -> set[str]:
    """The names a standard-library import binds."""
    names = node.names if isinstance(node, ast.Import | ast.ImportFrom) else []
    return {(a.asname or a.name).split(".")[0] for a in names}


def _root(decorator: ast.expr) -> str | None:
    while isinstance(decorator, ast.Call | ast.Attribute):
        decorator = decorator.func if isinstance(decorator, ast.Call) else decorator.value
    return decorator.id if isinstance(decorator, ast.Name) else None


def _keep_decorators(node: ast.ClassDef | ast.FunctionDef, stdlib: set[str]) -> None:
    """Keep the decorators of ``node`` and its methods that the standard library gives
    (``dataclass``, ``functools.cache`` ...), and ``staticmethod``, ``classmethod`` and
    ``property`` on methods."""
    node.decorator_list = [d for d in node.decorator_list if _root(d) in stdlib]
    allowed = stdlib | _BUILTIN_DECORATORS
    for method in node.body if isinstance(node, ast.ClassDef) else []:
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            method.decorator_list = [d for d in method.decorator_list if _root(d) in allowed]


def extract_definitions(
    path: Path, names: Iterable[str], namespace: dict[str, Any], *, required: bool = True
) -> list[str]:
    """Execute the top-level definitions of ``path`` called ``names`` into ``namespace``;
    returns the names ``path`` does not define (an error when ``required``)."""
    wanted = set(names)
    kept: list[ast.stmt] = []
    stdlib: set[str] = set()
    for node in parse_source(path).body:
        if _is_stdlib_import(node):
            with contextlib.suppress(ImportError):  # a name of a later Python's standard library
                exec(
                    compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace
                )
                stdlib |= _bound(node)
        elif isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in wanted:
            _keep_decorators(node, stdlib)
            kept.append(node)
            wanted.discard(node.name)
        elif _assigned(node) & wanted:
            kept.append(node)
            wanted -= _assigned(node)
    if wanted and required:
        raise HarnessError(f"{path} defines none of: {', '.join(sorted(wanted))}")
    code = compile(ast.Module(body=kept, type_ignores=[]), str(path), "exec", flags=_FLAGS)
    with _module_named(namespace):
        try:
            exec(code, namespace)
        except Exception as exc:
            raise HarnessError(f"cannot run definitions of {path}: {describe_error(exc)}") from None
    return sorted(wanted)


@contextlib.contextmanager
def _module_named(namespace: dict[str, Any]) -> Generator[None]:
    """``sys.modules`` holds a module of the namespace's ``__name__`` while its classes are made
    (``dataclass`` looks their string annotations up there: ``ClassVar``, ``KW_ONLY``)."""
    name = namespace.get("__name__")
    if not isinstance(name, str) or name in sys.modules:
        yield
        return
    view = types.ModuleType(name)
    view.__dict__.update(namespace)
    sys.modules[name] = view
    try:
        yield
    finally:
        if sys.modules.get(name) is view:
            del sys.modules[name]


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
