"""``if self.N == 0:`` decided for a class from the literal its MRO binds ``N`` to first, when no
method that may run, nor any file on another object, changes it."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from harness.overrides.evidence.attributes import Stores
from harness.overrides.evidence.conditions import necessary
from harness.overrides.evidence.reach import NO, Reach
from harness.overrides.facts.uses import inert, parents_of
from harness.overrides.model.classdefs import class_node
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project


def _class_binding(stmt: ast.stmt, attr: str) -> ast.expr | None:
    """The value a class-body statement binds ``attr`` to (``attr = 2``), if it does; a
    negative number literal as a constant."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        targets = [stmt.target]
    else:
        return None
    if not any(isinstance(t, ast.Name) and t.id == attr for t in targets):
        return None
    value = stmt.value
    if (
        isinstance(value, ast.UnaryOp)
        and isinstance(value.op, ast.USub)
        and isinstance(value.operand, ast.Constant)
        and isinstance(value.operand.value, (int, float))
    ):
        return ast.Constant(-value.operand.value)
    return value


def _self_attr(node: ast.AST, me: str = "self") -> str | None:
    """``x`` for ``<me>.x``."""
    return node.attr if isinstance(node, ast.Attribute) and _is_name(node.value, me) else None


UNSET = object()
"""The value of an attribute nothing sets: reading it raises ``AttributeError``."""
_LOOKUP_HOOKS = ("__getattr__", "__getattribute__")

QUIET = 0
"""The function never changes the attribute."""
WRITES = 1
"""It may."""
KEYWORDS = 2
"""It sets attributes named by the keywords its callers pass (``for k, v in kwargs.items():
setattr(self, k, v)``): it writes the attribute only if a call passes that keyword."""


def touches(func: ast.FunctionDef | ast.AsyncFunctionDef, attr: str) -> int:
    """Whether ``func`` may change ``self.<attr>``: any use other than an inert read,
    ``setattr(self, ...)``, ``vars(self)`` or a change of ``self.__dict__``."""
    args = [*func.args.posonlyargs, *func.args.args]
    if not args:
        return QUIET
    me = args[0].arg
    given: set[str] = {args[1].arg} if func.name == "__setattr__" and len(args) > 1 else set()
    keyed = _keyword_names(func)
    parents = parents_of(func)
    found = QUIET
    for node in ast.walk(func):
        if isinstance(node, ast.Call):
            for name in _names_set(node, me):
                if isinstance(name, ast.Name) and name.id in keyed:
                    found = KEYWORDS
                elif not (isinstance(name, ast.Name) and name.id in given) and (
                    not isinstance(name, ast.Constant) or name.value == attr
                ):
                    return WRITES
        if _self_attr(node, me) == "__dict__" and not inert(node, parents, changes=True):
            return WRITES
        if _self_attr(node, me) != attr:
            continue
        holder = parents.get(id(node))
        stored = isinstance(holder, ast.Assign | ast.AnnAssign) and node is not holder.value
        if stored or isinstance(holder, ast.Delete) or not inert(node, parents, changes=True):
            return WRITES
    return found


def _names_set(call: ast.Call, me: str) -> list[ast.expr]:
    """The name arguments with which ``call`` may set attributes of ``<me>`` (``setattr``,
    ``__setattr__``); a computed name, or ``vars(<me>)``, stands for any."""
    func, args = call.func, call.args
    if isinstance(func, ast.Name) and func.id == "vars":
        return [ast.Name(id="?", ctx=ast.Load())] if args and _is_name(args[0], me) else []
    if isinstance(func, ast.Name) and func.id == "setattr":
        return args[1:2] if args and _is_name(args[0], me) else []
    if not (isinstance(func, ast.Attribute) and func.attr == "__setattr__"):
        return []
    owner = func.value
    on_super = (
        isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
        and owner.func.id == "super"
    )  # fmt: skip
    if _is_name(owner, me) or on_super:
        return args[:1]
    return args[1:2] if args and _is_name(args[0], me) else []


def _keyword_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Local names that only ever hold a key of the ``**`` parameter: the targets of ``for k
    in kwargs``, ``for k in kwargs.keys()``, ``for k, v in kwargs.items()``."""
    kwarg = func.args.kwarg
    if kwarg is None or func.name.startswith("__"):
        return set()  # a dunder's callers (constructors, operators) are not recorded calls
    loops: list[str] = []
    stores: dict[str, int] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        if not isinstance(node, ast.For):
            continue
        source = node.iter
        method = None
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute):
            method, source = source.func.attr, source.func.value
        if not _is_name(source, kwarg.arg) or method not in (None, "keys", "items"):
            continue
        target = node.target
        if method == "items" and isinstance(target, ast.Tuple) and target.elts:
            target = target.elts[0]
        if isinstance(target, ast.Name):
            loops.append(target.id)
    return {name for name in loops if stores.get(name) == 1}


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
Holds = Callable[[object], "bool | None"]
"""Whether a test holds for a value of the attribute it reads (``None``: not decidable)."""


def _literal(node: ast.expr) -> tuple[bool, object]:
    if isinstance(node, ast.Constant):
        return True, node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(
        isinstance(e, ast.Constant) for e in node.elts
    ):
        return True, tuple(e.value for e in node.elts if isinstance(e, ast.Constant))
    return False, None


def _constant_test(test: ast.expr, value: bool) -> list[tuple[str, Holds]]:
    """``self.x`` or ``self.x <op> <literal>`` (either side; ``in`` a tuple, list or set of
    literals) that must be ``value``: ``x``, and whether it is for a given value of ``self.x``."""
    attr = _self_attr(test)
    if attr is not None:
        return [(attr, lambda c: bool(c) == value)]
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return []
    op = _COMPARE.get(type(test.ops[0]))
    left, right = test.left, test.comparators[0]
    attr, flipped = _self_attr(left), False
    if attr is None and not isinstance(test.ops[0], (ast.In, ast.NotIn)):
        attr, left, right, flipped = _self_attr(right), right, left, True
    known, literal = _literal(right)
    if attr is None or op is None or not known:
        return []

    def holds(c: object) -> bool | None:
        try:
            return bool(op(literal, c) if flipped else op(c, literal)) == value
        except Exception:  # an ill-typed comparison: not decided here
            return None

    return [(attr, holds)]


class ClassConstants:
    """Decides ``self.<attr>`` tests for a class, reading the MRO's class bodies on demand."""

    def __init__(
        self, project: Project, reach: Reach, tree_of: Callable[[str], ast.Module | None]
    ) -> None:
        self.project = project
        self.reach = reach
        self.tree_of = tree_of
        self._stores = Stores(project, tree_of)

    def false_for(
        self, x: ClassInfo, module: ModuleInfo, line: int, test: ast.expr | None, value: bool
    ) -> str | None:
        """Why ``test`` cannot be ``value`` for an ``x``: a ``self.<attr>`` it needs is a class
        constant (:meth:`constant_for`) for which it does not hold."""
        for attr, holds in necessary(test, value, _constant_test):
            constant = self.constant_for(x, attr)
            if constant is not None and (constant[0] is UNSET or holds(constant[0]) is False):
                return constant[1]
        return None

    def constant_for(self, x: ClassInfo, attr: str) -> tuple[object, str] | None:
        """The value ``self.<attr>`` always has for an ``x``, with why: the literal the MRO binds it
        to first (``N = 2``), or :data:`UNSET` for an upper-case name no class can supply; and no
        method that may run for an ``x``, nor any file on another object, changes it."""
        project = self.project
        if not project.fully_resolved(x) or self._stores.stored(attr, others=True):
            return None
        found: tuple[object, str] | None = None
        open_ended = False  # a class of the MRO may supply attributes its body does not bind
        for cls in project.mro(x):
            node = class_node(cls, self.tree_of)
            if node is None:
                return None
            if found is None and cls.defines(attr):
                value: ast.expr | None = None
                for stmt in node.body:
                    value = _class_binding(stmt, attr) or value  # the last binding wins
                if attr in cls.methods or not isinstance(value, ast.Constant):
                    return None  # a method, or bound to something else than a literal
                said = (
                    f"{cls.qualname} sets {attr} = {value.value!r} in its class body, and no "
                    f"method of {x.qualname}'s classes changes self.{attr}"
                )
                found = (value.value, said)
            open_ended = open_ended or bool(node.decorator_list or node.keywords)
            open_ended = open_ended or any(n in cls.methods for n in _LOOKUP_HOOKS)
            for stmt in node.body:
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                touch = touches(stmt, attr)
                if touch == QUIET or (touch == KEYWORDS and self._no_call_names(stmt.name, attr)):
                    continue
                if self.reach.runs(x, cls, stmt.name) != NO:
                    return None
        if found is None and not open_ended and attr.isupper():
            return UNSET, (
                f"nothing in {x.qualname}'s classes sets {attr}: reading self.{attr} raises "
                "AttributeError"
            )
        return found

    def _no_call_names(self, method: str, attr: str) -> bool:
        """Whether no call of ``method`` can pass a keyword ``attr``: a private one (users pass no
        such keyword) that no call of that name in the tree passes, all spelling out keywords."""
        return attr.startswith("_") and all(
            not call.starstar and attr not in call.keywords
            for call, _, _ in self.reach.calls(method)
        )
