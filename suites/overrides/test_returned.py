"""The callables a decorated method returns, read from its ``return`` statements."""

from __future__ import annotations

import ast

import pytest

from harness.overrides.facts.returned import accepts, returned_callables
from harness.overrides.facts.signature import Param, ParamKind, from_function

_POS = ParamKind.POSITIONAL_OR_KEYWORD


def _returns(source: str) -> tuple[tuple[Param, ...], ...]:
    module = ast.parse(source)
    functions = {s.name: s for s in module.body if isinstance(s, ast.FunctionDef)}
    (cls,) = (s for s in module.body if isinstance(s, ast.ClassDef))
    defs = [s for s in cls.body if isinstance(s, ast.FunctionDef)]
    methods = {d.name: from_function(d, {}) for d in defs}
    return returned_callables(defs[0], "self", methods, functions)


def _names(found: tuple[tuple[Param, ...], ...]) -> list[list[str]]:
    return [[p.name for p in params] for params in found]


def test_lambda_static_method_and_module_function() -> None:
    source = (
        "def conv(value, expression, connection): pass\n"
        "class E:\n"
        "    def convert_value(self):\n"
        "        if self.x:\n"
        "            return lambda value, expression, connection: value\n"
        "        if self.y:\n"
        "            return conv\n"
        "        return self._noop\n"
        "    @staticmethod\n"
        "    def _noop(value, expression, connection): pass\n"
    )
    assert _names(_returns(source)) == [["value", "expression", "connection"]]


def test_bound_method_drops_self() -> None:
    source = "class E:\n    def f(self):\n        return self._g\n    def _g(self, value): pass\n"
    assert _names(_returns(source)) == [["value"]]


@pytest.mark.parametrize(
    "body",
    [
        "return None",
        "return",
        "return 3",
        "return self.missing",
        "return unknown_function",
        "pass",
        "if self.x:\n            return lambda v: v\n        return 0",
    ],
)
def test_a_value_not_known_to_be_callable_is_unknown(body: str) -> None:
    assert _returns(f"class E:\n    def f(self):\n        {body}\n") == ()


def test_returns_of_nested_functions_are_not_the_methods() -> None:
    source = "class E:\n    def f(self):\n        def inner():\n            return 1\n        return inner\n"
    assert _returns(source) == ()


def test_accepts_needs_the_same_names_kinds_and_defaults() -> None:
    a, b = Param("a", _POS, False), Param("b", _POS, False)
    assert accepts((a, b), (a, b))
    assert not accepts((b, a), (a, b))
    assert not accepts((a,), (a, b))
    assert accepts((a, b._replace(has_default=True)), (a, b))
    assert not accepts((a, b), (a, b._replace(has_default=True)))
