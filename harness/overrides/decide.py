"""Conditions whose value the code decides for one subclass: an attribute only filled where
that subclass never runs.

``if not self._hooks: return`` before a call (or ``if self._hooks:`` around it) is false for
a class ``X`` when every method of ``X``'s MRO that touches ``self._hooks``, other than to
test it or to set it to an empty value (``[]``, ``{}``, ``None``, ``False``, ``0``, ``""``,
``()``, ``set()``), is a method that cannot run for ``X`` (:mod:`harness.overrides.reach`),
no class of the MRO defines ``_hooks`` otherwise, and no file of the tree writes ``._hooks``
on another object. Anything else leaves the condition undecided.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from harness.overrides.reach import NO, Reach
from harness.overrides.resolve import ClassInfo, ModuleInfo, Project

_EMPTY_CALLS = frozenset({"list", "dict", "set", "tuple", "frozenset", "str", "bytes"})


def _is_empty(node: ast.expr | None) -> bool:
    if node is None:
        return True
    if isinstance(node, ast.Constant):
        return not node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return not node.elts
    if isinstance(node, ast.Dict):
        return not node.keys
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _EMPTY_CALLS
        and not node.args
        and not node.keywords
    )


def _self_attr(node: ast.AST, self_name: str, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == self_name
    )


def touches(func: ast.FunctionDef | ast.AsyncFunctionDef, attr: str) -> bool:
    """Whether ``func`` may make ``self.<attr>`` truthy: any use other than a test or an
    empty assignment."""
    args = [*func.args.posonlyargs, *func.args.args]
    if not args:
        return False
    me = args[0].arg
    quiet: set[int] = set()
    for node in ast.walk(func):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            test = node.test
            inner = test.operand if isinstance(test, ast.UnaryOp) else test
            if _self_attr(inner, me, attr):
                quiet.add(id(inner))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if _is_empty(node.value):
                quiet.update(id(t) for t in targets if _self_attr(t, me, attr))
    return any(
        _self_attr(node, me, attr) and id(node) not in quiet for node in ast.walk(func)
    ) or any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("setattr", "vars")
        for node in ast.walk(func)
    )


def texts_naming(project: Project, needle: str) -> Iterator[tuple[ModuleInfo, str]]:
    """Every readable file of ``project`` whose text holds ``needle``, with that text."""
    for module in project.all_files():
        try:
            with open(module.file.path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        if needle in text:
            yield module, text


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


class Decider:
    """Decides ``self.<attr>`` tests for a class, reading the MRO's class bodies on demand."""

    def __init__(
        self, project: Project, reach: Reach, tree_of: Callable[[str], ast.Module | None]
    ) -> None:
        self.project = project
        self.reach = reach
        self.tree_of = tree_of
        """The parsed file at a path (``None`` when unreadable)."""
        self._foreign: dict[str, bool] = {}

    def empty_for(self, x: ClassInfo, attr: str) -> str | None:
        """Why ``self.<attr>`` is always empty for an ``x``, or ``None`` when it may not be."""
        project = self.project
        if not project.fully_resolved(x) or self._written_elsewhere(attr):
            return None
        writers: list[str] = []
        for cls in project.mro(x):
            if attr in cls.methods:
                return None  # a method or property of that name
            node = self._class_node(cls)
            if node is None:
                return None
            for stmt in node.body:
                if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    named = any(isinstance(t, ast.Name) and t.id == attr for t in targets)
                    if named and not _is_empty(stmt.value):
                        return None  # a class attribute with a value
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if not touches(stmt, attr):
                    continue
                if self.reach.runs(x, cls, stmt.name) != NO:
                    return None
                writers.append(f"{cls.qualname}.{stmt.name}()")
        if not writers:
            return f"nothing in {x.qualname}'s classes sets self.{attr}"
        if len(writers) == 1:
            return f"only {writers[0]} sets self.{attr}, and it does not run for {x.qualname}"
        shown = ", ".join(writers[:3]) + ("" if len(writers) <= 3 else ", ...")
        return f"only {shown} set self.{attr}, and none of them runs for {x.qualname}"

    def _class_node(self, cls: ClassInfo) -> ast.ClassDef | None:
        return class_node(cls, self.tree_of)

    def _written_elsewhere(self, attr: str) -> bool:
        """Whether some file of the project names ``<obj>.<attr>`` on another object than
        ``self``/``cls`` (textual: a write from outside cannot be ruled out then)."""
        known = self._foreign.get(attr)
        if known is not None:
            return known
        needle = f".{attr}"
        found = False
        for _, text in texts_naming(self.project, needle):
            start = text.find(needle)
            while start != -1:
                end = start + len(needle)
                after = text[end : end + 1]
                if not (after.isalnum() or after == "_"):
                    head = text[max(0, start - 4) : start]
                    if not (head.endswith("self") or head.endswith("cls")):
                        found = True
                        break
                start = text.find(needle, end)
            if found:
                break
        self._foreign[attr] = found
        return found
