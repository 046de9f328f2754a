"""summary: what is extracted from a file, and bad input becoming a parse failure, not a crash."""

from __future__ import annotations

import ast

import pytest

from harness.overrides.facts.signature import Param
from harness.overrides.summary import decode, summarize


def test_classes_methods_imports_and_aliases() -> None:
    source = b"""
import functools as ft
from typing import TYPE_CHECKING
from .common import MLACommonMetadataBuilder as Base
if TYPE_CHECKING:
    from ..config import VllmConfig
try:
    from fast import Impl
except ImportError:
    Impl = None
Alias = Base

class Builder(Base[int], pkg.Mixin, make()):
    block_size = 16

    def _build_decode(self, block_table, seq_lens): ...

    @ft.cached_property
    def size(self): ...

    class Inner:
        def f(self): ...
"""
    summary = summarize(source)
    assert summary.parse_failures == ()
    assert {(i.name, i.module, i.level, i.attr) for i in summary.imports} == {
        ("ft", "functools", 0, None),
        ("TYPE_CHECKING", "typing", 0, "TYPE_CHECKING"),
        ("Base", "common", 1, "MLACommonMetadataBuilder"),
        ("VllmConfig", "config", 2, "VllmConfig"),
        ("Impl", "fast", 0, "Impl"),
    }
    assert ("Alias", "Base", 11) in summary.aliases
    builder, inner = summary.classes
    assert builder.qualname == "Builder" and inner.qualname == "Builder.Inner"
    assert builder.bases == ("Base", "pkg.Mixin", None)
    assert [m.name for m in builder.methods] == ["_build_decode", "size"]
    assert builder.methods[1].is_property
    assert "block_size" in builder.attributes


def test_overload_stubs_give_way_to_the_implementation() -> None:
    source = b"""
from typing import overload
class C:
    @overload
    def f(self, a: int) -> int: ...
    @overload
    def f(self, a: str) -> str: ...
    def f(self, a): ...
"""
    (cls,) = summarize(source).classes
    (method,) = cls.methods
    assert not method.is_overload and method.line == 8


def test_ignore_comments_are_comments_not_strings() -> None:
    source = (
        b'DOC = "# harness: ignore[HO101]"\n'
        b"class C:\n"
        b"    def f(self): ...  # harness: ignore[HO101, ho102]\n"
        b"    def g(self): ...  # harness: ignore\n"
    )
    assert summarize(source).ignores == ((3, ("HO101", "ho102")), (4, ()))


def test_bad_input_is_a_parse_failure() -> None:
    cases = {
        b"class C(:\n": "syntax error",
        b"x = 1\x00\n": "NUL byte",
        b"# -*- coding: latin-1 -*-\nx = '\xe9'\n": None,
        b"x = '\xff\xfe'\n": "cannot decode",
        b"x = " + b"(" * 1000 + b")" * 1000 + b"\n": "",
        b"": None,
    }
    for data, expected in cases.items():
        failures = summarize(data).parse_failures
        if expected is None:
            assert failures == (), data[:40]
        else:
            (failure,) = failures
            assert expected in failure.reason


def test_deep_nesting_of_blocks_does_not_overflow() -> None:
    body = (
        "".join("    " * i + "if x:\n" for i in range(90))
        + "    " * 90
        + "class C:\n"
        + "    " * 91
        + "def f(self): ...\n"
    )
    summary = summarize(body.encode())
    assert len(summary.parse_failures) <= 1


def test_decode_strips_bom_and_follows_pep_263() -> None:
    assert decode(b"\xef\xbb\xbfx = 1\n") == "x = 1\n"
    assert decode(b"# coding: latin-1\ns = '\xe9'\n") == "# coding: latin-1\ns = '\xe9'\n"


def test_async_generators_are_marked() -> None:
    source = b"class C:\n    async def gen(self):\n        yield 1\n    async def coro(self):\n        def inner():\n            yield 2\n        return inner\n"
    gen, coro = summarize(source).classes[0].methods
    assert gen.async_generator and not coro.async_generator


def test_old_mac_line_endings_keep_lines_and_comments() -> None:
    source = b"class C:\r    def f(self): ...\r    def g(self): ...  # harness: ignore[HO101]\r"
    summary = summarize(source)
    assert [m.line for m in summary.classes[0].methods] == [2, 3]
    assert summary.ignores == ((3, ("HO101",)),)


def test_parse_failures_are_at_the_real_position() -> None:
    def at(data: bytes) -> tuple[int, int]:
        (failure,) = summarize(data).parse_failures
        return failure.line, failure.col

    assert at(b"class A:\n    def f(self:\n") == (2, 10)
    assert at(b"x = 1\ny = 2\x00\n") == (2, 6)
    assert at(b"x = 1\ns = '\xff'\n") == (2, 6)  # the undecodable byte
    assert at(b"# -*- coding: no-such-codec -*-\n") == (1, 1)


def test_classes_under_type_checking_are_not_run_time_classes() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    class Proto:\n        def f(self, a): ...\n"
        "else:\n    class Proto:\n        def f(self, b): ...\n"
        "class Real:\n    pass\n"
    )
    classes = summarize(source.encode()).classes
    assert [(c.qualname, c.line) for c in classes] == [("Proto", 6), ("Real", 8)]


def test_defs_classes_and_imports_under_match_cases_are_read_as_under_if() -> None:
    """A ``case`` body runs in the enclosing scope, as an ``if`` branch does: its classes,
    methods and imports are the module's or the class's."""
    source = (
        "import sys\n"
        "match sys.platform:\n"
        "    case 'win32':\n"
        "        from nt import Base\n"
        "        class Top(Base):\n"
        "            pass\n"
        "class Sub:\n"
        "    match sys.version_info:\n"
        "        case (3, _, *_):\n"
        "            def run(self, block_table_tensor): ...\n"
    )
    summary = summarize(source.encode())
    assert [c.qualname for c in summary.classes] == ["Top", "Sub"]
    assert ("Base", "nt") in {(i.name, i.module) for i in summary.imports}
    (sub,) = [c for c in summary.classes if c.qualname == "Sub"]
    assert [(m.name, [p.name for p in m.params]) for m in sub.methods] == [
        ("run", ["self", "block_table_tensor"])
    ]


def test_module_functions_are_read_only_for_the_methods_that_return_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A file's top-level ``def`` parameters are read on demand: here once, for the function a
    cached property returns, never for the many others."""
    from harness.overrides.facts import returned

    others = "".join(f"def helper_{i}(a, b=1, *c, **d):\n    return a\n\n" for i in range(30))
    source = (
        "import functools\n\n"
        f"{others}"
        "def noop(value, expression, connection):\n    return value\n\n"
        "class Field:\n"
        "    @functools.cached_property\n"
        "    def convert(self):\n        return noop\n"
    )
    read: list[int] = []
    real = returned.parameters

    def counting(args: ast.arguments) -> tuple[Param, ...]:
        read.append(len(args.args))
        return real(args)

    monkeypatch.setattr(returned, "parameters", counting)
    (field,) = summarize(source.encode()).classes
    (convert,) = field.methods
    assert [p.name for p in convert.returns[0]] == ["value", "expression", "connection"]
    assert read == [3]
