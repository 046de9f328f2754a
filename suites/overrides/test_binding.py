"""binding.bind must reproduce CPython's own TypeError text for every call shape."""

from __future__ import annotations

import ast
import itertools
from typing import Any

import pytest

from harness.overrides.evidence.binding import CallShape, bind, bind_method
from harness.overrides.facts.signature import from_function

SIGNATURES = [
    "def f(self, a, b)",
    "def f(self, a, b=1)",
    "def f(self, a, /, b)",
    "def f(self, a, *, b)",
    "def f(self, a, *, b=2)",
    "def f(self, *args)",
    "def f(self, a, **kw)",
    "def f(self, a, /, b, *args, c, d=1, **kw)",
    "def f(self)",
    "def f(self, a, b, c)",
]
KEYWORDS = [(), ("a",), ("b",), ("c",), ("zz",), ("b", "zz"), ("a", "b"), ("b", "c", "d")]


class _Host:
    pass


def _real_error(source: str, n_positional: int, keywords: tuple[str, ...]) -> str | None:
    namespace: dict[str, Any] = {}
    exec(f"class C:\n    {source}: pass\n", namespace)  # test-local code, not scanned code
    method = namespace["C"]().f
    try:
        method(*range(n_positional), **dict.fromkeys(keywords, 0))
    except TypeError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("source", SIGNATURES)
def test_matches_cpython_for_every_shape(source: str) -> None:
    node = ast.parse(f"{source}: pass").body[0]
    assert isinstance(node, ast.FunctionDef)
    sig = from_function(node, {})
    for n_positional, keywords in itertools.product(range(5), KEYWORDS):
        shape = CallShape(n_positional, keywords)
        ours = bind_method(shape, sig, "C.f", through_instance=True)
        assert ours == _real_error(source, n_positional, keywords), (source, shape)


def test_the_vllm_crash_message() -> None:
    node = ast.parse("def _build_decode(self, block_table, seq_lens): pass").body[0]
    assert isinstance(node, ast.FunctionDef)
    sig = from_function(node, {})
    shape = CallShape(0, ("block_table_tensor", "seq_lens"))
    assert bind_method(
        shape, sig, "AiterMLAMetadataBuilder._build_decode", through_instance=True
    ) == (
        "AiterMLAMetadataBuilder._build_decode() got an unexpected keyword argument "
        "'block_table_tensor'"
    )


def test_unpacked_arguments_skip_what_they_might_supply() -> None:
    node = ast.parse("def f(self, a, b): pass").body[0]
    assert isinstance(node, ast.FunctionDef)
    params = from_function(node, {}).params
    assert bind(CallShape(0, (), star=True), params, "C.f", implicit=1) is None
    assert bind(CallShape(0, (), starstar=True), params, "C.f", implicit=1) is None
    # ... but an explicit unknown keyword still fails, and so do too many positionals.
    assert "unexpected keyword argument 'x'" in (
        bind(CallShape(0, ("x",), star=True), params, "C.f", implicit=1) or ""
    )
    assert "takes 3 positional arguments but 4 were given" in (
        bind(CallShape(3, (), star=True), params, "C.f", implicit=1) or ""
    )


def test_static_and_class_methods_bind_their_own_way() -> None:
    tree = ast.parse(
        "class C:\n"
        "    @staticmethod\n    def s(a): pass\n"
        "    @classmethod\n    def c(cls, a): pass\n"
    )
    cls = tree.body[0]
    assert isinstance(cls, ast.ClassDef)
    static, klass = (from_function(n, {}) for n in cls.body if isinstance(n, ast.FunctionDef))
    assert bind_method(CallShape(1, ()), static, "C.s", through_instance=True) is None
    assert bind_method(CallShape(1, ()), klass, "C.c", through_instance=False) is None
    assert bind_method(CallShape(2, ()), klass, "C.c", through_instance=True) == (
        "C.c() takes 2 positional arguments but 3 were given"
    )
