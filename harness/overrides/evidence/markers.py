"""Marks decorators put on methods, and the tests that read them.

``if not utils.is_default(self.build): return`` then ``self.build(shape)`` calls ``build``
only when it carries the mark ``@utils.default`` sets (``method._is_default = True``).

A **tester** is ``getattr(self.m, "flag", <falsy>)``, ``hasattr(self.m, "flag")``, or
``f(self.m)`` of a module-level function of the tree that returns one of those on its
parameter. A **marker** is a module-level function that sets ``<param>.flag = <truthy>`` and
returns its parameter. ``X``'s ``m`` (one plain ``def``, no unread base before it) carries the
mark when a decorator of it is a marker of that flag, and not when every decorator is another
function of the tree or ``staticmethod``/``classmethod``/``abstractmethod``/``override``.
Nothing is decided when a line outside the markers may set the flag, or a decorator is not
found.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from harness.overrides.evidence.attributes import modules_naming
from harness.overrides.evidence.conditions import necessary
from harness.overrides.facts.signature import dotted_name
from harness.overrides.model.classdefs import read_def
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project

Function = ast.FunctionDef | ast.AsyncFunctionDef
Test = tuple[ast.expr, str, bool]
"""A tester call, the method it reads (``self.<m>``), and whether the mark must be there."""
_PLAIN = frozenset({"staticmethod", "classmethod", "abstractmethod", "override"})
"""Decorators that set no marks."""


def mark_tests(test: ast.expr | None, value: bool) -> list[Test]:
    """The tester calls (on ``self.<m>``, any function) that must be ``value``'s truth for
    ``test`` to be ``value``, through ``not``, ``and`` and ``or``."""
    return necessary(test, value, _mark_test)


def _mark_test(test: ast.expr, value: bool) -> list[Test]:
    if not isinstance(test, ast.Call) or test.keywords or not test.args:
        return []
    method = test.args[0]
    if (
        isinstance(method, ast.Attribute)
        and isinstance(method.value, ast.Name)
        and method.value.id == "self"
    ):
        return [(test, method.attr, value)]
    return []


def _read_flag(call: ast.expr) -> str | None:
    """The flag of ``getattr(<obj>, "flag", <falsy>)`` or ``hasattr(<obj>, "flag")``."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)) or call.keywords:
        return None
    args = call.args
    name = args[1] if len(args) > 1 else None
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return None
    if call.func.id == "hasattr" and len(args) == 2:
        return name.value
    default = args[2] if len(args) == 3 else None
    if call.func.id == "getattr" and isinstance(default, ast.Constant) and not default.value:
        return name.value
    return None


def _body(func: Function) -> list[ast.stmt]:
    """``func``'s statements after its docstring."""
    body = func.body
    first = body[0] if body else None
    docstring = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    return body[1:] if docstring else body


def _param(func: Function) -> str | None:
    params = [*func.args.posonlyargs, *func.args.args]
    return params[0].arg if len(params) == 1 and not func.args.kwonlyargs else None


def flag_tested(func: Function) -> str | None:
    """The flag a one-parameter ``func`` returns the test of, when that is all it does."""
    param, body = _param(func), _body(func)
    if param is None or len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    value = body[0].value
    if not (isinstance(value, ast.Call) and value.args):
        return None
    first = value.args[0]
    return _read_flag(value) if isinstance(first, ast.Name) and first.id == param else None


def marker_flags(func: Function) -> frozenset[str]:
    """The flags a one-parameter ``func`` sets to a truthy constant on its parameter before
    returning it (``method._is_default = True; return method``)."""
    param, body = _param(func), _body(func)
    if param is None or not body:
        return frozenset()
    last = body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name)):
        return frozenset()
    if last.value.id != param:
        return frozenset()
    flags: set[str] = set()
    for stmt in body[:-1]:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            return frozenset()
        target, value = stmt.targets[0], stmt.value
        if not (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == param
            and isinstance(value, ast.Constant)
            and value.value
        ):
            return frozenset()
        flags.add(target.attr)
    return frozenset(flags)


def tree_function(
    project: Project, tree_of: Callable[[str], ast.Module | None], module: ModuleInfo, dotted: str
) -> Function | None:
    """The module-level ``def`` of the tree that ``dotted`` names in ``module`` (the last of
    that name: ``@overload`` stubs come before it)."""
    home = project.function_home(module, dotted)
    if home is None:
        return None
    where, name = home
    tree = tree_of(where.file.path)
    found: Function | None = None
    for stmt in tree.body if tree is not None else ():
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            found = stmt
    return found


class Markers:
    """Decides tester calls for a class from the decorators of the method they read."""

    def __init__(self, project: Project, tree_of: Callable[[str], ast.Module | None]) -> None:
        self.project = project
        self.tree_of = tree_of
        self._set: dict[str, bool] = {}

    def decided(self, x: ClassInfo, module: ModuleInfo, test: Test) -> str | None:
        """Why tester ``test`` (written in ``module``) cannot have the value it needs for an
        ``x``, said; ``None`` when the code does not decide it."""
        call, method, wanted = test
        assert isinstance(call, ast.Call)
        flag = self._flag(module, call)
        if flag is None or self._set_elsewhere(flag):
            return None
        known = read_def(self.project, x, method, self.tree_of)
        if known is None:
            return None
        definer, func = known
        marks = False
        for decorator in func.decorator_list:
            name = dotted_name(decorator)
            if name is not None and name.rpartition(".")[2] in _PLAIN:
                continue
            found = self._function(definer.module, name) if name is not None else None
            if found is None:
                return None
            marks = marks or flag in marker_flags(found)
        if marks == wanted:
            return None
        where = f"{definer.qualname}.{method}()"
        if marks:
            return f"{where} carries the mark {flag} that its decorator sets"
        return f"{where} has no decorator that sets {flag}"

    def _flag(self, module: ModuleInfo, call: ast.Call) -> str | None:
        direct = _read_flag(call)
        if direct is not None:
            return direct
        name = dotted_name(call.func)
        if name is None or len(call.args) != 1:
            return None
        func = self._function(module, name)
        return None if func is None else flag_tested(func)

    def _function(self, module: ModuleInfo, dotted: str) -> Function | None:
        return tree_function(self.project, self.tree_of, module, dotted)

    def _set_elsewhere(self, flag: str) -> bool:
        """Whether some line of the tree outside the markers of ``flag`` may set it:
        ``<obj>.flag = ...`` or a ``setattr(...)`` naming it (a mark set by hand)."""
        known = self._set.get(flag)
        if known is not None:
            return known
        setting = re.compile(
            rf"""\.{re.escape(flag)}\s*=(?!=)|setattr\(.*["']{re.escape(flag)}["']"""
        )
        found = False
        for module in modules_naming(self.project, flag, by_name=True):
            text = self.project.text(module.file.path)
            if text is None:
                continue
            lines = [n for n, line in enumerate(text.splitlines(), 1) if setting.search(line)]
            if not lines:
                continue
            tree = self.tree_of(module.file.path)
            allowed: set[int] = set()
            for stmt in tree.body if tree is not None else ():
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    flag in marker_flags(stmt)
                ):
                    allowed.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
            if any(n not in allowed for n in lines):
                found = True
                break
        self._set[flag] = found
        return found
