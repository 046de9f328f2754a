"""Guards around ``self.m(...)`` calls (``isinstance(self, C)``, ``"p" in
inspect.signature(self.m).parameters``, ``type(self).m is C.m``, around the call or as an early exit
before it), and the classes a function raises for.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from harness.overrides.facts.blocks import blocks
from harness.overrides.facts.records import (
    GUARD_IDENTITY,
    GUARD_ISINSTANCE,
    GUARD_PARAM,
    Atom,
    Guard,
)
from harness.overrides.facts.signature import dotted_name

_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def test_atoms(
    test: ast.expr, truth: bool, self_name: str, bound: dict[str, ast.expr], depth: int = 0
) -> list[Atom]:
    """Atoms that hold when ``test`` evaluates to ``truth``; unknown tests give none."""
    if depth > 8:
        return []
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test_atoms(test.operand, not truth, self_name, bound, depth + 1)
    if isinstance(test, ast.BoolOp):
        # `a and b` true: both true; `a or b` false: both false. Otherwise unknown.
        if isinstance(test.op, ast.And) == truth:
            return [
                a for v in test.values for a in test_atoms(v, truth, self_name, bound, depth + 1)
            ]
        return []
    if isinstance(test, ast.Name) and test.id in bound:
        return test_atoms(bound[test.id], truth, self_name, bound, depth + 1)
    checked = _isinstance_of(test)
    if checked is not None and isinstance(checked[0], ast.Name) and checked[0].id == self_name:
        names = [dotted_name(k) for k in checked[1]]
        if all(n is not None for n in names):
            return [Atom(GUARD_ISINSTANCE, tuple(n for n in names if n), not truth, test.lineno)]
        return []
    identity = _identity_test(test, self_name)
    if identity is not None:
        name, owner, is_ = identity
        return [Atom(GUARD_IDENTITY, (name, owner), is_ != truth, test.lineno)]
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.In, ast.NotIn))
        and isinstance(test.left, ast.Constant)
        and isinstance(test.left.value, str)
    ):
        method = _signature_of_self_method(test.comparators[0], self_name)
        if method is not None:
            negated = truth != isinstance(test.ops[0], ast.In)  # True: it runs without the name
            return [Atom(GUARD_PARAM, (method, test.left.value), negated, test.lineno)]
    return []


def _isinstance_of(test: ast.expr) -> tuple[ast.expr, list[ast.expr]] | None:
    """The subject and the classes of ``isinstance(x, C)`` / ``isinstance(x, (C, D))``."""
    if not (
        isinstance(test, ast.Call)
        and dotted_name(test.func) == "isinstance"
        and len(test.args) == 2
    ):
        return None
    kinds = test.args[1]
    return test.args[0], kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]


def _identity_test(test: ast.expr, self_name: str) -> tuple[str, str, bool] | None:
    """``(m, C, True)`` for ``type(self).m is C.m`` (``self.__class__.m`` too; ``False`` for
    ``is not``)."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.left, ast.Attribute)
    ):
        return None
    holder = test.left.value
    own = (
        isinstance(holder, ast.Call)
        and dotted_name(holder.func) == "type"
        and len(holder.args) == 1
        and dotted_name(holder.args[0]) == self_name
    ) or (
        isinstance(holder, ast.Attribute)
        and holder.attr == "__class__"
        and dotted_name(holder.value) == self_name
    )
    other = dotted_name(test.comparators[0])
    if not own or other is None:
        return None
    owner, _, method = other.rpartition(".")
    if method != test.left.attr or not owner:
        return None
    return method, owner, isinstance(test.ops[0], ast.Is)


def _signature_of_self_method(node: ast.expr, self_name: str) -> str | None:
    """``m`` for ``inspect.signature(self.m).parameters`` (or ``.parameters.keys()``)."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "keys"
    ):
        node = node.func.value
    if not (isinstance(node, ast.Attribute) and node.attr == "parameters"):
        return None
    call = node.value
    if not (isinstance(call, ast.Call) and len(call.args) == 1):
        return None
    func = dotted_name(call.func)
    if func is None or func.rpartition(".")[2] != "signature":
        return None
    target = call.args[0]
    if isinstance(target, ast.Attribute) and dotted_name(target.value) == self_name:
        return target.attr
    return None


def _bound_once(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """Local names assigned exactly once in ``func`` (by a plain ``name = value``)."""
    values: dict[str, ast.expr] = {}
    counts: dict[str, int] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            counts[node.id] = counts.get(node.id, 0) + 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                values[target.id] = node.value
    return {k: v for k, v in values.items() if counts.get(k) == 1}


def _tests_a_name(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether some ``if`` in ``func`` tests a bare name (``if flag:``, ``if not flag:``)."""
    stack: list[list[ast.stmt]] = [func.body]
    while stack:
        for stmt in stack.pop():
            if isinstance(stmt, ast.If):
                test = stmt.test
                if isinstance(test, ast.UnaryOp):
                    test = test.operand
                if isinstance(test, (ast.Name, ast.BoolOp)):
                    return True
                stack.extend((stmt.body, stmt.orelse))
            else:
                stack.extend(blocks(stmt))
    return False


def _ends_in_exit(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], _EXITS)


def call_guards(
    func: ast.FunctionDef | ast.AsyncFunctionDef, self_name: str, calls: Sequence[tuple[int, int]]
) -> list[Guard]:
    """Guards of the recorded calls (``(line, col)``) inside ``func``."""
    wanted = sorted(calls)
    bound = _bound_once(func) if _tests_a_name(func) else {}
    out: list[Guard] = []
    # (statements, index, atoms in force for them)
    stack: list[tuple[list[ast.stmt], int, tuple[Atom, ...]]] = [(func.body, 0, ())]
    while stack:
        body, index, atoms = stack.pop()
        if index >= len(body):
            continue
        stmt = body[index]
        after = atoms
        yes: tuple[Atom, ...] = ()
        no: tuple[Atom, ...] = ()
        if isinstance(stmt, ast.If):
            yes = tuple(test_atoms(stmt.test, True, self_name, bound))
            no = tuple(test_atoms(stmt.test, False, self_name, bound))
            if _ends_in_exit(stmt.body) and not _ends_in_exit(stmt.orelse):
                after = atoms + no
            elif _ends_in_exit(stmt.orelse) and not _ends_in_exit(stmt.body):
                after = atoms + yes
        stack.append((body, index + 1, after))
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        inside = [c for c in wanted if first <= c[0] <= last]
        if not inside:
            continue
        if isinstance(stmt, ast.If):
            test_last = stmt.test.end_lineno or stmt.test.lineno
            for call in inside:
                if call[0] <= test_last:
                    out.append(Guard(call[0], call[1], atoms))
            stack.append((stmt.body, 0, atoms + yes))
            stack.append((stmt.orelse, 0, atoms + no))
            continue
        covered: set[tuple[int, int]] = set()
        for block in blocks(stmt):
            if block:
                b_first = block[0].lineno
                b_last = block[-1].end_lineno or block[-1].lineno
                covered.update(c for c in inside if b_first <= c[0] <= b_last)
                stack.append((block, 0, atoms))
        out.extend(Guard(line, col, atoms) for line, col in inside if (line, col) not in covered)
    return [g for g in out if g.atoms]


def rejected_classes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    """Classes ``func`` raises for: ``if isinstance(x, C): ... raise``, any subject."""
    out: list[str] = []
    for node in ast.walk(func):
        if not (isinstance(node, ast.If) and node.body and isinstance(node.body[-1], ast.Raise)):
            continue
        checked = _isinstance_of(node.test)
        if checked is not None:
            out.extend(n for n in map(dotted_name, checked[1]) if n is not None)
    return tuple(dict.fromkeys(out))
