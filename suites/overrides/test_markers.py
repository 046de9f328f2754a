"""markers: a mark a decorator puts on a method, read by a test, decided for a subclass."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.evidence.markers import flag_tested, marker_flags
from harness.overrides.findings import Finding, Severity

UTILS = """\
def default(method):
    \"\"\"Marks a method as the default implementation.\"\"\"
    method._is_default = True
    return method


def is_default(method):
    return getattr(method, "_is_default", False)
"""

LAYERS = """\
from pkg import utils


class Layer:
    @utils.default
    def build(self, input_shape):
        self.built = True

    def _maybe_build(self, shapes):
        if not utils.is_default(self.build):
            self.build(**shapes)
            return
        self.build(next(iter(shapes.values())))


class Attention(Layer):
    def build(self, query_shape, value_shape):
        self.built = True
"""


def _findings(tmp_path: Path, layers: str = LAYERS, utils: str = UTILS) -> list[Finding]:
    package = tmp_path / "pkg"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "utils.py").write_text(utils, encoding="utf-8")
    (package / "layers.py").write_text(layers, encoding="utf-8")
    result = check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path)))
    return [f for f in result.findings if f.method == "build"]


@pytest.mark.parametrize(
    ("source", "flag"),
    [
        ("def f(m):\n    return getattr(m, 'x', False)\n", "x"),
        ("def f(m):\n    '''Doc.'''\n    return hasattr(m, 'x')\n", "x"),
        ("def f(m):\n    return getattr(m, 'x', True)\n", None),
        ("def f(m):\n    return getattr(other, 'x', None)\n", None),
        ("def f(m, n):\n    return getattr(m, 'x', None)\n", None),
    ],
)
def test_which_functions_test_a_mark(source: str, flag: str | None) -> None:
    func = ast.parse(source).body[0]
    assert isinstance(func, ast.FunctionDef)
    assert flag_tested(func) == flag


@pytest.mark.parametrize(
    ("source", "flags"),
    [
        ("def f(m):\n    m._a = True\n    m._b = 1\n    return m\n", {"_a", "_b"}),
        ("def f(m):\n    m._a = False\n    return m\n", set()),
        ("def f(m):\n    m._a = True\n    return wrap(m)\n", set()),
        ("def f(m):\n    log(m)\n    m._a = True\n    return m\n", set()),
    ],
)
def test_which_functions_mark_what_they_decorate(source: str, flags: set[str]) -> None:
    func = ast.parse(source).body[0]
    assert isinstance(func, ast.FunctionDef)
    assert marker_flags(func) == flags


def test_an_override_without_the_marking_decorator_does_not_reach_the_default_path(
    tmp_path: Path,
) -> None:
    # As keras 3.15.1's Layer._maybe_build and MultiHeadAttention.build.
    (finding,) = _findings(tmp_path)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached == (
        "it runs only if utils.is_default(self.build) (at pkg/layers.py:13), but "
        "Attention.build() has no decorator that sets _is_default"
    )


def test_the_same_test_written_inline_is_decided(tmp_path: Path) -> None:
    inline = LAYERS.replace(
        "utils.is_default(self.build)", 'getattr(self.build, "_is_default", False)'
    )
    (finding,) = _findings(tmp_path, inline)
    assert finding.severity is Severity.WARNING


@pytest.mark.parametrize(
    ("layers", "utils"),
    [
        # the override keeps the mark
        (
            LAYERS.replace(
                "class Attention(Layer):\n", "class Attention(Layer):\n    @utils.default\n"
            ),
            UTILS,
        ),
        # a decorator the checker cannot read
        (
            LAYERS.replace(
                "class Attention(Layer):\n", "class Attention(Layer):\n    @unknown.wrap\n"
            ),
            UTILS,
        ),
        # the mark is set by hand somewhere
        (LAYERS + "\nAttention.build._is_default = True\n", UTILS),
        # the tester is something else
        (
            LAYERS,
            UTILS.replace('return getattr(method, "_is_default", False)', "return check(method)"),
        ),
    ],
)
def test_the_error_stays_when_the_mark_may_be_there(
    tmp_path: Path, layers: str, utils: str
) -> None:
    (finding,) = _findings(tmp_path, layers, utils)
    assert finding.severity is Severity.ERROR
