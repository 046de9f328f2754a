"""Decorators and descriptors as a file defines them: unknown method decorators, classes
whose ``__get__`` reads as a value or binds a method, and functions that wrap another.
"""

from __future__ import annotations

import ast

from harness.overrides.facts.blocks import class_functions
from harness.overrides.facts.records import (
    DESCRIPTOR_METHOD,
    DESCRIPTOR_NONE,
    DESCRIPTOR_VALUE,
    Wrapper,
)
from harness.overrides.facts.signature import (
    Param,
    ParamKind,
    canonical_decorator,
    dotted_name,
    first_param,
    parameters,
)


def unknown_decorators(
    func: ast.FunctionDef | ast.AsyncFunctionDef, aliases: dict[str, str]
) -> tuple[str, ...]:
    out: list[str] = []
    for dec in func.decorator_list:
        if canonical_decorator(dec, aliases) is None:
            name = dotted_name(dec.func if isinstance(dec, ast.Call) else dec)
            out.append("?" if name is None else f"{name}()" if isinstance(dec, ast.Call) else name)
    return tuple(out)


def descriptor_kind(node: ast.ClassDef) -> int:
    """Whether the class body defines ``__get__`` (also under ``if``), and how it returns:
    binding the function (``fn.__get__(obj)``, ``MethodType(fn, obj)``, ``partial(fn, obj)``)
    reads as a method, anything else as a value."""
    gets = [f for f in class_functions(node) if f.name == "__get__"]
    if not gets:
        return DESCRIPTOR_NONE
    binders = ("__get__", "MethodType", "partial")
    for inner in (node for get in gets for node in ast.walk(get)):
        callee = dotted_name(inner.func) if isinstance(inner, ast.Call) else None
        if callee is not None and callee.rpartition(".")[2] in binders:
            return DESCRIPTOR_METHOD
    return DESCRIPTOR_VALUE


def _returned_function(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The nested function ``func`` returns: ``return inner``, ``return update_wrapper(inner,
    fn)`` or ``return wraps(fn)(inner)``."""
    inner = {s.name: s for s in func.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if not inner or not isinstance(func.body[-1], ast.Return):
        return None
    value = func.body[-1].value
    if isinstance(value, ast.Call) and value.args:
        outer = value.func.func if isinstance(value.func, ast.Call) else None
        callee = dotted_name(value.func if outer is None else outer)
        wanted = "update_wrapper" if outer is None else "wraps"
        if callee is not None and callee.rpartition(".")[2] == wanted:
            value = value.args[0]
    return inner.get(value.id) if isinstance(value, ast.Name) else None


def wrapper_of(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Wrapper | None:
    """``func`` as a decorator that replaces a function by an inner one, if it is one: the
    inner function it returns must use the decorated function (the parameter of the
    function that receives it) without taking a parameter of that name itself."""
    inner = _returned_function(func)
    if inner is None:
        return None
    holder, factory = func, False
    nested = _returned_function(inner)
    if nested is not None:  # def deco(arg): def decorator(fn): def wrap(...)
        holder, inner, factory = inner, nested, True
    wrapped = first_param(holder)
    if wrapped is None or not _uses(inner, wrapped):
        return None
    params = parameters(inner.args)
    kinds = {p.kind for p in params}
    passthrough = ParamKind.VAR_POSITIONAL in kinds and ParamKind.VAR_KEYWORD in kinds
    if passthrough and inner.args.kwarg is not None:  # popped keywords: before **kwargs (last)
        names = {p.name for p in params}
        popped = popped_keywords(inner, inner.args.kwarg.arg)
        extra = [Param(n, ParamKind.KEYWORD_ONLY, True) for n in popped if n not in names]
        params = (*params[:-1], *extra, params[-1])
    return Wrapper(func.name, func.lineno, params, factory, passthrough)


def popped_keywords(func: ast.FunctionDef | ast.AsyncFunctionDef, kwargs: str) -> list[str]:
    """Keywords ``func`` takes out of its ``**kwargs`` (``kwargs.pop("k", ...)``), in order, each
    once: the wrapped function never receives them (absent, it is a KeyError, not a TypeError)."""
    out: dict[str, None] = {}
    for stmt in func.body:
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "pop"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == kwargs
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and not node.keywords
            ):
                out[node.args[0].value] = None
    return list(out)


def _uses(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether ``func``'s body calls ``name`` or passes it to a call, ``name`` coming from an
    enclosing scope (``fn(*args)``, ``run(fn, ...)``)."""
    if any(p.name == name for p in parameters(func.args)):
        return False

    def named(node: ast.expr) -> bool:
        if isinstance(node, ast.Starred):
            node = node.value
        return isinstance(node, ast.Name) and node.id == name

    for stmt in func.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and (
                named(node.func)
                or any(named(a) for a in node.args)
                or any(named(k.value) for k in node.keywords)
            ):
                return True
    return False
