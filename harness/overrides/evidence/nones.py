"""Locals that always hold ``None`` for one subclass: ``stream = self.m(...)`` where the ``m``
that subclass runs returns ``None`` before anything else.

``if stream is None: ... else: self.decode(..., on_frames=stream)``: the ``else`` cannot run for
a class ``X`` when ``stream`` is bound once in its function, to ``self.m(...)``, and the ``m``
of ``X``'s MRO starts, before any other ``return``, ``yield`` or ``await``, with ``if <test>:
return None`` (or a bare ``return``) whose test holds for ``X``: ``type(self).f is not C.f``
(also ``self.__class__.f``) when ``X``'s ``f`` is not ``C``'s, ``type(self).f is C.f`` when it
is, ``isinstance(self, C)`` when ``X`` is a ``C``, and through ``or``, ``and`` and ``not``. The
classes must be read and fully resolved, or nothing is decided.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from harness.overrides.evidence.conditions import necessary
from harness.overrides.evidence.guard_atoms import atom_holds
from harness.overrides.evidence.named_classes import enclosing
from harness.overrides.facts.blocks import holds
from harness.overrides.facts.guards import test_atoms
from harness.overrides.model.classdefs import single_def
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project

Function = ast.FunctionDef | ast.AsyncFunctionDef
_EXITS = (ast.Return, ast.Yield, ast.YieldFrom, ast.Await)


def not_none(test: ast.expr | None, value: bool) -> list[str]:
    """Local names that must not be ``None`` for ``test`` to be ``value``: ``name is not None``
    true, ``name is None`` false, ``name`` true, and through ``not``, ``and`` (true) and
    ``or`` (false)."""
    return necessary(test, value, _not_none)


def _not_none(test: ast.expr, value: bool) -> list[str]:
    compared = none_comparison(test)
    if compared is not None:
        name, is_none = compared
        return [name] if value != is_none else []
    return [test.id] if isinstance(test, ast.Name) and value else []


def none_comparison(test: ast.expr) -> tuple[str, bool] | None:
    """``(name, True)`` for ``name is None``, ``(name, False)`` for ``name is not None``."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is | ast.IsNot)
        and isinstance(test.left, ast.Name)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return test.left.id, isinstance(test.ops[0], ast.Is)
    return None


def _exits(node: ast.AST) -> bool:
    """Whether ``node`` holds a ``return``/``yield``/``await`` of its own scope."""
    return holds(node, _EXITS)


def _returns_none(stmt: ast.If) -> bool:
    """``if ...: return None`` (or ``return``), nothing else in the branch returning."""
    last = stmt.body[-1]
    if not isinstance(last, ast.Return):
        return False
    if last.value is not None and not (
        isinstance(last.value, ast.Constant) and last.value.value is None
    ):
        return False
    return not any(_exits(s) for s in stmt.body[:-1])


class NoneLocals:
    """Decides ``name is None`` tests on locals bound to a ``self`` method's result."""

    def __init__(self, project: Project, tree_of: Callable[[str], ast.Module | None]) -> None:
        self.project = project
        self.tree_of = tree_of

    def none_for(self, x: ClassInfo, module: ModuleInfo, line: int, name: str) -> str | None:
        """Why local ``name``, in the method holding ``line`` of ``module``, is ``None`` for
        an ``x``; ``None`` when the code does not show it."""
        tree = self.tree_of(module.file.path)
        chain = enclosing(tree, line) if tree is not None else []
        if not chain or not chain[-1][1]:
            return None  # not directly in a method
        func = chain[-1][0]
        params = [*func.args.posonlyargs, *func.args.args]
        if not params:
            return None
        method = self._bound_to_self_call(func, params[0].arg, name)
        if method is None or not self.project.fully_resolved(x):
            return None
        definer = self.project.definer(x, method)
        callee = self._function(definer, method) if definer is not None else None
        if definer is None or callee is None:
            return None
        why = self._early_none(x, definer.module, callee)
        if why is None:
            return None
        return (
            f"{name} = self.{method}(...) is None for {x.qualname}: "
            f"{definer.qualname}.{method}() returns None first when {why}"
        )

    @staticmethod
    def _bound_to_self_call(func: Function, me: str, name: str) -> str | None:
        """The method ``m`` when ``name`` is bound once in ``func``, to ``<me>.m(...)``."""
        stores = [
            node
            for node in ast.walk(func)
            if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load)
        ]
        if len(stores) != 1:
            return None
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and node.targets[0] is stores[0]
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and isinstance(node.value.func.value, ast.Name)
                and node.value.func.value.id == me
            ):
                return node.value.func.attr
        return None

    def _function(self, cls: ClassInfo, method: str) -> Function | None:
        found = single_def(cls, method, self.tree_of)
        return found if found is not None and not found.decorator_list else None

    def _early_none(self, x: ClassInfo, module: ModuleInfo, func: Function) -> str | None:
        """The test text of a leading ``if <test>: return None`` of ``func`` that holds for
        an ``x``; ``None`` when something else may come first."""
        params = [*func.args.posonlyargs, *func.args.args]
        if not params:
            return None
        me = params[0].arg
        for stmt in func.body:
            if isinstance(stmt, ast.If) and _returns_none(stmt):
                test = stmt.test
                if self._value(x, module, test, me) is True:
                    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
                        test = next(v for v in test.values if self._value(x, module, v, me))
                    return ast.unparse(test)
            if _exits(stmt):
                return None
        return None

    def _value(self, x: ClassInfo, module: ModuleInfo, test: ast.expr, me: str) -> bool | None:
        """``test``'s value for an ``x`` (``self`` named ``me``), when the code decides it."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._value(x, module, test.operand, me)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp):
            values = [self._value(x, module, v, me) for v in test.values]
            wanted = isinstance(test.op, ast.Or)  # the value that settles it
            if wanted in values:
                return wanted
            return None if None in values else not wanted
        atoms = test_atoms(test, True, me, {})
        if len(atoms) != 1:
            return None
        return atom_holds(self.project, x, module, atoms[0])
