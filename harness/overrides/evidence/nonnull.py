"""Locals that cannot be ``None`` at a test, for one subclass: every value reaching it is not.

``if ids is None: ids = self.all_ids()`` then ``if ids is None: ...``: never true for a
subclass whose ``all_ids`` returns a ``list(...)``.

The statements before the test in its method (each enclosing block's earlier ones, in order)
are read with one fact, whether the local may be ``None``: a parameter may; an assignment
says what its value may be (never ``None``: a literal other than ``None``, a display, a
comprehension, an operator, ``list(...)``/``len(...)``/..., a ``self.m(...)`` whose every
``return`` gives such a value and whose body cannot fall off its end); an ``if`` merges those
of its branches that go on past it, each from what its test says (``x is None``, ``x is not None``,
``isinstance(x, C)``); any other binding (a loop, ``with``, a walrus, ``del``) makes it
unknown, and so does a name the method does not bind (a global).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from harness.overrides.evidence.conditions import necessary
from harness.overrides.evidence.named_classes import enclosing
from harness.overrides.evidence.nones import none_comparison
from harness.overrides.facts.blocks import SCOPES, always_exits, inner_blocks
from harness.overrides.model.classdefs import read_def
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project

Function = ast.FunctionDef | ast.AsyncFunctionDef
_NOT_NONE_CALLS = frozenset(
    {"list", "dict", "set", "tuple", "frozenset", "str", "int", "float", "bool", "len",
     "range", "sorted", "reversed", "enumerate", "zip", "bytes", "repr", "type", "object"}
)  # fmt: skip
_DEPTH = 3


def is_none(test: ast.expr | None, value: bool) -> list[str]:
    """Local names that must be ``None`` for ``test`` to be ``value``: ``name is None`` true,
    ``name is not None`` false, ``not name`` is not enough; through ``not``/``and``/``or``."""
    return necessary(test, value, _is_none)


def _is_none(test: ast.expr, value: bool) -> list[str]:
    compared = none_comparison(test)
    if compared is None:
        return []
    name, is_ = compared
    return [name] if is_ == value else []


def _binds(node: ast.AST, name: str) -> bool:
    """Whether ``node`` binds ``name`` in its own scope (any store or ``del``)."""
    stack = [node]
    while stack:
        child = stack.pop()
        if isinstance(child, ast.Name) and child.id == name and not isinstance(child.ctx, ast.Load):
            return True
        if child is node or not isinstance(child, SCOPES):
            stack.extend(ast.iter_child_nodes(child))
    return False


class NonNull:
    """Decides ``name is None`` tests on locals that no ``None`` can reach."""

    def __init__(self, project: Project, tree_of: Callable[[str], ast.Module | None]) -> None:
        self.project = project
        self.tree_of = tree_of

    def never_none(self, x: ClassInfo, module: ModuleInfo, line: int, name: str) -> str | None:
        """Why local ``name`` cannot be ``None`` at ``line`` of ``module`` for an ``x``;
        ``None`` when the code does not show it."""
        tree = self.tree_of(module.file.path)
        chain = enclosing(tree, line) if tree is not None else []
        if not chain or not chain[-1][1] or not self.project.fully_resolved(x):
            return None  # not directly in a method
        func = chain[-1][0]
        params = [*func.args.posonlyargs, *func.args.args]
        if not params:
            return None
        self._x, self._me, self._name = x, params[0].arg, name
        self._said: list[str] = []
        may: bool | None = any(p.arg == name for p in (*params, *func.args.kwonlyargs))
        if not may and not _binds(func, name):
            return None  # a global or a closure's name: anything may have set it
        body: list[ast.stmt] = func.body
        while True:
            holder = next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
            if holder is None:
                return None
            for stmt in body[: body.index(holder)]:
                may = self._after(stmt, may)
                if may is None:
                    return None
            inner = [b for b in inner_blocks(holder) if b and b[0].lineno <= line]
            inner = [b for b in inner if line <= (b[-1].end_lineno or b[-1].lineno)]
            if not inner or isinstance(holder, (*SCOPES, ast.For, ast.AsyncFor, ast.While)):
                break  # the test itself, or a loop body (its earlier rounds are not read)
            if isinstance(holder, ast.If):
                may = self._refined(holder.test, inner[0] is holder.body, may)
            body = inner[0]
        if may is not False:
            return None
        sources = "; ".join(dict.fromkeys(self._said)) or "every value it is given is one"
        return f"{name} is never None there for {x.qualname} ({sources})"

    def _after(self, stmt: ast.stmt, may: bool | None) -> bool | None:
        """Whether the local may be ``None`` after ``stmt`` (``None``: unknown)."""
        name = self._name
        if may is None:
            return None
        if isinstance(stmt, ast.If) and not _binds(stmt.test, name):
            reaching: list[bool] = []  # the branches that go on past the `if`
            for branch, truth in ((stmt.body, True), (stmt.orelse, False)):
                if may is False and name in is_none(stmt.test, truth):
                    continue  # the branch needs the local None: it does not run
                state = self._refined(stmt.test, truth, may)
                for inner in branch:
                    state = self._after(inner, state)
                if state is None:
                    return None
                if not always_exits(branch):
                    reaching.append(state)
            return any(reaching)
        if not _binds(stmt, name):
            return may
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == name
        ):
            return None if _binds(stmt.value, name) else self._may_be_none(stmt.value, 0)
        return None

    def _refined(self, test: ast.expr, truth: bool, may: bool | None) -> bool | None:
        """What the local may be where ``test`` has the value ``truth``."""
        if may is None:
            return None
        if any(n == self._name for n in is_none(test, not truth)) or self._typed(test, truth):
            return False  # `x is not None` holds there, or `isinstance(x, C)`
        return may

    def _typed(self, test: ast.expr, truth: bool) -> bool:
        """Whether ``isinstance(<local>, C)`` must hold where ``test`` is ``truth``."""
        found = necessary(test, truth, self._isinstance)
        return bool(found)

    def _isinstance(self, test: ast.expr, value: bool) -> list[bool]:
        if (
            value
            and isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance"
            and len(test.args) == 2
            and isinstance(test.args[0], ast.Name)
            and test.args[0].id == self._name
            and "None" not in ast.unparse(test.args[1])
        ):
            return [True]
        return []

    def _may_be_none(self, value: ast.expr, depth: int) -> bool | None:
        """Whether ``value`` may be ``None`` (``None``: unknown)."""
        if isinstance(value, ast.Constant):
            return value.value is None
        if isinstance(
            value,
            (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
             ast.GeneratorExp, ast.JoinedStr, ast.BinOp, ast.Compare, ast.Lambda),
        ):  # fmt: skip
            return False
        if not isinstance(value, ast.Call):
            return None
        func = value.func
        if isinstance(func, ast.Name) and func.id in _NOT_NONE_CALLS:
            return False
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == self._me
            and depth < _DEPTH
        ):
            return self._method_may_return_none(func.attr, depth + 1)
        return None

    def _method_may_return_none(self, method: str, depth: int) -> bool | None:
        known = read_def(self.project, self._x, method, self.tree_of)
        if known is None or known[1].decorator_list:
            return None
        definer, func = known
        if isinstance(func, ast.AsyncFunctionDef) or not always_exits(func.body):
            return None  # a coroutine, or it may fall off its end
        returns: list[ast.Return] = []
        stack: list[ast.AST] = list(func.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                return None
            if isinstance(node, ast.Return):
                returns.append(node)
            if not isinstance(node, SCOPES):
                stack.extend(ast.iter_child_nodes(node))
        params = [*func.args.posonlyargs, *func.args.args]
        if not params:
            return None
        outer, self._me = self._me, params[0].arg  # `self` as the method names it
        try:
            if any(
                r.value is None or self._may_be_none(r.value, depth) is not False for r in returns
            ):
                return None
        finally:
            self._me = outer
        self._said.append(f"{definer.qualname}.{method}() never returns None")
        return False
