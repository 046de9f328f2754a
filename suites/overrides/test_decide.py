"""decide: a ``self.<attr>`` condition decided for a subclass from a class constant, and which
methods may change it."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.evidence.decide import KEYWORDS, QUIET, WRITES, touches
from harness.overrides.findings import Finding, Severity


def _touch(source: str, attr: str = "_hooks") -> int:
    func = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(func, ast.FunctionDef)
    return touches(func, attr)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(self):\n    if len(self._hooks) == 0:\n        return\n", QUIET),
        ("def f(self):\n    for h in self._hooks:\n        h.remove()\n", QUIET),
        ("def f(self):\n    self._hooks = []\n", WRITES),
        ("def f(self):\n    del self._hooks\n", WRITES),
        ("def f(self, model):\n    setattr(model, '_hooks', [1])\n", QUIET),
        ("def f(self, v):\n    setattr(self, '_other', v)\n", QUIET),
        ("def f(self, h):\n    self._hooks.append(h)\n", WRITES),
        ("def f(self):\n    self._hooks = [1]\n", WRITES),
        ("def f(self):\n    hooks = self._hooks\n    hooks.append(1)\n", WRITES),
        ("def f(self, name, v):\n    setattr(self, name, v)\n", WRITES),
        ("def f(self, v):\n    object.__setattr__(self, '_hooks', v)\n", WRITES),
        ("def f(self, d):\n    self.__dict__.update(d)\n", WRITES),
        ("def f(self, d):\n    vars(self).update(d)\n", WRITES),
        ("def __setattr__(self, name, value):\n    super().__setattr__(name, value)\n", QUIET),
        (
            "def f(self, **kw):\n    for k, v in kw.items():\n        setattr(self, k, v)\n",
            KEYWORDS,
        ),
        (
            "def f(self, **kw):\n    for k in kw:\n        k = k.lower()\n        setattr(self, k, 1)\n",
            WRITES,  # the name is not only a key any more
        ),
    ],
)
def test_which_uses_may_change_the_attribute(source: str, expected: int) -> None:
    assert _touch(source) == expected


KEYED = """\
class Base:
    _offloaded = False

    def register_modules(self, **kwargs):
        for name, module in kwargs.items():
            setattr(self, name, module)

    def free(self):
        if not self._offloaded:
            return
        self.offload_to(1, device=2)

    def offload_to(self, n, device=None): ...


class Sub(Base):
    def __init__(self, unet):
        self.register_modules({modules})

    def offload_to(self, n, gpu=None): ...
"""


def _findings(tmp_path: Path, source: str) -> list[Finding]:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    return check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path))).findings


def test_a_private_flag_no_call_of_a_keyword_setter_names_is_decided(tmp_path: Path) -> None:
    (finding,) = _findings(tmp_path, KEYED.format(modules="unet=unet"))
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached == (
        "it runs only if self._offloaded (at m.py:11), but Base sets _offloaded = False "
        "in its class body, and no method of Sub's classes changes self._offloaded"
    )


@pytest.mark.parametrize("modules", ["_offloaded=unet", "**{'unet': unet}"])
def test_a_keyword_setter_whose_calls_may_name_the_attribute_leaves_it_undecided(
    tmp_path: Path, modules: str
) -> None:
    (finding,) = _findings(tmp_path, KEYED.format(modules=modules))
    assert finding.severity is Severity.ERROR


def test_the_same_test_stays_an_error_when_a_method_of_the_subclass_sets_it(
    tmp_path: Path,
) -> None:
    filled = KEYED.format(modules="unet=unet").replace(
        "    def offload_to(self, n, gpu=None): ...\n",
        "    def offload(self):\n        self._offloaded = True\n\n"
        "    def offload_to(self, n, gpu=None): ...\n",
    )
    (finding,) = _findings(tmp_path, filled)
    assert finding.severity is Severity.ERROR and finding.evidence is not None
    assert finding.evidence.guards == ("self._offloaded",)


FLAGS = """\
class Base:
    _USE_BASE_FACTOR = True

    def __init__(self, factor=None):
        if self._USE_BASE_FACTOR:
            self._set_factor(factor or 0.0)

    def _set_factor(self, factor):
        return factor


class Zoom(Base):
    _USE_BASE_FACTOR = False

    def __init__(self, height):
        super().__init__()
        self.height = self._set_factor(height, "height")

    def _set_factor(self, factor, name):
        return factor
"""


def test_a_class_flag_the_subclass_sets_false_decides_the_test(tmp_path: Path) -> None:
    # As keras 3.15.1's BaseImagePreprocessingLayer and RandomZoom.
    (finding,) = _findings(tmp_path, FLAGS)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached == (
        "it runs only if self._USE_BASE_FACTOR (at m.py:6), but Zoom sets _USE_BASE_FACTOR = "
        "False in its class body, and no method of Zoom's classes changes self._USE_BASE_FACTOR"
    )


@pytest.mark.parametrize(
    "change",
    [
        # the subclass keeps the base's flag
        ("    _USE_BASE_FACTOR = False\n", ""),
        # an instance attribute set where the subclass runs
        (
            "        super().__init__()\n",
            "        self._USE_BASE_FACTOR = 1\n        super().__init__()\n",
        ),
        # the flag is set from outside
        ("class Zoom(Base):", "Base._USE_BASE_FACTOR = True\n\n\nclass Zoom(Base):"),
    ],
)
def test_a_class_flag_the_code_may_make_true_leaves_the_test_undecided(
    tmp_path: Path, change: tuple[str, str]
) -> None:
    source = FLAGS.replace(*change)
    assert source != FLAGS
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.ERROR


RULES = """\
class AbstractChartRule:
    def apply(self, chart, grammar, *edges):
        raise NotImplementedError()

    def apply_everywhere(self, chart, grammar):
        if self.NUM_EDGES == 0:
            yield from self.apply(chart, grammar)
        elif self.NUM_EDGES == 1:
            for e1 in chart:
                yield from self.apply(chart, grammar, e1)


class FundamentalRule(AbstractChartRule):
    NUM_EDGES = 2

    def apply(self, chart, grammar, left_edge, right_edge):
        yield left_edge


def count(rule):
    return rule.NUM_EDGES == 0
"""


def test_a_class_constant_decides_comparisons_of_it(tmp_path: Path) -> None:
    # As nltk 3.10.4's AbstractChartRule.apply_everywhere and its NUM_EDGES subclasses.
    found = _findings(tmp_path, RULES)
    assert {f.severity for f in found} == {Severity.WARNING}
    said = {f.evidence.unreached for f in found if f.evidence is not None}
    assert said == {
        "it runs only if self.NUM_EDGES == 0 (at m.py:7), but FundamentalRule sets NUM_EDGES "
        "= 2 in its class body, and no method of FundamentalRule's classes changes "
        "self.NUM_EDGES",
        "it runs only if self.NUM_EDGES == 1 (at m.py:10), but FundamentalRule sets "
        "NUM_EDGES = 2 in its class body, and no method of FundamentalRule's classes changes "
        "self.NUM_EDGES",
    }


def test_an_attribute_nothing_sets_decides_every_test_of_it(tmp_path: Path) -> None:
    # As nltk 3.10.4's ccg BinaryCombinatorRule, which spells it NUMEDGES.
    found = _findings(tmp_path, RULES.replace("    NUM_EDGES = 2\n", "    NUMEDGES = 2\n"))
    assert {f.severity for f in found} == {Severity.WARNING}
    assert all(
        f.evidence is not None
        and f.evidence.unreached is not None
        and f.evidence.unreached.endswith(
            "but nothing in FundamentalRule's classes sets NUM_EDGES: reading "
            "self.NUM_EDGES raises AttributeError"
        )
        for f in found
    )


@pytest.mark.parametrize(
    "change",
    [
        # the class says 1: the second branch runs
        ("    NUM_EDGES = 2\n", "    NUM_EDGES = 1\n"),
        # an instance value, set where the class runs
        (
            "    def apply(self, chart, grammar, left_edge, right_edge):\n",
            "    def __init__(self, n):\n        self.NUM_EDGES = n\n\n"
            "    def apply(self, chart, grammar, left_edge, right_edge):\n",
        ),
        # assigned from outside
        ("    return rule.NUM_EDGES == 0\n", "    rule.NUM_EDGES = 0\n"),
        # not a literal
        ("    NUM_EDGES = 2\n", "    NUM_EDGES = len('ab')\n"),
        # nothing binds it, but a class decorator may
        (
            "    NUM_EDGES = 2\n",
            "    NUMEDGES = 2\n",
            "class FundamentalRule(AbstractChartRule):",
            "@register\nclass FundamentalRule(AbstractChartRule):",
        ),
        # nothing binds it, but __getattr__ may supply it
        (
            "    NUM_EDGES = 2\n",
            "    def __getattr__(self, name):\n        return 0\n",
        ),
    ],
)
def test_a_constant_the_code_may_change_decides_nothing(
    tmp_path: Path, change: tuple[str, ...]
) -> None:
    source = RULES
    for old, new in zip(change[::2], change[1::2], strict=True):
        assert old in source
        source = source.replace(old, new)
    found = _findings(tmp_path, source)
    assert Severity.ERROR in {f.severity for f in found}
