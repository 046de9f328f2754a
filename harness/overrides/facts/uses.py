"""How a function uses a value: whether it may call it, and whether it may change it.

A use is inert when the value is only tested, compared, iterated, subscripted, formatted, or passed
to a builtin that neither calls nor changes it (``len(self._hooks) == 0``); reading an attribute of
it is inert unless that attribute is called (``.append(h)``, bar read-only methods such as
``.get``). Anything else may call or change it.
"""

from __future__ import annotations

import ast

from harness.overrides.facts.signature import dotted_name

_INERT_BUILTINS = frozenset(
    {"isinstance", "issubclass", "hasattr", "getattr", "len", "type", "id", "repr", "str",
     "bool", "print", "sorted", "list", "tuple", "set", "dict", "iter", "next", "any", "all"}
)  # fmt: skip
_READ_ONLY_METHODS = frozenset(
    {"get", "keys", "values", "items", "copy", "count", "index", "startswith", "endswith"}
)
Parents = dict[int, ast.AST]
"""``id(node)`` -> the node holding it."""


def parents_of(root: ast.AST) -> Parents:
    """The parent of every node under ``root``."""
    return {id(child): node for node in ast.walk(root) for child in ast.iter_child_nodes(node)}


def inert(node: ast.AST, parents: Parents, *, changes: bool) -> bool:
    """Whether the expression around ``node`` uses its value without calling it (and, with
    ``changes``, without changing it either)."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Attribute):  # `node` is its value (its one expression)
        if not changes:
            return True
        call = parents.get(id(parent))
        called = isinstance(call, ast.Call) and call.func is parent
        return not called or parent.attr in _READ_ONLY_METHODS
    if isinstance(parent, ast.Subscript):
        return parent.value is node and (not changes or isinstance(parent.ctx, ast.Load))
    if isinstance(parent, ast.Compare | ast.UnaryOp | ast.FormattedValue):
        return True
    if isinstance(parent, ast.BoolOp):  # `a or b` is one of its values: only a test is inert
        return tested(parent, parents)
    if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert):
        return parent.test is node
    if isinstance(parent, ast.For | ast.AsyncFor):
        return parent.iter is node
    if isinstance(parent, ast.comprehension):
        return parent.iter is node or node in parent.ifs
    if isinstance(parent, ast.Call):
        return (
            node is not parent.func
            and isinstance(parent.func, ast.Name)
            and parent.func.id in _INERT_BUILTINS
        )
    return isinstance(parent, ast.Delete) and not changes


def tested(node: ast.AST, parents: Parents) -> bool:
    """Whether only the truth of ``node``'s value is used."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.BoolOp):
        return tested(parent, parents)
    if isinstance(parent, ast.UnaryOp):
        return isinstance(parent.op, ast.Not)
    if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert):
        return parent.test is node
    return isinstance(parent, ast.comprehension) and node in parent.ifs


INERT = 1
"""A lookup whose value is never called."""
COLLECTED = 2
"""A lookup whose value is only an element of a container built there (``{k: getattr(self, k,
None) for k in keys}``, ``[getattr(self, n) for n in names]``)."""


def _collected(node: ast.AST, parents: Parents) -> bool:
    parent = parents.get(id(node))
    if isinstance(parent, ast.DictComp):
        return parent.value is node
    if isinstance(parent, ast.ListComp | ast.SetComp | ast.GeneratorExp):
        return parent.elt is node
    if isinstance(parent, ast.Dict):
        return any(v is node for v in parent.values)
    if isinstance(parent, ast.List | ast.Tuple):
        return isinstance(parent.ctx, ast.Load)
    return isinstance(parent, ast.Set)


def inert_lookups(
    func: ast.FunctionDef | ast.AsyncFunctionDef, me: str
) -> dict[tuple[int, int], int]:
    """``(line, col)`` of the ``getattr(<me>, <computed name>)`` calls in ``func`` whose
    result is never called (:data:`INERT`: every use of it, or of the one local name it is
    assigned to, is inert) or only collected into a container (:data:`COLLECTED`)."""
    flow = Flow(func)
    parents, loads = flow.parents, flow.loads
    found: dict[tuple[int, int], int] = {}
    for call in flow.taken(me, "", lookup=True):
        if _collected(call, parents):
            found[(call.lineno, call.col_offset)] = COLLECTED
            continue
        if not inert(call, parents, changes=False):
            parent = parents.get(id(call))
            targets = (
                parent.targets
                if isinstance(parent, ast.Assign)
                else [parent.target]
                if isinstance(parent, ast.AnnAssign)
                else []
            )
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            uses = loads.get(targets[0].id, ())
            if not all(inert(use, parents, changes=False) for use in uses):
                continue
        found[(call.lineno, call.col_offset)] = INERT
    return found


RETURNED = "return"
"""A destination: the function returns the value."""
STORED = "store:"
"""A destination, before an attribute name: the function stores the value in ``self.<name>``."""


class Flow:
    """One function's parents, local-name loads, and the bound methods it takes, to follow
    values through it (one walk; attribute reads in a second, when first asked for)."""

    def __init__(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.func = func
        self.parents: Parents = {}
        self.loads: dict[str, list[ast.Name]] = {}
        self._attributes: dict[str, list[ast.Attribute]] | None = None
        """``<name>.<attr>`` reads by ``attr``, gathered on first need."""
        self.lookups: list[ast.Call] = []
        """``getattr(<name>, ...)`` calls."""
        for node in ast.walk(func):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.loads.setdefault(node.id, []).append(node)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name)
            ):
                self.lookups.append(node)

    def taken(self, me: str, method: str, lookup: bool) -> list[ast.expr]:
        """The expressions that take a bound method of ``me``: ``<me>.<method>`` (or
        ``getattr(<me>, "<method>")``), or, for a lookup, ``getattr(<me>, <not a
        constant>)``."""
        out: list[ast.expr] = []
        for call in self.lookups:
            first, name = call.args[0], call.args[1]
            if not (isinstance(first, ast.Name) and first.id == me):
                continue
            if (not lookup and name.value == method) if isinstance(name, ast.Constant) else lookup:
                out.append(call)
        if not lookup:
            out.extend(
                node
                for node in self._attributes_named(method)
                if isinstance(node.value, ast.Name) and node.value.id == me
            )
        return out

    def _attributes_named(self, attr: str) -> list[ast.Attribute]:
        if self._attributes is None:
            self._attributes = {}
            for node in ast.walk(self.func):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Load)
                    and isinstance(node.value, ast.Name)
                ):
                    self._attributes.setdefault(node.attr, []).append(node)
        return self._attributes.get(attr, [])

    def destinations(
        self, node: ast.AST, me: str, seen: set[str] | None = None
    ) -> frozenset[str] | None:
        """Where the value of ``node`` (a bound method, ``self`` named ``me``) goes:
        :data:`RETURNED` and ``STORED + name``; empty when every use is inert; ``None`` when it may
        go anywhere else (``seen``: the local names already followed)."""
        parents = self.parents
        parent = parents.get(id(node))
        while (isinstance(parent, ast.IfExp) and parent.test is not node) or (
            isinstance(parent, ast.BoolOp) and not tested(parent, parents)
        ):
            node, parent = parent, parents.get(id(parent))  # the value passes through
        if isinstance(parent, ast.Return):
            return frozenset({RETURNED})
        if isinstance(parent, ast.Assign | ast.AnnAssign) and parent.value is node:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            seen = set() if seen is None else seen
            out: set[str] = set()
            for target in targets:
                if isinstance(target, ast.Attribute) and dotted_name(target.value) == me:
                    out.add(STORED + target.attr)
                elif isinstance(target, ast.Name):
                    if target.id in seen:
                        continue
                    seen.add(target.id)
                    for use in self.loads.get(target.id, ()):
                        found = self.destinations(use, me, seen)
                        if found is None:
                            return None
                        out.update(found)
                else:
                    return None
            return frozenset(out)
        return frozenset() if inert(node, parents, changes=False) else None
