"""Statement blocks: the bodies a compound statement holds, what a scope holds, a class's functions,
and whether a body always exits. The walks are iterative.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
"""The nodes that open a scope of their own."""


def holds(node: ast.AST, kinds: tuple[type[ast.AST], ...]) -> bool:
    """Whether ``node`` is, or holds in its own scope, a node of one of ``kinds``
    (``return``, ``yield``, ...: a nested ``def``, ``lambda`` or ``class`` is not looked into)."""
    stack = [node]
    while stack:
        child = stack.pop()
        if isinstance(child, kinds):
            return True
        if child is node or not isinstance(child, SCOPES):
            stack.extend(ast.iter_child_nodes(child))
    return False


_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)
"""What can hold a ``return``: statements, handlers and ``case`` blocks (never an expression)."""


def own_returns(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The ``return`` statements of ``func``'s own scope (not of the functions and classes it
    defines)."""
    stack: list[ast.AST] = list(func.body)
    returns: list[ast.Return] = []
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            returns.append(node)
        elif not isinstance(node, SCOPES):
            stack.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, _HOLDERS))
    return returns


def blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists a loop, ``with``, ``try`` or ``match`` holds (``[]`` otherwise)."""
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [stmt.body]
    if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
        node: ast.Try = stmt  # type: ignore[assignment]  # ast.TryStar has the same fields
        return [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
    if isinstance(stmt, ast.Match):
        return [case.body for case in stmt.cases]
    return []


def scope_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """:func:`blocks`, and an ``if``'s body and ``else`` too: every statement list of ``stmt``
    that runs in the scope ``stmt`` is in."""
    return [stmt.body, stmt.orelse] if isinstance(stmt, ast.If) else blocks(stmt)


def inner_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """Every statement list ``stmt`` holds: bodies, ``else``/``finally`` blocks, handlers and
    ``case`` bodies (a ``def`` or ``class`` body too)."""
    out: list[list[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        value = getattr(stmt, name, None)
        if isinstance(value, list):
            out.append(value)  # pyright: ignore[reportUnknownArgumentType]
    out.extend(h.body for h in getattr(stmt, "handlers", ()))
    out.extend(c.body for c in getattr(stmt, "cases", ()))
    return out


def class_functions(node: ast.ClassDef) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The ``def`` statements of a class body, also under ``if``, ``try``, ``with``, loops."""
    stack: list[ast.stmt] = list(reversed(node.body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt
        else:
            for block in reversed(scope_blocks(stmt)):
                stack.extend(reversed(block))


def always_exits(body: list[ast.stmt]) -> bool:
    """Whether ``body`` ends in ``return`` or ``raise`` on every path through its end (an
    ``if`` whose branches all do)."""
    last = body[-1] if body else None
    if isinstance(last, ast.If):
        return always_exits(last.body) and always_exits(last.orelse)
    return isinstance(last, (ast.Return, ast.Raise))
