"""The call signatures of the callables a decorated method returns (a property's value):
``@cached_property def convert(self): return self._noop`` makes ``self.convert(x)`` call
``_noop``. Read from the function's own ``return`` statements: a ``lambda``, ``self.<method>`` or a
module-level function of the file; anything else (or no return) leaves the value unknown.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from harness.overrides.facts.blocks import own_returns
from harness.overrides.facts.signature import Param, Signature, dotted_name, parameters


def _callable(
    value: ast.expr,
    self_name: str,
    methods: Mapping[str, Signature],
    functions: Mapping[str, ast.FunctionDef],
) -> tuple[Param, ...] | None:
    if isinstance(value, ast.Lambda):
        return parameters(value.args)
    if isinstance(value, ast.Name):
        function = functions.get(value.id)
        return None if function is None else parameters(function.args)
    if isinstance(value, ast.Attribute) and dotted_name(value.value) == self_name:
        method = methods.get(value.attr)
        if method is None or method.is_property or method.is_async:
            return None
        return method.explicit_params()
    return None


def returned_callables(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    self_name: str | None,
    methods: Mapping[str, Signature],
    functions: Mapping[str, ast.FunctionDef],
) -> tuple[tuple[Param, ...], ...]:
    """The parameters of each callable ``func`` returns, or ``()`` when any returned value is
    not a callable read from this file (``methods``: the class's, by name; ``functions``: the
    module's top-level ``def`` statements)."""
    if self_name is None or isinstance(func, ast.AsyncFunctionDef):
        return ()
    found: list[tuple[Param, ...]] = []
    for ret in own_returns(func):
        params = None if ret.value is None else _callable(ret.value, self_name, methods, functions)
        if params is None:
            return ()
        found.append(params)
    return tuple(dict.fromkeys(found))


def accepts(acceptor: tuple[Param, ...], declared: tuple[Param, ...]) -> bool:
    """Every call ``declared`` accepts, ``acceptor`` accepts too: the same parameters in the
    same order and kinds, and a default wherever ``declared`` has one."""
    return len(acceptor) == len(declared) and all(
        a.name == d.name and a.kind is d.kind and (a.has_default or not d.has_default)
        for a, d in zip(acceptor, declared, strict=True)
    )
