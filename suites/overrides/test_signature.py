"""signature: parameter kinds, defaults, decorators through import aliases, rendering."""

from __future__ import annotations

import ast

from harness.overrides.facts.signature import (
    MethodKind,
    Param,
    ParamKind,
    Signature,
    canonical_decorator,
    from_function,
)


def parse(source: str, aliases: dict[str, str] | None = None) -> Signature:
    node = ast.parse(source).body[-1]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    return from_function(node, aliases or {})


def test_every_parameter_kind_and_default() -> None:
    sig = parse("def f(self, a, /, b, c=1, *args, d, e=2, **kw): pass")
    assert sig.params == (
        Param("self", ParamKind.POSITIONAL_ONLY, False),
        Param("a", ParamKind.POSITIONAL_ONLY, False),
        Param("b", ParamKind.POSITIONAL_OR_KEYWORD, False),
        Param("c", ParamKind.POSITIONAL_OR_KEYWORD, True),
        Param("args", ParamKind.VAR_POSITIONAL, False),
        Param("d", ParamKind.KEYWORD_ONLY, False),
        Param("e", ParamKind.KEYWORD_ONLY, True),
        Param("kw", ParamKind.VAR_KEYWORD, False),
    )
    assert [p.name for p in sig.explicit_params()] == ["a", "b", "c", "args", "d", "e", "kw"]
    assert sig.render("C.f") == "def C.f(self, a, /, b, c=..., *args, d, e=..., **kw)"


def test_keyword_only_marker_is_rendered() -> None:
    assert parse("def f(self, *, a): pass").render() == "def f(self, *, a)"


def test_decorators_resolve_through_aliases() -> None:
    aliases = {"ft": "functools", "ov": "typing_extensions.override", "abc": "abc"}
    sig = parse("@ft.cached_property\n@ov\ndef f(self): pass", aliases)
    assert sig.is_property and sig.has_override_decorator
    assert parse("@abc.abstractmethod\ndef f(self): pass", aliases).decorators == {"abstractmethod"}
    assert parse("@staticmethod\ndef f(a): pass").kind is MethodKind.STATIC
    assert parse("@classmethod\ndef f(cls): pass").kind is MethodKind.CLASS
    assert parse("@x.setter\ndef x(self, v): pass").is_property
    assert parse("@typing.overload\ndef f(self): pass").is_overload


def test_shadowed_builtin_decorator_is_not_trusted() -> None:
    # `from mylib import property` is not the builtin.
    assert (
        canonical_decorator(ast.parse("property", mode="eval").body, {"property": "mylib.property"})
        is None
    )
    assert canonical_decorator(ast.parse("torch.no_grad()", mode="eval").body, {}) is None


def test_implicit_class_and_static_methods() -> None:
    assert parse("def __init_subclass__(cls, **kw): pass").kind is MethodKind.CLASS
    assert parse("def __new__(cls): pass").kind is MethodKind.STATIC


def test_async_and_position() -> None:
    sig = parse("x = 1\nasync def f(self): pass")
    assert sig.is_async and sig.line == 2 and sig.col == 0
    assert sig.render().startswith("async def f(")
