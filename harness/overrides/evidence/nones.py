"""Locals whose ``None``-ness at a test the code decides for one class: after ``if ids is None:
ids = self.all_ids()``, ``if ids is None:`` is false for a class whose ``all_ids`` never returns
``None``. The statements before the test are read for one fact: never, maybe or always ``None``."""

from __future__ import annotations

import ast
from collections.abc import Callable

from harness.overrides.evidence.conditions import necessary
from harness.overrides.evidence.named_classes import Function, descend, method_at, self_call
from harness.overrides.evidence.reach import atom_holds
from harness.overrides.facts.blocks import SCOPES, always_exits, holds, own_returns
from harness.overrides.facts.guards import test_atoms
from harness.overrides.facts.signature import first_param
from harness.overrides.model.classdefs import read_def
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project

State = int | None
"""What a local is at a point: :data:`NEVER`, :data:`MAYBE`, :data:`ALWAYS` ``None``, or
``None`` when the reading does not know."""
NEVER, MAYBE, ALWAYS = 0, 1, 2
_NOT_NONE_CALLS = frozenset(
    {"list", "dict", "set", "tuple", "frozenset", "str", "int", "float", "bool", "len",
     "range", "sorted", "reversed", "enumerate", "zip", "bytes", "repr", "type", "object"}
)  # fmt: skip
_NOT_NONE_VALUES = (
    ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp, ast.JoinedStr, ast.BinOp, ast.Compare, ast.Lambda,
)  # fmt: skip
_DEPTH = 3
_EXITS = (ast.Return, ast.Yield, ast.YieldFrom, ast.Await)


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


def is_none(test: ast.expr | None, value: bool) -> list[str]:
    """Local names that must be ``None`` for ``test`` to be ``value``: ``name is None`` true,
    ``name is not None`` false, ``not name`` is not enough; through ``not``/``and``/``or``."""

    def leaf(test: ast.expr, value: bool) -> list[str]:
        compared = none_comparison(test)
        return [compared[0]] if compared is not None and compared[1] == value else []

    return necessary(test, value, leaf)


def not_none(test: ast.expr | None, value: bool) -> list[str]:
    """Local names that must not be ``None`` for ``test`` to be ``value``: ``name is not None``
    true, ``name is None`` false, ``name`` true; through ``not``/``and``/``or``."""

    def leaf(test: ast.expr, value: bool) -> list[str]:
        compared = none_comparison(test)
        if compared is not None:
            return [compared[0]] if value != compared[1] else []
        return [test.id] if isinstance(test, ast.Name) and value else []

    return necessary(test, value, leaf)


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


def _merge(states: list[int], before: int) -> int:
    """What a local is where the branches holding ``states`` meet; with none, nothing after them
    runs and any answer holds: the one before the branches if decided, else never ``None``."""
    if not states:
        return ALWAYS if before == ALWAYS else NEVER
    return states[0] if len(set(states)) == 1 else MAYBE


class NoneLocals:
    """Decides ``name is None`` tests on locals of a method, for one class at a time."""

    def __init__(self, project: Project, tree_of: Callable[[str], ast.Module | None]) -> None:
        self.project = project
        self.tree_of = tree_of
        self._x: ClassInfo | None = None
        self._me = self._name = ""
        self._said: dict[int, list[str]] = {NEVER: [], ALWAYS: []}
        """Why values reaching the local are never or always ``None``."""

    def false_for(
        self, x: ClassInfo, module: ModuleInfo, line: int, test: ast.expr | None, value: bool
    ) -> str | None:
        """Why ``test`` cannot be ``value`` for an ``x``: it needs a local ``None`` (``ids is
        None``) that is not, or not ``None`` (``stream is not None``) that always is."""
        for names, needed in ((is_none(test, value), ALWAYS), (not_none(test, value), NEVER)):
            for name in names:
                state = self._state_at(x, module, line, name)
                if state is None or state in (MAYBE, needed):
                    continue
                said = "; ".join(dict.fromkeys(self._said[state]))
                if state == NEVER:
                    return f"{name} is never None there for {x.qualname} ({said or 'every value it is given is one'})"
                return said or f"{name} is None there for {x.qualname}"
        return None

    def _state_at(self, x: ClassInfo, module: ModuleInfo, line: int, name: str) -> State:
        found = method_at(self.tree_of(module.file.path), line)
        if found is None or not self.project.fully_resolved(x):
            return None  # not directly in a method
        func, self._me = found
        self._x, self._name = x, name
        self._said = {NEVER: [], ALWAYS: []}
        params = (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)
        state: State = MAYBE if any(p.arg == name for p in params) else NEVER
        if state == NEVER and not _binds(func, name):
            return None  # a global or a closure's name: anything may have set it
        for before, holder, inner in descend(func.body, line):
            for stmt in before:
                state = self._after(stmt, state)
                if state is None:
                    return None
            if inner is None or isinstance(holder, (*SCOPES, ast.For, ast.AsyncFor, ast.While)):
                return state  # the test itself, or a loop body (its earlier rounds are not read)
            if isinstance(holder, ast.If):
                state = self._refined(holder.test, inner is holder.body, state)
        return None

    def _after(self, stmt: ast.stmt, state: State) -> State:
        """What the local is after ``stmt``."""
        name = self._name
        if state is None:
            return None
        if isinstance(stmt, ast.If) and not _binds(stmt.test, name):
            reaching: list[int] = []  # the branches that go on past the `if`
            for branch, truth in ((stmt.body, True), (stmt.orelse, False)):
                if (state == NEVER and name in is_none(stmt.test, truth)) or (
                    state == ALWAYS and name in not_none(stmt.test, truth)
                ):
                    continue  # the branch needs the local otherwise: it does not run
                inner = self._refined(stmt.test, truth, state)
                for each in branch:
                    inner = self._after(each, inner)
                if inner is None:
                    return None
                if not always_exits(branch):
                    reaching.append(inner)
            return _merge(reaching, state)
        if not _binds(stmt, name):
            return state
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == name
        ):
            return None if _binds(stmt.value, name) else self._value(stmt.value, 0)
        return None

    def _refined(self, test: ast.expr, truth: bool, state: State) -> State:
        """What the local is where ``test`` has the value ``truth``: one that is always
        ``None`` stays so (where a test needs it not ``None``, the code does not run)."""
        if state is None or state == ALWAYS:
            return state
        if self._name in is_none(test, not truth) or necessary(test, truth, self._isinstance):
            return NEVER  # `x is not None` holds there, or `isinstance(x, C)`
        return state

    def _isinstance(self, test: ast.expr, value: bool) -> list[bool]:
        found = (
            value
            and isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance"
            and len(test.args) == 2
            and isinstance(test.args[0], ast.Name)
            and test.args[0].id == self._name
            and "None" not in ast.unparse(test.args[1])
        )
        return [True] if found else []

    def _value(self, value: ast.expr, depth: int) -> State:
        """Whether ``value`` is ``None``."""
        if isinstance(value, ast.Constant):
            return ALWAYS if value.value is None else NEVER
        if isinstance(value, _NOT_NONE_VALUES):
            return NEVER
        if not isinstance(value, ast.Call):
            return None
        func = value.func
        if isinstance(func, ast.Name) and func.id in _NOT_NONE_CALLS:
            return NEVER
        method = self_call(value, self._me)
        return None if method is None or depth >= _DEPTH else self._returned(method, depth + 1)

    def _returned(self, method: str, depth: int) -> State:
        """Whether the class's ``method`` returns ``None``: always, when it starts by
        returning ``None`` under a test that holds for the class; never, when every
        ``return`` gives a value that is not and it cannot fall off its end."""
        x = self._x
        assert x is not None
        known = read_def(self.project, x, method, self.tree_of)
        if known is None or known[1].decorator_list:
            return None
        definer, func = known
        me = first_param(func)
        if me is None:
            return None
        early = self._early_none(x, definer.module, func, me)
        if early is not None:
            self._said[ALWAYS].append(
                f"{self._name} = self.{method}(...) is None for {x.qualname}: "
                f"{definer.qualname}.{method}() returns None first when {early}"
            )
            return ALWAYS
        if (
            isinstance(func, ast.AsyncFunctionDef)
            or not always_exits(func.body)
            or holds(func, (ast.Yield, ast.YieldFrom))
        ):
            return None  # a coroutine or a generator, or it may fall off its end
        returns = own_returns(func)
        outer, self._me = self._me, me  # `self` as the method names it
        try:
            if any(r.value is None or self._value(r.value, depth) != NEVER for r in returns):
                return None
        finally:
            self._me = outer
        self._said[NEVER].append(f"{definer.qualname}.{method}() never returns None")
        return NEVER

    def _early_none(self, x: ClassInfo, module: ModuleInfo, func: Function, me: str) -> str | None:
        """The text of a leading ``if <test>: return None`` of ``func`` whose test holds for
        an ``x``; ``None`` when something else may come first."""
        for stmt in func.body:
            if isinstance(stmt, ast.If) and _returns_none(stmt):
                test = stmt.test
                if self._holds(x, module, test, me) is True:
                    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
                        test = next(v for v in test.values if self._holds(x, module, v, me))
                    return ast.unparse(test)
            if holds(stmt, _EXITS):
                return None
        return None

    def _holds(self, x: ClassInfo, module: ModuleInfo, test: ast.expr, me: str) -> bool | None:
        """``test``'s value for an ``x`` (``self`` named ``me``), when the code decides it."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._holds(x, module, test.operand, me)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp):
            values = [self._holds(x, module, v, me) for v in test.values]
            wanted = isinstance(test.op, ast.Or)  # the value that settles it
            if wanted in values:
                return wanted
            return None if None in values else not wanted
        atoms = test_atoms(test, True, me, {})
        return atom_holds(self.project, x, module, atoms[0]) if len(atoms) == 1 else None


def _returns_none(stmt: ast.If) -> bool:
    """``if ...: return None`` (or ``return``), nothing else in the branch returning."""
    last = stmt.body[-1]
    value = last.value if isinstance(last, ast.Return) else None
    none = value is None or (isinstance(value, ast.Constant) and value.value is None)
    return (
        isinstance(last, ast.Return) and none and not any(holds(s, _EXITS) for s in stmt.body[:-1])
    )
